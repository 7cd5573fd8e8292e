"""What training costs on this machine, before a run is started: a few real training steps on a random
sample of the tokenized stage-1 examples (``run.py tokenize``: the reading's windows), timed by the
wall clock and by this process's CPU time (the machine is shared: CPU seconds are what a quiet machine
would take per thread), and the time one epoch of every stage-1 example would take at that speed.

    python training/xe/estimate.py --work WORK [--items items.pkl] [--steps 8] [--token-budget 4096] [--threads 2] [--precision fp32]
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from xe import run  # noqa: E402  (run.py's light import of groundtrace.detector comes first)

import torch  # noqa: E402

from xe import train as xe_train  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "xe")
    parser.add_argument("--items", default="items.pkl")
    parser.add_argument("--steps", type=int, default=8, help="timed steps (after 2 warm-up steps)")
    parser.add_argument("--token-budget", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="fp32", choices=xe_train.PRECISIONS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    with open(args.work / args.items, "rb") as f:
        data = pickle.load(f)
    items = [it for it in data["base"][1] if it is not None]
    rng = random.Random(args.seed)
    plan = xe_train.batches(items, args.token_budget, rng)[:args.steps + 2]
    model = run.new_model(args.work)
    model.word.weight.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    model.train()
    pad = run.tokenizer_of(args.work).pad_id
    seen = tokens = 0
    wall = cpu = 0.0
    for k, batch in enumerate(plan):
        w0, c0 = time.perf_counter(), time.process_time()
        logits, item_of, _ = xe_train.batch_logits(model, batch, pad, torch.device("cpu"), args.precision)
        loss = xe_train.loss_of(batch, logits, item_of, 0.5, 0.05)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if k >= 2:  # the first steps warm up the allocator and the kernels
            wall += time.perf_counter() - w0
            cpu += time.process_time() - c0
            seen += len(batch)
            tokens += sum(it.tokens for it in batch)
    per_example = np.mean([it.tokens for it in items])
    out = {
        "reading": data.get("_reading", "all"), "threads": args.threads, "token_budget": args.token_budget,
        "precision": args.precision,
        "stage1_examples": len(items), "tokens_per_example": round(float(per_example), 1),
        "windows_per_example": round(float(np.mean([len(it.windows) for it in items])), 3),
        "timed_steps": len(plan) - 2, "examples_per_s_wall": round(seen / wall, 3),
        "tokens_per_s_wall": round(tokens / wall), "examples_per_cpu_s": round(seen / cpu, 3),
        "tokens_per_cpu_s": round(tokens / cpu),
        # one epoch's tokens at the measured tokens/s (the timed batches' lengths are a sample of the set's)
        "epoch_tokens": int(sum(it.tokens for it in items)),
        "epoch_hours_wall": round(sum(it.tokens for it in items) / (tokens / wall) / 3600, 2),
        "epoch_hours_cpu_per_thread": round(sum(it.tokens for it in items) / (tokens / cpu) / 3600 / args.threads, 2),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
