"""``python -m groundtrace.cli``: the ``groundtrace`` command."""

from groundtrace.cli import main

main()
