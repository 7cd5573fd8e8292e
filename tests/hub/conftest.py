"""The hub metrics' tests: tiny models built once per session (tests/tiny_hub_models.py), and no socket to
anything but this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="install the 'transformers' extra")
pytest.importorskip("lettucedetect", reason="install lettucedetect (the 'lettuce' extra)")

from tests.tiny_hub_models import build_entailment_classifier, build_token_classifier  # noqa: E402

NLI3_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
NLI2_LABELS = {0: "hallucinated", 1: "consistent"}  # HHEM's names: the second means supported


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hub-models")
    return {"lettuce": build_token_classifier(root / "lettuce"),
            "nli3": build_entailment_classifier(root / "nli3", NLI3_LABELS),
            "nli2": build_entailment_classifier(root / "nli2", NLI2_LABELS, seed=2)}


@pytest.fixture(autouse=True)
def loopback_only(network_guard):
    """Every hub test refuses connections beyond this machine (tests/conftest.py: network_guard)."""
    return network_guard


@pytest.fixture
def hub_offline(monkeypatch) -> None:
    """HF_HUB_OFFLINE=1 as huggingface_hub read it at import."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
