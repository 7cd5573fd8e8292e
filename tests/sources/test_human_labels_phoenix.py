"""Human labels read back from a real ``phoenix serve``: span annotations written with Phoenix's own client
(a person's, an LLM's, two reviewers on one span), read by `fit` and `bench --from phoenix:...` as exactly
the 0/1 they mean."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

pytest.importorskip("phoenix.client")
pytest.importorskip("openinference.instrumentation.langchain")
pytest.importorskip("openinference.instrumentation.llama_index")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from typer.testing import CliRunner  # noqa: E402

from groundtrace.cli import app  # noqa: E402
from groundtrace.io.labelled import labelled_from_source  # noqa: E402
from groundtrace.sources import open_source  # noqa: E402
from groundtrace.sources.human_labels import read_human_labels  # noqa: E402
from tests.sources.apps import InMemorySpanExporter, Traffic, log_traffic, tracer_provider  # noqa: E402
from tests.sources.test_phoenix_source import wait_for_roots  # noqa: E402

PROJECT = "groundtrace-human-labels"
runner = CliRunner()


@pytest.fixture(scope="module")
def labelled(phoenix_url: str) -> Iterator[Traffic]:
    """The five requests of apps.log_traffic in a project of their own; on the three RAG roots, under
    'correctness': 0 'correct' from a person ('incorrect' from an LLM), 1 'hallucinated' from a person,
    2 a score of 0.3 from one reviewer then 0.9 from another (within the same second, as Phoenix keeps time); and 'helpfulness' from a person on 1."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from phoenix.client import Client

    otlp = OTLPSpanExporter(endpoint=f"{phoenix_url}/v1/traces", timeout=10)
    provider = tracer_provider(PROJECT, otlp, memory := InMemorySpanExporter())
    traffic = log_traffic(provider, memory)
    provider.shutdown()
    wait_for_roots(phoenix_url, PROJECT, 5)
    annotate = Client(base_url=phoenix_url).spans.add_span_annotation
    first, second, third = (r.span_id for r in traffic.rag)
    annotate(span_id=first, annotation_name="correctness", annotator_kind="HUMAN", label="correct", score=1.0, sync=True)
    annotate(span_id=first, annotation_name="correctness", annotator_kind="LLM", label="incorrect", score=0.0,
             identifier="judge", sync=True)
    annotate(span_id=second, annotation_name="correctness", annotator_kind="HUMAN", label="hallucinated",
             explanation="the year is wrong", sync=True)
    annotate(span_id=second, annotation_name="helpfulness", annotator_kind="HUMAN", label="good", sync=True)
    annotate(span_id=third, annotation_name="correctness", annotator_kind="HUMAN", score=0.3, identifier="ana", sync=True)
    annotate(span_id=third, annotation_name="correctness", annotator_kind="HUMAN", score=0.9, identifier="bo", sync=True)
    yield traffic


def test_the_labels_read_back_are_what_people_wrote(phoenix_url: str, labelled: Traffic) -> None:
    source = open_source(f"phoenix:{PROJECT}", base_url=phoenix_url)
    try:
        records = list(source.records())
        found = sorted((label.record_id, label.name, label.score, label.category)
                       for label in read_human_labels(source, records))
    finally:
        source.close()
    first, second, third = (r.trace_id for r in labelled.rag)
    assert found == sorted([(first, "correctness", 1.0, "correct"), (second, "correctness", None, "hallucinated"),
                            (second, "helpfulness", None, "good"), (third, "correctness", 0.3, None),
                            (third, "correctness", 0.9, None)])

    items, count = labelled_from_source(f"phoenix:{PROJECT}", label_name="correctness",
                                        source_options={"base_url": phoenix_url})
    # Phoenix lists the newest first; the last reviewer's 0.9 counts for the third
    assert [(i.raw["id"], i.label) for i in items] == [(third, 0), (second, 1), (first, 0)]
    assert [i.raw["question"] for i in items] == [r.question for r in reversed(labelled.rag)]
    assert count.line() == f"labels from phoenix:{PROJECT} ('correctness'): 3 of 3 records labelled (1 unsupported)"


def test_bench_and_fit_see_the_labels(phoenix_url: str, labelled: Traffic) -> None:
    common = ["--from", f"phoenix:{PROJECT}", "-S", f"base_url={phoenix_url}", "--label-name", "correctness",
              "-m", "lexical"]
    bench = runner.invoke(app, ["bench", *common, "--json"])
    assert bench.exit_code == 0, bench.output
    assert {k: json.loads(bench.stdout)["lexical"][k] for k in ("n", "positives", "errors")} == {"n": 3, "positives": 1, "errors": 0}
    fit = runner.invoke(app, ["fit", *common, "--label-unsupported-below", "0.95"])  # the 0.9 is unsupported now
    assert fit.exit_code == 2 and "too few labels to fit: 3 records, 2 labelled 1 and 1 labelled 0" in " ".join(fit.output.split())

    unknown = runner.invoke(app, ["bench", *common[:4], "--label-name", "relevance", "-m", "lexical"])
    assert unknown.exit_code == 2
    assert (f"no human label named 'relevance' on the 3 records read from phoenix:{PROJECT}; the human labels there "
            "are named: correctness (on 3), helpfulness (on 1)") in " ".join(unknown.output.split())
