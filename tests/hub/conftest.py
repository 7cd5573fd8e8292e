"""The hub metrics' tests: tiny models built once per session (tests/tiny_hub_models.py), and no socket to
anything but this machine."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="install the 'transformers' extra")
pytest.importorskip("lettucedetect", reason="install lettucedetect (the 'lettuce' extra)")

from tests.tiny_hub_models import build_entailment_classifier, build_token_classifier  # noqa: E402

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
NLI3_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}
NLI2_LABELS = {0: "hallucinated", 1: "consistent"}  # HHEM's names: the second means supported


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hub-models")
    return {"lettuce": build_token_classifier(root / "lettuce"),
            "nli3": build_entailment_classifier(root / "nli3", NLI3_LABELS),
            "nli2": build_entailment_classifier(root / "nli2", NLI2_LABELS, seed=2)}


class Attempts:
    """Every connection or name lookup to somewhere other than this machine, refused and written down."""

    def __init__(self) -> None:
        self.refused: list[str] = []


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch) -> Iterator[Attempts]:
    attempts = Attempts()
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(sock: socket.socket, address) -> None:
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            attempts.refused.append(f"connect {address[0]}")
            raise ConnectionRefusedError(f"tests may only connect to this machine, not {address[0]}")
        return connect(sock, address)

    def guarded_lookup(host, *args, **kwargs):
        if host not in LOOPBACK and host is not None:
            attempts.refused.append(f"lookup {host}")
            raise socket.gaierror(f"tests may not look up {host}")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    yield attempts
    assert attempts.refused == [], "a test tried to reach the network"


@pytest.fixture
def hub_offline(monkeypatch) -> None:
    """HF_HUB_OFFLINE=1 as huggingface_hub read it at import."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
