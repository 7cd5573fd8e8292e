"""The sink tests' loopback fixtures, for the source tests that read from (and write back to) the
same scripted APIs on 127.0.0.1."""

from tests.sinks.conftest import loopback, refused_url  # noqa: F401 - fixtures, found by name
