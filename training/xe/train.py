"""Fine-tune the cross-encoder: token-level BCE on the answer's tokens (LettuceDetect's recipe), plus
a response-level BCE on the maximum token logit; examples whose spans are unknown (HaluEval's wrong
answers) get only the response-level term (multiple-instance learning).

Every answer token's logit is the minimum over the context windows that read it, exactly as at
inference (groundtrace.detector.windows), so long contexts train as they are scored.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from groundtrace.detector.tokenizer import XETokenizer
from groundtrace.detector.windows import Window, build_windows, pad_batch


@dataclass
class Item:
    windows: list[Window]
    labels: np.ndarray | None  # per answer token, None = span unknown
    label: int
    tokens: int


def token_labels(starts: np.ndarray, ends: np.ndarray, spans: list) -> np.ndarray:
    labels = np.zeros(len(starts), dtype=np.float32)
    for s, e in spans:
        labels[(starts < e) & (ends > s)] = 1.0
    return labels


def featurize(tokenizer: XETokenizer, ex: dict) -> Item | None:
    enc = tokenizer.encode(ex["answer"])
    if len(enc) == 0:
        return None
    windows = build_windows(tokenizer, ex.get("question"), ex["contexts"], enc)
    labels = None if ex["spans"] is None else token_labels(enc.starts, enc.ends, ex["spans"])
    if labels is not None and ex["label"] == 1 and labels.sum() == 0:
        labels = None  # the span fell on no token (whitespace): treat as unknown
    return Item(windows, labels, int(ex["label"]), sum(len(w.ids) for w in windows))


def batches(items: list[Item], token_budget: int, rng: random.Random) -> list[list[Item]]:
    order = sorted(items, key=lambda it: (max(len(w.ids) for w in it.windows), rng.random()))
    out, current, width, rows = [], [], 0, 0
    for it in order:
        w = max(len(x.ids) for x in it.windows)
        if current and max(width, w) * (rows + len(it.windows)) > token_budget:
            out.append(current)
            current, width, rows = [], 0, 0
        current.append(it)
        width, rows = max(width, w), rows + len(it.windows)
    if current:
        out.append(current)
    rng.shuffle(out)
    return out


def batch_logits(model, batch: list[Item], pad_id: int) -> list[torch.Tensor]:
    windows = [w for it in batch for w in it.windows]
    ids, mask = pad_batch(windows, pad_id)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(torch.from_numpy(ids), torch.from_numpy(mask).bool())
    logits = logits.float()
    out, row = [], 0
    for it in batch:
        n = len(it.labels) if it.labels is not None else int(max(w.answer_tokens.max() for w in it.windows)) + 1
        full = torch.full((n,), float("inf"))
        for w in it.windows:
            values = logits[row, w.answer_offset:w.answer_offset + len(w.answer_tokens)]
            index = torch.from_numpy(w.answer_tokens)
            full = full.scatter_reduce(0, index, values, reduce="amin")
            row += 1
        out.append(full)
    return out


def loss_of(batch: list[Item], logits: list[torch.Tensor], response_weight: float) -> torch.Tensor:
    terms = []
    for it, lg in zip(batch, logits):
        target = torch.tensor(float(it.label))
        response = F.binary_cross_entropy_with_logits(lg.max(), target)
        if it.labels is None:
            terms.append(response)
        else:
            tokens = F.binary_cross_entropy_with_logits(lg, torch.from_numpy(it.labels))
            terms.append(tokens + response_weight * response)
    return torch.stack(terms).mean()


def train(model, items: list[Item], *, epochs: float, lr: float, seed: int, token_budget: int, pad_id: int,
          log: Path | None = None, checkpoint: Path | None = None, max_seconds: float | None = None,
          response_weight: float = 0.5, warmup: float = 0.06) -> dict:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model.word.weight.requires_grad_(False)  # 96% of the parameters; frozen, as measured (speed, memory)
    head = list(model.head.parameters())
    body = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head.")]
    optimizer = torch.optim.AdamW([{"params": body, "lr": lr}, {"params": head, "lr": lr * 10}], weight_decay=0.01)
    plan = []
    whole = int(math.floor(epochs))
    for e in range(whole):
        plan += batches(items, token_budget, rng)
    if epochs > whole:
        extra = batches(items, token_budget, rng)
        plan += extra[:int(len(extra) * (epochs - whole))]
    total = len(plan)
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    model.train()
    started = time.time()
    running = []
    for step, batch in enumerate(plan):
        # linear warm-up, then linear decay to 0 by the end of the plan or of the time budget
        progress = max(step / total, (time.time() - started) / max_seconds if max_seconds else 0.0)
        scale = min(progress / warmup, (1 - progress) / (1 - warmup)) if progress < 1 else 0.0
        for group, lr0 in zip(optimizer.param_groups, base_lrs):
            group["lr"] = lr0 * max(scale, 0.0)
        logits = batch_logits(model, batch, pad_id)
        loss = loss_of(batch, logits, response_weight)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running.append(float(loss.detach()))
        if log and (step % 20 == 0 or step == total - 1):
            with open(log, "a") as f:
                f.write(json.dumps({"step": step, "of": total, "loss": round(float(np.mean(running[-20:])), 4),
                                    "seconds": round(time.time() - started, 1)}) + "\n")
        if checkpoint and step % 200 == 199:
            torch.save(model.state_dict(), checkpoint)
        if progress >= 1:
            break
    if checkpoint:
        torch.save(model.state_dict(), checkpoint)
    model.eval()
    return {"steps": step + 1, "planned_steps": total, "seconds": round(time.time() - started, 1),
            "final_loss": round(float(np.mean(running[-50:])), 4)}


@torch.no_grad()
def token_probabilities(model, tokenizer: XETokenizer, records: list[dict], token_budget: int = 8192) -> list[np.ndarray]:
    """P(unsupported) per answer token for each record (torch; the shipped ONNX graph must agree)."""
    model.eval()
    items = []
    for r in records:
        enc = tokenizer.encode(r["answer"])
        windows = build_windows(tokenizer, r.get("question"), r["contexts"], enc) if len(enc) else []
        items.append(Item(windows, np.zeros(len(enc), dtype=np.float32), 0, 0))
    out: list[np.ndarray | None] = [None] * len(records)
    index = sorted(range(len(items)), key=lambda i: max((len(w.ids) for w in items[i].windows), default=0))
    chunk: list[int] = []

    def flush():
        batch = [items[i] for i in chunk]
        logits = batch_logits(model, batch, tokenizer.pad_id)
        for i, lg in zip(chunk, logits):
            out[i] = torch.sigmoid(lg).numpy()
        chunk.clear()

    rows = 0
    for i in index:
        if not items[i].windows:
            out[i] = np.zeros(0, dtype=np.float32)
            continue
        rows += len(items[i].windows)
        chunk.append(i)
        if rows * 512 >= token_budget:
            flush()
            rows = 0
    if chunk:
        flush()
    return out  # type: ignore[return-value]
