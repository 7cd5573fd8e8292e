from __future__ import annotations

import pytest

from tests.phoenix_server import free_port


@pytest.fixture
def refused_url() -> str:
    """A loopback URL where nothing listens: connections are refused at once."""
    return f"http://127.0.0.1:{free_port()}"
