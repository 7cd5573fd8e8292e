"""`groundtrace review`: review and label scored answers in a local web app (groundtrace.review)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Annotated, Optional

import typer

from groundtrace.cli.common import NO_RECORDS_WHY, console, shown, store_or


def review_command(
    scores: Annotated[Optional[Path], typer.Argument(help="A scores file (`groundtrace score -o`, or the default store). Default: the default store (GROUNDTRACE_JSONL_PATH, else ./groundtrace-scores.jsonl).")] = None,
    labels: Annotated[Optional[Path], typer.Option("--labels", "-l", help="The labels file decisions are appended to (one JSON line each; reopening resumes). Default: SCORES with .labels.jsonl.")] = None,
    host: Annotated[str, typer.Option(help="Where to serve: loopback unless you mean otherwise (another address, such as 0.0.0.0: the page opens only from the URL with its token printed at start).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port (0: any free one).")] = 8765,
    trace_url: Annotated[Optional[str], typer.Option(help="A link per record to its trace: a URL with {trace_id}, {span_id}, {run_id}, {session_id} or {id} (env GROUNDTRACE_TRACE_URL).")] = None,
    reviewer: Annotated[str, typer.Option(help="Your name, written with each decision.")] = "",
    open_browser: Annotated[bool, typer.Option("--open/--no-open", help="Open the page in a browser.")] = True,
) -> None:
    """Review and label scored answers in a local web app: the answers nearest a threshold first, the flagged
    text and the passages it was checked against, keys s / u / x to label; decisions go to a labels file
    that `fit --labels` and `bench --labels` read."""
    from rich.markup import escape

    from groundtrace.config import trace_url as trace_url_from_env
    from groundtrace.io import read_scored
    from groundtrace.report.trace_links import check_template
    from groundtrace.review.app import Review, create_app, exposed

    template = trace_url or trace_url_from_env()
    if template is not None:
        try:  # as `report` does: one line and exit 2, before anything is read or served
            check_template(template)
        except ValueError as error:
            console.print(f"[red]error:[/red] {escape(str(error))}", soft_wrap=True)
            raise typer.Exit(2) from None
    path = store_or(scores)
    try:
        rows = list(read_scored(path))
    except FileNotFoundError:
        console.print(f"[red]error:[/red] no scores file at {path}: score some answers first "
                      "(groundtrace score FILE -o scores.jsonl, or run your app with groundtrace attached)", soft_wrap=True)
        raise typer.Exit(2) from None
    except ValueError as error:
        console.print(f"[red]error:[/red] {path} is not a scores file: {shown(error)}", soft_wrap=True)
        raise typer.Exit(2) from None
    if not rows:
        console.print(NO_RECORDS_WHY.format(path=path), soft_wrap=True)
        raise typer.Exit(1)
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as error:
        from groundtrace.errors import missing_extra

        console.print(f"[red]error:[/red] {missing_extra('review', 'the review app', error)}", soft_wrap=True)
        raise typer.Exit(2) from None
    from groundtrace.io.labels import labels_path_for

    labels_path = labels or labels_path_for(Path(path))
    review = Review(rows, labels_path, source=str(path), trace_url=template, reviewer=reviewer)
    listening = _bind(host, port)  # bound here: a busy port is said plainly, and --port 0 gets its number
    address, port = listening.getsockname()[:2]
    remote = exposed(address)  # the address bound, not the name given: a name for this machine's LAN address is remote
    app = create_app(review, host=host, port=port, remote=remote)  # remote: one WARNING that the answers are exposed
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    # beyond loopback the page is served only with its token: the URL to open carries it (a wildcard: by this machine's name)
    shown_host = socket.gethostname() if remote and ipaddress.ip_address(address).is_unspecified else host
    url = f"http://{shown_host}:{port}/" + (f"?token={app.state.token}" if remote else "")
    console.print(f"reviewing {len(rows)} answers of {path} at {url}; decisions go to {labels_path}. Ctrl+C stops.",
                  soft_wrap=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)  # the socket already listens: the page waits for the server, never fails
    server.run(sockets=[listening])


def _bind(host: str, port: int) -> socket.socket:
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart reuses its port
    try:
        listening.bind((host, port))
        listening.listen(64)
    except OSError as error:
        listening.close()
        console.print(f"[red]error:[/red] cannot serve on {host}:{port}: {error.strerror or error}; another "
                      "review may be running there: try --port 0 (any free port) or another --port", soft_wrap=True)
        raise typer.Exit(2) from None
    return listening


__all__ = ["review_command"]
