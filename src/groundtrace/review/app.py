"""``groundtrace review``: a local web app to review and label scored answers (Starlette, Jinja templates).

It serves one page and a small JSON API on 127.0.0.1: the queue (review/queue.py), one record with its
flagged spans and the passages each flagged claim was checked against (review/evidence.py), a label
(appended and fsynced to the labels file before the answer says "saved": review/labels.py), the
progress toward a fit, and a fit run on what is labelled. Requests must come from the page itself:
the Host must be the address it serves on (no DNS rebinding), and every call carries the page's
token in a header, which another site's page cannot set (no cross-site writes to the labels file).
Served beyond loopback (``--host 0.0.0.0``), the page holds that token, so it is served only to a browser that
already has it: from the URL ``groundtrace review`` prints (``/?token=...``), then from a cookie it sets.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundtrace.review.evidence import checked_claims
from groundtrace.report.trace_links import check_template, trace_link
from groundtrace.io.labels import CHOICES, Decision, append, decide, read_decisions, read_labels
from groundtrace.review.queue import Filters, Item, item_of, progress, queue
from groundtrace.redaction import get_logger
from groundtrace.score import Score, ScoredRecord

log = get_logger("groundtrace.review")

TOKEN_HEADER = "X-Groundtrace-Token"
FIT_TIMEOUT_S = 600
#: the bytes a decision may take on the wire (a note is at most 2,000 characters): larger bodies are refused, unread
MAX_BODY_BYTES = 64 * 1024


class Review:
    """The state behind the app: the scored rows (read once), the labels file (read on every change, so
    that two reviewers on one file see each other's decisions), the trace link template."""

    def __init__(self, rows: Sequence[ScoredRecord], labels_path: Path, *, source: str = "",
                 trace_url: str | None = None, reviewer: str = "") -> None:
        self.rows = list(rows)
        self.labels_path = labels_path
        self.source = source
        if trace_url:
            check_template(trace_url)  # a bad template is the user's to fix, said before the app starts
        self.trace_url = trace_url
        self.reviewer = reviewer
        self.items = [item_of(row, i) for i, row in enumerate(self.rows)]
        self.by_id = {item.id: item for item in self.items}
        self._lock = threading.Lock()  # one append at a time from this process (O_APPEND covers other processes)

    def decisions(self) -> dict[str, Decision]:
        return read_decisions(self.labels_path)

    def label(self, record_id: str, label: str, note: str = "") -> Decision:
        if record_id not in self.by_id:
            raise KeyError(record_id)
        decision = decide(record_id, label, note, self.reviewer)
        with self._lock:
            append(self.labels_path, decision)
        return decision

    def queue_json(self, filters: Filters) -> dict[str, Any]:
        decisions = self.decisions()
        items = queue(self.rows, filters, decisions)
        return {"items": [self._summary(item, decisions.get(item.id)) for item in items],
                "progress": progress(decisions, self.by_id).as_json()}

    def _summary(self, item: Item, decision: Decision | None) -> dict[str, Any]:
        record = item.row.record
        return {"id": item.id, "tier": item.tier, "question": (record.question or "")[:200],
                "flagged": sorted(m for m, s in item.scores.items() if s.ok and s.hallucinated),
                "label": decision.label if decision else None}

    def record_json(self, record_id: str) -> dict[str, Any]:
        item = self.by_id[record_id]
        record = item.row.record
        decision = self.decisions().get(record_id)
        language = item.language or "en"
        return {
            "id": item.id, "question": record.question or "", "answer": record.answer or "",
            "contexts": record.contexts or [], "language": item.language, "session": item.session,
            "metadata": {k: v for k, v in record.metadata.items() if isinstance(v, (str, int, float, bool))},
            "scores": [_score_json(score) for score in item.row.scores],
            "claims": [{"start": c.start, "end": c.end, "text": c.text, "metrics": list(c.metrics),
                        "passages": [{"context": p.context, "start": p.start, "end": p.end, "text": p.text}
                                     for p in c.passages]}
                       for c in checked_claims(item.row, language)],
            "decision": {"label": decision.label, "note": decision.note} if decision else None,
            "trace_link": self.trace_link(item),
        }

    def trace_link(self, item: Item) -> str | None:
        """The user's template filled with this record's ids (groundtrace.report.trace_links: URL-encoded,
        http and https only); None where an id it names is missing."""
        return trace_link(self.trace_url, item.row)

    def labels(self) -> dict[str, int]:
        """The 0/1 labels of this file's records, as the shared views and ``fit --labels`` read them."""
        return {key: label for key, label in read_labels(self.labels_path).items() if key in self.by_id}

    @property
    def verdict_path(self) -> Path:
        """Where the fit button saves its verdict: beside the labels file (scores.labels.jsonl -> scores.verdict.json)."""
        stem = self.labels_path.name.removesuffix(".jsonl").removesuffix(".labels")
        return self.labels_path.with_name(f"{stem}.verdict.json")

    def fit(self) -> dict[str, Any]:
        """``groundtrace fit`` on the labelled records (the scores already in the file are reused): its figures as
        rows for the page's table, its warnings, and the verdict saved beside the labels file."""
        decisions = self.decisions()
        metrics = sorted({score.metric for row in self.rows for score in row.scores if score.ok})
        verdict = self.verdict_path
        with tempfile.TemporaryDirectory(prefix="groundtrace-review-fit-") as folder:
            labelled, scores = (Path(folder) / name for name in ("labelled.jsonl", "scores.jsonl"))
            kept = 0
            with open(labelled, "w", encoding="utf-8") as records, open(scores, "w", encoding="utf-8") as scored:
                for item in self.items:
                    label = decisions[item.id].hallucinated if item.id in decisions else None
                    if label is None:
                        continue
                    kept += 1
                    record = item.row.record
                    records.write(json.dumps({"id": item.id, "question": record.question, "contexts": record.contexts,
                                              "answer": record.answer, "language": record.language, "label": label},
                                             ensure_ascii=False) + "\n")
                    scored.write(item.row.model_copy(update={"id": item.id}).model_dump_json() + "\n")
            command = [sys.executable, "-m", "groundtrace.cli", "fit", str(labelled), "--scores", str(scores),
                       "-o", str(verdict), "--json", *(f"--metrics={m}" for m in metrics)]
            environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "140", "TERM": "dumb"}
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=FIT_TIMEOUT_S, env=environment,
                                      check=False)
            except subprocess.TimeoutExpired:
                return {"ok": False, "labelled": kept, "output": f"fit ran past {FIT_TIMEOUT_S} s and was stopped"}
        if done.returncode != 0:  # fit's own words: too few labels, a missing extra
            return {"ok": False, "labelled": kept, "output": (done.stdout + done.stderr).strip()}
        report = json.loads(done.stdout[done.stdout.index("{"):])
        columns = ("auc", "f1", "precision", "recall", "balanced_accuracy", "flagged_rate")
        rows = [{"scorer": "combined" if m is report["combined"] else f"{m['name']} alone", **{c: m.get(c) for c in columns}}
                for m in (report["combined"], *report["alone"])]
        return {"ok": True, "labelled": kept, "verdict": str(verdict), "threshold": report["threshold"], "rows": rows,
                "warnings": report.get("warnings", []), "use": f"GROUNDTRACE_VERDICT_FILE={verdict}"}


