"""The Phoenix client both the Phoenix sink and the Phoenix source use, built one way.

Settings follow the phoenix client's own environment (``PHOENIX_ENDPOINT``,
``PHOENIX_COLLECTOR_ENDPOINT`` with any ``/v1/traces`` stripped, ``PHOENIX_API_KEY``,
``PHOENIX_CLIENT_HEADERS``); ``base_url`` and ``api_key`` override them. The httpx client is ours so
that every request is bounded by ``timeout_s`` (the phoenix client's default waits up to 30 s per
read). Imported lazily by its callers: it needs ``arize-phoenix-client``.
"""

from __future__ import annotations

from typing import Any


def phoenix_client(base_url: str | None = None, api_key: str | None = None, timeout_s: float = 10.0) -> Any:
    """A ``phoenix.client.Client`` over an httpx client with a bounded timeout."""
    import httpx
    from phoenix.client import Client
    from phoenix.client.utils.config import get_base_url, get_env_client_headers

    headers = get_env_client_headers()
    if api_key:
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        headers["Authorization"] = f"Bearer {api_key}"
    http = httpx.Client(base_url=base_url or get_base_url(), headers=headers, timeout=timeout_s)
    return Client(http_client=http)
