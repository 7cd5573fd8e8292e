"""Phoenix annotation configs: what makes Phoenix draw a metric's score as good or bad in its traces list.

Phoenix colours an annotation's score (green: favourable, red: unfavourable) only when the project has an
annotation config of that name with an optimization direction and a threshold (Phoenix 20.26: a FREEFORM
config is the kind that carries a threshold). Without one, ``grounding`` 0.92 and 0.23 look alike. So the
first time the sink annotates a project with a metric that has a threshold, it creates that config
(MINIMIZE where a higher value means less supported, MAXIMIZE otherwise; bounds 0 and 1; the
metric's threshold) unless a config of that name exists already (one you made wins: a 409 is fine), and
assigns it to the project (idempotent). Done once per project and metric per sink, after the record's
annotations were accepted (so the span, and with it the project, exists). A failure here leaves the
annotations in place and is said once as a WARNING: the scores are there, only uncoloured.

The project: the sink's ``project``, else the project of the spans being annotated (the
``openinference.project.name`` of the resource of the tracer provider that traced the request, read in the
application's process when the request started and carried with its Record as the ``phoenix_project`` trace
link: the sink may run in a scoring process that has no provider), else ``PHOENIX_PROJECT_NAME`` (what
``phoenix.otel.register`` reads), else this process's provider's, else ``default``. Configs are made sure of
once per project and metric.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from groundtrace.redaction import get_logger
from groundtrace.score import Score
from groundtrace.trace_context import PHOENIX_PROJECT_LINK, phoenix_project

log = get_logger("groundtrace.sinks.phoenix")

DEFAULT_PROJECT = "default"
#: the trace link a Record carries its spans' Phoenix project in (read when the request starts)
PROJECT_LINK = PHOENIX_PROJECT_LINK


def traced_project() -> str | None:
    """The Phoenix project of the spans of the request being captured (this runs at each request's start)."""
    return phoenix_project()


def project_name(given: str | None = None, traced: str | None = None) -> str:
    """``given``: the sink's own; ``traced``: the project the record's spans went to (its PROJECT_LINK)."""
    if given:
        return given
    if traced:
        return traced
    if env := os.environ.get("PHOENIX_PROJECT_NAME"):
        return env
    return traced_project() or DEFAULT_PROJECT  # the application's provider, if it has one in this process


def config_body(score: Score) -> dict[str, Any]:
    direction = "MAXIMIZE" if score.higher_is_better else "MINIMIZE"
    reads = "higher is better" if score.higher_is_better else "higher means less supported"
    return {"type": "FREEFORM", "name": score.metric, "optimization_direction": direction,
            "threshold": score.threshold, "lower_bound": 0.0, "upper_bound": 1.0,
            "description": f"groundtrace's {score.metric} ({reads}; flagged past {score.threshold:g})"}


class AnnotationConfigs:
    """The configs this sink has made sure of, per (project, metric); ``http`` is the Phoenix client's httpx client."""

    def __init__(self, http: Any, project: str | None = None) -> None:
        self.http = http
        self.given = project
        self._done: set[tuple[str, str]] = set()  # (project, metric)
        self._said = False

    def ensure(self, scores: Iterable[Score], traced: str | None = None) -> None:
        """Make sure of the configs of these scores' metrics in the project of their spans (``traced``: the
        record's PROJECT_LINK)."""
        project = project_name(self.given, traced)
        for score in scores:
            if score.threshold is None or (project, score.metric) in self._done:
                continue
            self._done.add((project, score.metric))  # tried once: a Phoenix that refuses is not asked again per record
            try:
                created = self.http.post("/v1/annotation_configs", json=config_body(score))
                if created.status_code not in (200, 409):  # 409: a config of that name exists; it wins
                    created.raise_for_status()
                assigned = self.http.put(f"/v1/projects/{quote(project, safe='')}/annotation_configs/"
                                         f"{quote(score.metric, safe='')}")
                assigned.raise_for_status()
            except Exception as error:
                if not self._said:
                    self._said = True
                    log.warning("groundtrace: Phoenix annotation config %r for project %r not set (%s: %s): the "
                                "scores are annotated, Phoenix will not colour them as good or bad",
                                score.metric, project, type(error).__name__, error)


__all__ = ["PROJECT_LINK", "AnnotationConfigs", "config_body", "project_name", "traced_project"]
