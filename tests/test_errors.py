"""One public base for the errors groundtrace raises on purpose: each real error below is caught by
``except groundtrace.GroundtraceError`` and still by the built-in it always derived from."""

from __future__ import annotations

import pickle
import sys

import pytest

import groundtrace
from groundtrace import ConfigError, GroundtraceError, MissingExtraError, VerdictFileError
from groundtrace.backends.verdict import VerdictModel
from groundtrace.config import Settings
from groundtrace.errors import install_hint
from groundtrace.privacy import load_mask


def test_the_errors_are_exported_from_groundtrace_and_groundtrace_errors() -> None:
    import groundtrace.errors as errors

    for name in ("GroundtraceError", "ConfigError", "MissingExtraError", "ModelUnavailableError", "VerdictFileError"):
        assert name in groundtrace.__all__, name
        assert issubclass(getattr(groundtrace, name), GroundtraceError), name
    assert errors.GroundtraceError is GroundtraceError and errors.MissingExtraError is MissingExtraError


def test_the_old_private_import_path_is_the_same_class() -> None:
    from groundtrace._extras import HubUnreachableError, MissingExtraError as Old, ModelUnavailableError

    assert Old is MissingExtraError
    assert issubclass(HubUnreachableError, ModelUnavailableError) and issubclass(ModelUnavailableError, RuntimeError)
    assert issubclass(ModelUnavailableError, GroundtraceError)


def test_a_bad_variable_is_a_config_error_and_still_a_value_error() -> None:
    with pytest.raises(GroundtraceError) as caught:
        Settings.from_env({"GROUNDTRACE_SAMPLE_RATE": "often"})
    assert type(caught.value) is ConfigError and isinstance(caught.value, ValueError)
    assert "GROUNDTRACE_SAMPLE_RATE='often' is not a valid float" in str(caught.value)
    for environ in ({"GROUNDTRACE_OPTIONS": "{nope"}, {"GROUNDTRACE_CAPTURE_TEXT": "maybe"},
                    {"GROUNDTRACE_CPU_BUDGET": "0"}, {"OTEL_EXPORTER_PROMETHEUS_PORT": "http"}):
        with pytest.raises(ConfigError):
            Settings.from_env(environ)


def test_a_mask_that_cannot_be_loaded_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no_such_module_here"):
        load_mask("no_such_module_here:mask")
    with pytest.raises(ValueError, match="module:function"):
        load_mask("just-a-name")


def test_a_missing_verdict_file_is_caught_as_either_base(tmp_path) -> None:
    for base in (GroundtraceError, ValueError):
        with pytest.raises(base) as caught:
            VerdictModel.load(tmp_path / "none.json")
        assert type(caught.value) is VerdictFileError
        assert "does not exist: write one with `groundtrace fit -o " in str(caught.value)


def test_a_missing_extra_is_caught_as_either_base_and_survives_a_process_boundary(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if the pandas extra were not installed
    for base in (GroundtraceError, ImportError):
        with pytest.raises(base) as caught:
            groundtrace.score_frame(object(), metrics=["lexical"])  # type: ignore[arg-type]
        assert type(caught.value) is MissingExtraError
        assert install_hint("pandas") in str(caught.value)
    copy = pickle.loads(pickle.dumps(caught.value))  # the scoring processes send errors back pickled
    assert type(copy) is MissingExtraError and str(copy) == str(caught.value)


def test_the_other_errors_raised_on_purpose_share_the_base_and_keep_theirs() -> None:
    from groundtrace.backends.breaker import CircuitOpen
    from groundtrace.backends.judge.results import JudgeError
    from groundtrace.io.layouts import LayoutError
    from groundtrace.record import InvalidRecord
    from groundtrace.io.labels import LabelsFileError
    from groundtrace.sources import SourceError

    for error, builtin in ((LayoutError, ValueError), (InvalidRecord, ValueError), (LabelsFileError, ValueError),
                           (SourceError, RuntimeError), (JudgeError, RuntimeError), (CircuitOpen, RuntimeError)):
        assert issubclass(error, GroundtraceError) and issubclass(error, builtin), error


@pytest.mark.parametrize("direct_url, hint", [
    (None, "pip install 'groundtrace[fit]'"),  # from the package index: pip writes no direct_url.json
    ('{"url": "file:///home/you/groundtrace", "dir_info": {"editable": true}}', "pip install -e '/home/you/groundtrace[fit]'"),
    ('{"url": "file:///srv/my%20wheels/groundtrace", "dir_info": {}}', "pip install '/srv/my wheels/groundtrace[fit]'"),
    ('{"url": "https://example.org/groundtrace-1.0.tar.gz", "archive_info": {}}', "pip install 'groundtrace[fit]'"),
])
def test_the_missing_extra_hint_fits_the_installation(monkeypatch, direct_url, hint) -> None:
    from importlib import metadata

    from groundtrace.errors import install_hint, missing_extra

    class Installed:
        def read_text(self, name):
            return direct_url if name == "direct_url.json" else None

    monkeypatch.setattr(metadata, "distribution", lambda name: Installed())
    assert install_hint("fit") == hint
    assert str(missing_extra("fit", "groundtrace fit", ImportError("no", name="sklearn"))) == (
        f"groundtrace fit needs optional dependencies that are not installed (sklearn): {hint}")