def _score_json(score: Score) -> dict[str, Any]:
    return {"metric": score.metric, "value": score.value, "threshold": score.threshold, "hallucinated": score.hallucinated,
            "ok": score.ok, "reason": score.reason or score.error or "", "higher_is_better": score.higher_is_better,
            "spans": [{"start": s.start, "end": s.end, "label": s.label} for s in score.spans]}


def exposed(host: str) -> bool:
    """Whether an app bound to ``host`` is reachable from other machines: any address but loopback (0.0.0.0 is
    every interface). A name is read as its first address; one that resolves nowhere cannot be bound."""
    if host.strip("[]").lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        return not ipaddress.ip_address(socket.getaddrinfo(host, None)[0][4][0]).is_loopback
    except (OSError, IndexError, ValueError):
        return False


def machine_names() -> set[str]:
    """The names a colleague may reach this machine by: its name, its full name, and the addresses that name
    resolves to (the bind address itself is accepted as well; a wildcard is no name a browser sends)."""
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    return {name for name in names if name}


def create_app(review: Review, *, host: str = "127.0.0.1", port: int = 0, remote: bool | None = None) -> Any:
    """The Starlette app over ``review``. ``host``/``port``: where it serves (the Host header checked).
    ``remote`` (default: whether ``host`` is reachable from other machines): the page and the rates page then
    need the token too, from ``/?token=`` (``app.state.token``) or the cookie that request sets; one WARNING says so."""
    from jinja2 import Environment, PackageLoader, select_autoescape
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    token = secrets.token_urlsafe(24)
    remote = exposed(host) if remote is None else remote
    cookie = f"groundtrace-review-{port}"  # a cookie is per host, not per port: two reviews keep theirs apart
    if remote:
        log.warning("groundtrace review serves on %s:%s, reachable from the network: the review page and the "
                    "answers and contexts it shows are open to anyone who has its token URL", host, port)
    templates = Environment(loader=PackageLoader("groundtrace.review", "templates"),
                            autoescape=select_autoescape(default=True, default_for_string=True))

    # the pages' scripts and styles are inline, nothing is fetched from elsewhere; no framing (clickjacking)
    headers = {"Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                          "script-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
               "Cache-Control": "no-store"}

    def authorised(request: Request) -> bool:
        return secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), token)

    def too_large() -> Response:
        return JSONResponse({"error": f"a decision is at most {MAX_BODY_BYTES} bytes"}, 413)

    def denied() -> Response:
        return JSONResponse({"error": "this API answers the review page only (missing or wrong token)"}, 403)

    def let_in(request: Request) -> Response | None:
        """Beyond loopback, the pages (which hold the token) only for a browser that has it already: in the URL
        printed at start, then in the cookie set from it. None: served."""
        if not remote:
            return None
        given = request.query_params.get("token") or request.cookies.get(cookie)
        if given is not None and secrets.compare_digest(given.encode(), token.encode()):  # bytes: any text compares
            return None
        said = "a wrong token" if given else "no token"
        return PlainTextResponse(f"{said}: open the URL printed by `groundtrace review` (http://...:{port}/?token=...)\n",
                                 403 if given else 401, headers=headers)

    def served(request: Request, html: str) -> Response:
        response = HTMLResponse(html, headers=headers)
        if remote and "token" in request.query_params:  # HttpOnly: no script reads it; Strict: no other site sends it
            response.set_cookie(cookie, token, httponly=True, samesite="strict", path="/")
        return response

    async def page(request: Request) -> Response:
        if (refused := let_in(request)) is not None:
            return refused
        html = templates.get_template("review.html.j2").render(
            token=token, source=review.source, labels=str(review.labels_path), choices=CHOICES,
            metrics=sorted({score.metric for row in review.rows for score in row.scores}),
            progress=progress(review.decisions(), review.by_id).sentence())
        return served(request, html)

    async def views(request: Request) -> Response:
        """The views the report shares (threshold sliders with their confusion cells, breakdowns), over the
        labels decided so far: a reload shows the latest."""
        from groundtrace.report.views import views_html

        if (refused := let_in(request)) is not None:
            return refused
        html = templates.get_template("rates.html.j2").render(
            views=views_html(review.rows, review.labels(), trace_url=review.trace_url),
            ids=[item.id for item in review.items], progress=progress(review.decisions(), review.by_id).sentence())
        return served(request, html)

    async def queue_api(request: Request) -> Response:
        if not authorised(request):
            return denied()
        return JSONResponse(review.queue_json(Filters.of(request.query_params)))

    async def record_api(request: Request) -> Response:
        if not authorised(request):
            return denied()
        record_id = request.query_params.get("id", "")
        if record_id not in review.by_id:
            return JSONResponse({"error": "no record with this id in the scores file"}, 404)
        return JSONResponse(review.record_json(record_id))

    async def label_api(request: Request) -> Response:
        if not authorised(request):
            return denied()
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:  # refused before a byte of it is read
            return too_large()
        raw = bytearray()
        async for chunk in request.stream():  # a body sent without a length: read only up to the bound
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                return too_large()
        try:
            body = json.loads(raw)
            decision = review.label(str(body.get("id") or ""), str(body.get("label") or ""), str(body.get("note") or ""))
        except KeyError:
            return JSONResponse({"error": "no record with this id in the scores file"}, 404)
        except (ValueError, AttributeError) as error:
            return JSONResponse({"error": str(error)}, 400)
        except RecursionError:  # a body of [[[... nested past Python's stack (64 KiB is enough)
            return JSONResponse({"error": "the body is JSON nested too deeply to read"}, 400)
        except OSError as error:  # the labels file could not take it: the page must not say "saved"
            return JSONResponse({"error": f"the labels file did not take the decision: {error.strerror or error}"}, 507)
        decisions = review.decisions()
        return JSONResponse({"saved": decision.as_json(), "progress": progress(decisions, review.by_id).as_json()})

    def fit_api(request: Request) -> Response:  # sync: Starlette runs it in its thread pool
        if not authorised(request):
            return denied()
        return JSONResponse(review.fit())

    names = {host, "localhost", "127.0.0.1"}
    if remote:  # a colleague comes by the machine's name or address; the token, not the Host, keeps others out
        names |= machine_names()
    hosts = names | {f"{name}:{port}" for name in names}
    app = Starlette(
        routes=[Route("/", page), Route("/views", views), Route("/api/queue", queue_api), Route("/api/record", record_api),
                Route("/api/label", label_api, methods=["POST"]), Route("/api/fit", fit_api, methods=["POST"])],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=sorted(hosts))],
    )
    app.state.token = token
    return app


__all__ = ["Review", "create_app", "exposed"]
