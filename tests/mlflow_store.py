"""A real MLflow tracking store for a test: sqlite in a temporary folder, trace artifacts beside it (not in
./mlruns of the working directory), one experiment made active, and MLflow pointed back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def sqlite_tracking(folder: Path, experiment: str) -> Iterator[str]:
    """MLflow tracking to a new sqlite store in ``folder`` with ``experiment`` active; yields its URI."""
    import mlflow

    previous = mlflow.get_tracking_uri()
    uri = f"sqlite:///{folder}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.set_experiment(experiment_id=mlflow.create_experiment(experiment, (folder / "artifacts").as_uri()))
        yield uri
    finally:
        mlflow.set_tracking_uri(previous)
