"""The one redaction step: configured secrets and token shapes become [redacted], the words around
them stay, and everything groundtrace composes (Scores, exceptions, log lines, console output) passes it."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from groundtrace.backends.judge import JudgeError
from groundtrace.cli import app
from groundtrace.config import JudgeSettings, Settings
from groundtrace.redaction import Redactor, get_logger, redact, register_secrets
from groundtrace.score import Score
from groundtrace.sources import SourceError


@pytest.mark.parametrize("text, shown", [
    ("answered HTTP 401: check OPENAI_API_KEY (api_key=); server said: Incorrect API key provided: Bearer sk-proj-Ab12Cd34Ef56",
     "answered HTTP 401: check OPENAI_API_KEY (api_key=); server said: Incorrect API key provided: Bearer [redacted]"),
    ("Authorization: Bearer abc.def-123", "Authorization: [redacted]"),
    ('{"authorization": "Basic cGstbGY6c2stbGY="}', '{"authorization": "[redacted]"}'),
    ("x-api-key: 0123456789", "x-api-key: [redacted]"),
    ("OPENAI_API_KEY=sk-zz12345678 api_key='k3y-value' password: hunter22", "OPENAI_API_KEY=[redacted] api_key='[redacted]' password: [redacted]"),
    ("the key sk-lf-0123456789abcdef and lsv2_pt_0123456789abcdef", "the key [redacted] and [redacted]"),
    ("postgres://app:s3cret@db.internal/rag", "postgres://app:[redacted]@db.internal/rag"),
    # English stays English: no digit, no token; a hint names a variable, not its value
    ("a basic premise, the bearer of bad news", "a basic premise, the bearer of bad news"),
    ("set LANGFUSE_SECRET_KEY and pass secret_key=", "set LANGFUSE_SECRET_KEY and pass secret_key="),
    ("the answer has 120 tokens; 3 of 4 claims supported", "the answer has 120 tokens; 3 of 4 claims supported"),
])
def test_token_shapes_are_redacted_and_the_words_around_them_kept(text: str, shown: str) -> None:
    assert redact(text) == shown


@pytest.mark.parametrize("advice", [
    "set OPENAI_API_KEY or pass api_key=..., or point OPENAI_BASE_URL (base_url=...) at a local server",
    "set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (a local server), or pass api_key= or base_url=",
    "pass api_key=OPENAI_API_KEY", "api_key=<your key>", "api_key=YOUR_KEY", "api_key=$OPENAI_API_KEY",
    "api_key=${OPENAI_API_KEY}.", "api_key=%OPENAI_API_KEY%", "api_key=your-key-here", "api_key=", "api_key=…",
    "``api_key=…``-style", "password: ******", "Authorization: Bearer <token>", "Authorization: Bearer $TOKEN",
    "send Authorization: Bearer", "postgres://app:<password>@db/rag", "x-api-key: <key>",
])
def test_advice_around_a_secret_s_place_is_kept_word_for_word(advice: str) -> None:
    assert redact(advice) == advice


@pytest.mark.parametrize("text, shown", [
    ("api_key=sk-abc123...", "api_key=[redacted]"),
    ("OPENAI_API_KEY=Zx81-qq09.", "OPENAI_API_KEY=[redacted]"),
    ("password: correcthorse", "password: [redacted]"),
    ("Authorization: Bearer abcdef", "Authorization: [redacted]"),
    ("api_key=<a1b2c3d4e5>", "api_key=[redacted]"),  # brackets around a value that is no placeholder
    ("api_key=abc12", "api_key=abc12"),  # under MIN_SECRET_CHARS, as for configured keys
])
def test_a_value_in_a_secret_s_place_is_redacted_when_it_looks_like_a_credential(text: str, shown: str) -> None:
    assert redact(text) == shown


def _templates() -> list[tuple[str, str]]:
    """Every string literal of groundtrace's sources (an f-string with ``{}`` for its fields): the
    messages, advice and help texts it composes, with no secret in any of them."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted([*(root / "src").rglob("*.py"), *(root / "integrations").glob("*/src/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            else:
                continue
            found.append((f"{path.relative_to(root)}:{node.lineno}", text))
    return found


def test_every_message_groundtrace_writes_comes_out_of_redaction_unchanged() -> None:
    templates = _templates()
    assert len(templates) > 1000  # the scan found the sources
    assert any("pass api_key=" in text for _, text in templates)  # the judge's advice, among them
    assert [(where, text) for where, text in templates if Redactor().redact(text) != text] == []


