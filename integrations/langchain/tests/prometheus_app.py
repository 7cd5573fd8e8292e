"""A LangChain RAG app in staging, as the Watch staging page sets it up: groundtrace attached by
instrument(), its metrics on a Prometheus endpoint. Served over HTTP on loopback for the real-Prometheus
test (test_lc_prometheus.py), which starts it as its own process, as an application runs:

    python prometheus_app.py METRICS_PORT     prints "ready APP_PORT" once it serves

GET /ask?kind=grounded|planted   one request through the chain (planted: the scripted model invents facts)
GET /stats                       waits for groundtrace to settle what it holds; the Monitor's counts as JSON
GET /quit                        uninstrument (the Monitor closes) and stop
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import groundtrace_langchain  # noqa: E402
from lc_app import GROUNDED_ANSWER, rag_chain  # noqa: E402

QUESTION = "What is the capital of France?"
# what the retrieved passage ("Paris is the capital of France.") does not say: a planted hallucination
PLANTED_ANSWER = "Paris is the capital of Germany; Napoleon founded it in 1850."

metrics_port = int(sys.argv[1])
monitor = groundtrace_langchain.instrument(metrics=["lexical"], telemetry=f"prometheus:127.0.0.1:{metrics_port}")
assert monitor is not None
chains = {"grounded": rag_chain(GROUNDED_ANSWER), "planted": rag_chain(PLANTED_ANSWER)}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        url = urlsplit(self.path)
        if url.path == "/ask":
            kind = parse_qs(url.query)["kind"][0]
            self._reply({"answer": chains[kind].invoke(QUESTION)})
        elif url.path == "/stats":
            assert monitor is not None
            monitor.flush(60)
            self._reply(monitor.stats.as_dict())
        elif url.path == "/quit":
            groundtrace_langchain.uninstrument()
            self._reply({"closed": True})
            threading.Thread(target=server.shutdown).start()
        else:
            self.send_error(404)

    def _reply(self, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"ready {server.server_address[1]}", flush=True)
server.serve_forever()
