import json

from typer.testing import CliRunner

from groundtrace.cli import app, parse_options

runner = CliRunner()


def test_metrics_piped_prints_one_plain_row_per_metric_with_uncut_names():
    result = runner.invoke(app, ["metrics"])  # CliRunner's stdout is not a terminal
    assert result.exit_code == 0
    rows = {line.split("\t")[0]: line.split("\t") for line in result.stdout.splitlines()}
    assert {"lexical", "facts", "grounding", "answer_completeness", "context_relevance"} <= set(rows)
    assert rows["lexical"][1:3] == ["answer,contexts", "higher = grounded"]
    assert rows["grounding"][2] == "higher = hallucinated"


def test_metrics_json_shows_the_threshold_each_metric_actually_uses():
    from groundtrace.metrics import get_metric

    result = runner.invoke(app, ["metrics", "--json"])
    assert result.exit_code == 0
    listed = {row["name"]: row for row in json.loads(result.stdout)}
    assert listed["grounding"]["threshold"] == get_metric("grounding").threshold
    assert listed["lexical"]["threshold"] == get_metric("lexical").threshold == 0.4
    assert listed["facts"]["needs"] == ["answer", "contexts"] and listed["facts"]["higher_is_better"] is False


def test_metrics_in_an_80_column_terminal_keeps_every_name_and_threshold_whole(monkeypatch):
    import io

    from rich.console import Console

    from groundtrace.cli import metrics as command
    from groundtrace.metrics import get_metric, metric_names

    screen = io.StringIO()
    monkeypatch.setattr(command, "out", Console(file=screen, width=80, force_terminal=True, color_system=None))
    command.metrics_command(as_json=False)
    lines = screen.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    for name in metric_names():  # each name whole on the line that shows its threshold
        threshold = f"{get_metric(name).threshold:g}"
        assert any(f" {name} " in line and f" {threshold} " in line for line in lines), (name, threshold)