def test_synth_hallucinations_without_a_key_gives_its_advice_whole(tmp_path, monkeypatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["synth-hallucinations", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")])
    shown = " ".join(result.output.split())
    assert result.exit_code == 2
    # the advice's wording may change; whatever it says comes out whole, with no [redacted] in it
    assert shown.startswith("error: no API key for OpenAI: set OPENAI_API_KEY") and "pass api_key=" in shown
    assert "[redacted]" not in shown, shown


def test_configured_secrets_of_any_shape_are_redacted_the_longest_first() -> None:
    redactor = Redactor()
    redactor.register(["opaque-key-7f3a", "opaque-key-7f3a-extended", None, "", "short"])
    assert redactor.redact("a opaque-key-7f3a-extended b opaque-key-7f3a") == "a [redacted] b [redacted]"
    assert redactor.redact("short stays") == "short stays"  # under 6 characters: not taken for a secret


def test_settings_register_every_key_they_read() -> None:
    Settings.from_env({"LANGFUSE_SECRET_KEY": "lf-secret-value-1", "LANGSMITH_API_KEY": "ls-key-value-2",
                       "PHOENIX_API_KEY": "phx-key-value-3", "OPENAI_API_KEY": "judge-key-value-4",
                       "LANGFUSE_PUBLIC_KEY": "lf-public-value-5"})
    JudgeSettings(api_key="judge-key-value-6")
    text = "lf-secret-value-1 ls-key-value-2 phx-key-value-3 judge-key-value-4 lf-public-value-5 judge-key-value-6"
    assert redact(text) == " ".join(["[redacted]"] * 6)


def test_scores_judge_errors_and_source_errors_are_redacted_where_they_are_made() -> None:
    register_secrets("made-up-key-for-score")
    score = Score(metric="faithfulness", higher_is_better=True, error="said made-up-key-for-score",
                  reason="Authorization: Bearer x1y2z3w4v5")
    assert (score.error, score.reason) == ("said [redacted]", "Authorization: [redacted]")
    assert str(JudgeError("server said: made-up-key-for-score", kind="http")) == "server said: [redacted]"
    assert str(SourceError("Phoenix said Bearer abc123def456")) == "Phoenix said Bearer [redacted]"


def test_log_lines_and_their_arguments_are_redacted(caplog) -> None:
    register_secrets("log-line-secret-1")
    caplog.set_level(logging.INFO, logger="groundtrace")
    get_logger("groundtrace.test").warning("sink %s failed: %s", "x", "token log-line-secret-1")
    assert caplog.records[-1].getMessage() == "sink x failed: token [redacted]"


def test_the_command_line_shows_redacted_errors_with_their_brackets(tmp_path, monkeypatch) -> None:
    """Rich would read [redacted] as markup and print nothing in its place."""
    monkeypatch.setenv("GROUNDTRACE_SAMPLE_RATE", "api_key=abcdef123")
    result = CliRunner().invoke(app, ["score", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2
    assert "api_key=[redacted]" in result.output and "abcdef123" not in result.output


@settings(max_examples=200)
@given(st.text(), st.text(alphabet="abcdefXYZ0123456789-_", min_size=8, max_size=20))
def test_redaction_never_fails_is_idempotent_and_leaves_no_known_secret(text: str, secret: str) -> None:
    redactor = Redactor()
    redactor.register([secret])
    once = redactor.redact(text + secret + text)
    assert secret not in once
    assert redactor.redact(once) == once


def _every_shape(text: str) -> str:
    """Redaction by every shape and key pattern, with no clue scan first (the reference of the fast path)."""
    from groundtrace import redaction

    for shape in redaction._SHAPES:
        text = shape.sub(redaction._keep_label, text)
    return redaction._KEYS.sub(redaction.REDACTED, text)


_PIECES = ["Authorization: ", "x-API-key=", "Bearer ", "basic ", "api_key=", "Client_Secret: ", "refresh-token=",
           "PASSWD:", "://u:", "@h", "sk-", "pk-lf-", "lsv2_pt_", "ſk-", "abc123def456", "0123456789", " ", "'", '"']


@settings(max_examples=500)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=6)), max_size=12))
def test_the_clue_scan_skips_only_texts_no_shape_matches(pieces: list[str]) -> None:
    """Skipping the shapes when no clue is found changes nothing: a text with a shape in it always has a clue."""
    text = "".join(pieces)
    assert Redactor().redact(text) == _every_shape(text)
