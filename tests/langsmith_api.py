"""A LangSmith deployment in memory, for the loopback server of tests/loopback.py: the endpoints that
`langsmith.evaluate` uses (a dataset and its examples, an experiment, runs and feedback, sent one by one
or batched by the SDK's background tracing), keeping what it is sent."""

from __future__ import annotations

import json
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

TENANT_ID = "a3bb189e-8bf9-4888-9912-ace4e6543002"
DATASET_ID = "5b0c8d2e-1f3a-4c5b-9d6e-7f8091a2b3c4"
EXPERIMENT_ID = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
CREATED = "2026-01-01T00:00:00Z"


def multipart_json(request: Any) -> dict[str, dict]:
    """The JSON parts of a multipart/form-data body, by part name."""
    head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + request.body)
    return {part.get_param("name", header="content-disposition"): json.loads(part.get_payload(decode=True))
            for part in message.iter_parts()}


class FakeLangSmith:
    """``examples``: (example id, inputs, reference outputs) of the one dataset, whatever its name."""

    def __init__(self, examples: list[tuple[str, dict, dict]]) -> None:
        self.examples = examples
        self.runs: dict[str, dict] = {}
        self.feedback: list[dict] = []
        self.experiment: dict = {}

    def respond(self, request: Any) -> tuple[int, Any]:
        route = (request.method, request.path)
        if route == ("GET", "/info"):
            return 200, {"version": "0.12.40", "instance_flags": {}}
        if route == ("GET", "/datasets"):
            return 200, [{"id": DATASET_ID, "name": request.query["name"][0], "tenant_id": TENANT_ID,
                          "created_at": CREATED, "modified_at": CREATED, "data_type": "kv"}]
        if route == ("GET", "/examples"):
            offset = int(request.query.get("offset", ["0"])[0])
            return 200, [{"id": example_id, "dataset_id": DATASET_ID, "created_at": CREATED, "modified_at": CREATED,
                          "inputs": inputs, "outputs": outputs}
                         for example_id, inputs, outputs in self.examples][offset:]
        if route == ("POST", "/sessions"):
            self.experiment = {"id": EXPERIMENT_ID, "name": request.json["name"], "tenant_id": TENANT_ID,
                               "reference_dataset_id": DATASET_ID, "start_time": CREATED}
            return 200, self.experiment
        if route == ("PATCH", f"/sessions/{EXPERIMENT_ID}"):
            return 200, {**self.experiment, **request.json}
        if route == ("POST", "/runs"):
            self.runs[request.json["id"]] = request.json
            return 200, {}
        if request.method == "PATCH" and request.path.startswith("/runs/"):
            self.runs.setdefault(request.path.rsplit("/", 1)[1], {}).update(request.json)
            return 200, {}
        if route == ("POST", "/runs/multipart"):  # the SDK's background batches: runs and feedback
            for name, part in multipart_json(request).items():
                kind, _, run_id = name.partition(".")
                if kind == "feedback":
                    self.feedback.append(part)
                elif kind in ("post", "patch") and "." not in run_id:  # not post.<id>.inputs and the like
                    self.runs.setdefault(run_id, {}).update(part)
            return 202, {}
        if route == ("POST", "/feedback"):
            self.feedback.append(request.json)
            return 200, {"id": request.json["id"]}
        return 404, {"detail": "Not Found"}
