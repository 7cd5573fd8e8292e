"""Scoring beyond one machine, on Ray (the ``ray`` extra: ``pip install 'groundtrace[ray]'``).

- :func:`score_records`: score an iterable of Records (or mappings, or what
  :func:`groundtrace.io.read_jsonl` yields) on a pool of Ray actors; every input comes back exactly
  once, in input order, as a ScoredRecord.
- :func:`score_dataset`: the same for a Ray Dataset of record dicts, as a Ray Dataset.
- :class:`RayScorer`: what ``Monitor(isolation="ray")`` hands its batches to.

Nothing here imports Ray until it is called, so ``import groundtrace`` stays fast.
"""

from groundtrace.ray.live import RayScorer
from groundtrace.ray.pipeline import score_dataset, score_records

__all__ = ["RayScorer", "score_dataset", "score_records"]