def test_score_writes_one_line_per_record_with_ids_and_prints_a_summary(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"id": "r1", "contexts": ["The fee is 100 rubles."], "answer": "The fee is 200 rubles."}) + "\n"
        + "garbage\n"
        + json.dumps({"id": "r3", "contexts": ["学生可以借阅图书。"], "answer": "学生可以借阅图书。"}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["score", str(src), "-m", "lexical,facts", "-o", str(out), "-O", "facts.mode=seed"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == ["r1", "line-2", "r3"]
    first = {s["metric"]: s for s in lines[0]["scores"]}
    assert first["facts"]["details"]["mode"] == "seed"
    assert [s["text"] for s in first["facts"]["spans"]] == ["200 rubles"]
    assert all(s["error"] for s in lines[1]["scores"])
    assert "Scores" in result.stdout and "lexical" in result.stdout


def test_score_reports_a_bad_metric_name_clearly(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("{}\n")
    result = runner.invoke(app, ["score", str(src), "-m", "nope"])
    assert result.exit_code == 2
    assert "unknown metric 'nope'" in result.output


def test_bench_json_has_the_documented_keys(tmp_path):
    src = tmp_path / "l.jsonl"
    rows = [{"id": "a", "contexts": ["Students borrow books."], "answer": "Students borrow books.", "label": 0},
            {"id": "b", "contexts": ["Students borrow books."], "answer": "Teachers sell magazines.", "label": 1}]
    src.write_text("\n".join(json.dumps(r) for r in rows))
    result = runner.invoke(app, ["bench", str(src), "-m", "lexical,facts", "--json", "--threshold-from", str(src)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {"lexical", "facts"}
    for metric in report.values():
        assert {"n", "auc", "f1", "precision", "recall", "balanced_accuracy", "threshold", "records_per_s"} <= set(metric)
        assert metric["n"] == 2 and metric["auc"] == 1.0


def test_bench_table(tmp_path):
    src = tmp_path / "l.jsonl"
    rows = [{"id": "a", "contexts": ["Students borrow books."], "answer": "Students borrow books.", "label": 0},
            {"id": "b", "contexts": ["Students borrow books."], "answer": "Teachers sell magazines.", "label": 1}]
    src.write_text("\n".join(json.dumps(r) for r in rows))
    result = runner.invoke(app, ["bench", str(src), "-m", "lexical", "--threshold", "0.5"])
    assert result.exit_code == 0, result.output
    assert "AUC" in result.stdout and "threshold from given" in result.stdout


def test_demo_scores_the_bundled_examples(tmp_path):
    result = runner.invoke(app, ["demo", "--examples", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    by_id = {line["id"]: {s["metric"]: s for s in line["scores"]} for line in lines}
    assert {"ru-1", "en-2", "zh-2"} <= set(by_id)
    # the planted hallucinations are flagged by facts, the faithful answers are not
    assert by_id["en-2"]["facts"]["hallucinated"] and not by_id["en-1"]["facts"]["hallucinated"]
    assert by_id["ru-2"]["facts"]["hallucinated"] and not by_id["ru-1"]["facts"]["hallucinated"]
    assert "$9.99" in [s["text"] for s in by_id["en-2"]["facts"]["spans"]]


def test_without_groundtrace_demo_the_demo_command_says_how_to_install_it_and_scores_the_examples(monkeypatch, tmp_path):
    monkeypatch.setattr("groundtrace.cli.plugin_commands", lambda: {})  # as if groundtrace-demo were not installed
    assert "demo" in runner.invoke(app, ["--help"]).output
    result = runner.invoke(app, ["demo", "--no-mlflow", "-o", str(tmp_path), "-m", "lexical"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # as one line: the console wraps it at its width
    assert "run `make demo`, or pip install -e ./integrations/demo (groundtrace-demo)" in said, said
    ids = [json.loads(line)["id"] for line in (tmp_path / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {"ru-1", "en-1", "zh-1"} <= set(ids)


def test_a_command_registered_in_the_entry_point_group_runs(monkeypatch):
    from importlib.metadata import EntryPoint

    entry = EntryPoint("hello", "tests.test_cli:hello_command", "groundtrace.commands")
    monkeypatch.setattr("groundtrace.cli.plugin_commands", lambda: {"hello": entry})
    assert "hello" in runner.invoke(app, ["--help"]).output
    result = runner.invoke(app, ["hello", "--name", "you"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "hello, you\n"
    assert runner.invoke(app, ["no-such-command"]).exit_code != 0


def hello_command(name: str = "world") -> None:
    """A command another distribution could register under groundtrace.commands."""
    print(f"hello, {name}")


def test_parse_options_reads_json_values():
    assert parse_options(["facts.concept_weight=0.4", "facts.mode=seed", "lexical.bleu_weights=[1,0]"]) == {
        "facts": {"concept_weight": 0.4, "mode": "seed"}, "lexical": {"bleu_weights": [1, 0]}}


def test_groundtrace_progress_shows_the_bar_when_not_on_a_terminal(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from groundtrace.cli import common

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "r1", "contexts": ["The fee is 100 rubles."], "answer": "The fee is 100 rubles."}) + "\n",
                   encoding="utf-8")
    shown = {}
    for flag in ("0", "1"):
        screen = io.StringIO()
        monkeypatch.setattr(common, "console", Console(file=screen, width=100))  # a file: not a terminal; the bar's
        monkeypatch.setenv("GROUNDTRACE_PROGRESS", flag)
        result = runner.invoke(app, ["score", str(src), "-m", "lexical", "-o", str(tmp_path / f"out{flag}.jsonl")])
        assert result.exit_code == 0, result.output
        shown[flag] = screen.getvalue()
    assert "1/1" not in shown["0"] and "1/1" in shown["1"]


def test_score_says_why_records_failed_not_only_in_the_file(tmp_path):
    """Records a metric could not score are counted and the first reason is printed, not left for -o alone."""
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"id": "1", "question": "q", "contexts": ["The fee is 10 dollars."], "answer": ""}) + "\n"
                    + json.dumps({"id": "2", "question": "q", "contexts": ["The fee is 10 dollars."],
                                  "answer": "The fee is 10 dollars."}) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["score", str(path), "-m", "lexical"])
    assert result.exit_code == 0, result.output
    assert "lexical: 1 of 2 records failed, e.g. " in result.output
    assert "there is no text to score" in result.output
