"""A local Ray cluster per test module (2 CPUs, no dashboard), shut down after it."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install 'groundtrace[ray]'")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
