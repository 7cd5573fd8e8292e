"""Fine-tune the cross-encoder: token-level BCE on the answer's tokens (LettuceDetect's recipe), plus
a response-level BCE on the maximum token logit; examples whose spans are unknown (HaluEval's wrong
answers) get only the response-level term (multiple-instance learning). Targets are smoothed
(``label_smoothing``) so that probabilities do not saturate on data the model has learned by heart.

Every answer token's logit is the minimum over the context windows that read it, exactly as at
inference (groundtrace.detector.windows), so long contexts train as they are scored.

The same code runs on a GPU and on a CPU. A run is a fixed plan of batches drawn from the seed;
``time_budget`` only shortens the plan once the first steps have been timed, and the number of steps
reached is recorded, so a CPU replays a GPU run step for step (``steps=``). ``checkpoint`` is written
every ``checkpoint_minutes`` and at the end; ``resume`` continues a run from it.
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

from groundtrace.detector.tokenizer import Encoding, XETokenizer
from groundtrace.detector.windows import Window, build_windows, pad_batch

READINGS = ("all", "select", "auto")  # groundtrace.detector.reading.MODES (not imported: "all" needs no jieba)


@dataclass
class Item:
    windows: list[Window]
    labels: np.ndarray | None  # per answer token, None = span unknown
    label: int
    tokens: int
    answer_tokens: int


def token_labels(starts: np.ndarray, ends: np.ndarray, spans: list) -> np.ndarray:
    labels = np.zeros(len(starts), dtype=np.float32)
    for s, e in spans:
        labels[(starts < e) & (ends > s)] = 1.0
    return labels


def read_windows(tokenizer: XETokenizer, ex: dict, reading: str = "all") -> tuple[Encoding, list[Window]]:
    """The answer's tokens and the windows the metric scores them in under ``reading`` (all | select |
    auto), on the contexts the metric keeps (blank ones dropped): ``all`` is build_windows (grounding-2's
    format, no jieba needed); ``select`` and ``auto`` take groundtrace.detector.reading's decision."""
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
    contexts = [c for c in ex["contexts"] if c.strip()]
    if reading == "all":
        enc = tokenizer.encode(ex["answer"])
        return enc, (build_windows(tokenizer, ex.get("question"), contexts, enc) if len(enc) else [])
    from groundtrace.detector.reading import Reading  # groundtrace.text: jieba, stopwords
    from groundtrace.text.lang import guess_language

    language = ex.get("language") or guess_language(ex["answer"] or "\n".join(contexts))
    enc, windows, _ = Reading(evidence=reading).windows(  # type: ignore[arg-type]
        tokenizer, ex.get("question"), contexts, ex["answer"], language)
    return enc, windows


def featurize(tokenizer: XETokenizer, ex: dict, reading: str = "all") -> Item | None:
    enc, windows = read_windows(tokenizer, ex, reading)
    if len(enc) == 0:
        return None
    labels = None if ex["spans"] is None else token_labels(enc.starts, enc.ends, ex["spans"])
    if labels is not None and ex["label"] == 1 and labels.sum() == 0:
        labels = None  # the span fell on no token (whitespace): treat as unknown
    return Item(windows, labels, int(ex["label"]), sum(len(w.ids) for w in windows), len(enc))


def batches(items: list[Item], token_budget: int, rng: random.Random) -> list[list[Item]]:
    """Batches of at most ``token_budget`` padded tokens, of similar lengths, in random order."""
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


def plan_batches(items: list[Item], epochs: float, token_budget: int, rng: random.Random) -> list[list[Item]]:
    plan: list[list[Item]] = []
    for _ in range(int(math.floor(epochs))):
        plan += batches(items, token_budget, rng)
    if epochs > math.floor(epochs):
        extra = batches(items, token_budget, rng)
        plan += extra[:max(1, int(len(extra) * (epochs - math.floor(epochs))))]
    return plan


PRECISIONS = ("bf16", "fp32")  # bf16 autocast (GPUs, CPUs with AVX512-BF16/AMX) or plain fp32 (other CPUs: faster)


def batch_logits(model, batch: list[Item], pad_id: int, device: torch.device,
                 precision: str = "bf16") -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Per answer token of the batch (items concatenated) the logit, minimum over its windows; the item
    of each token; and each item's first token."""
    windows = [w for it in batch for w in it.windows]
    ids, mask = pad_batch(windows, pad_id)
    rows, cols, flat = [], [], []
    firsts, offset, row = [], 0, 0
    for it in batch:
        firsts.append(offset)
        for w in it.windows:
            n = len(w.answer_tokens)
            rows.append(np.full(n, row))
            cols.append(w.answer_offset + np.arange(n))
            flat.append(offset + w.answer_tokens)
            row += 1
        offset += it.answer_tokens
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
    with autocast:
        logits = model(torch.from_numpy(ids).to(device), torch.from_numpy(mask).bool().to(device))
    values = logits.float()[torch.from_numpy(np.concatenate(rows)).to(device), torch.from_numpy(np.concatenate(cols)).to(device)]
    index = torch.from_numpy(np.concatenate(flat)).to(device)
    tokens = torch.full((offset,), float("inf"), device=device).scatter_reduce(0, index, values, reduce="amin")
    item_of = torch.from_numpy(np.repeat(np.arange(len(batch)), [it.answer_tokens for it in batch])).to(device)
    return tokens, item_of, firsts


def loss_of(batch: list[Item], tokens: torch.Tensor, item_of: torch.Tensor, response_weight: float,
            smoothing: float) -> torch.Tensor:
    device = tokens.device
    n = len(batch)
    smooth = lambda y: y * (1 - smoothing) + smoothing / 2  # noqa: E731
    response_logit = torch.full((n,), float("-inf"), device=device).scatter_reduce(0, item_of, tokens, reduce="amax")
    response_target = smooth(torch.tensor([float(it.label) for it in batch], device=device))
    response = F.binary_cross_entropy_with_logits(response_logit, response_target, reduction="none")
    known = torch.tensor([it.labels is not None for it in batch], device=device)
    labels = np.concatenate([it.labels if it.labels is not None else np.zeros(it.answer_tokens, np.float32) for it in batch])
    per_token = F.binary_cross_entropy_with_logits(tokens, smooth(torch.from_numpy(labels).to(device)), reduction="none")
    counts = torch.tensor([float(it.answer_tokens) for it in batch], device=device)
    token_mean = torch.zeros(n, device=device).scatter_add(0, item_of, per_token) / counts
    terms = torch.where(known, token_mean + response_weight * response, response)
    return terms.mean()


def train(model, items: list[Item], *, epochs: float, lr: float, seed: int, token_budget: int, pad_id: int,
          device: str | torch.device = "cpu", steps: int | None = None, time_budget: float | None = None,
          log: Path | None = None, checkpoint: Path | None = None, resume: bool = False,
          checkpoint_minutes: float = 10.0, response_weight: float = 0.5, warmup: float = 0.06,
          label_smoothing: float = 0.05, precision: str = "bf16") -> dict:
    device = torch.device(device)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model.to(device)
    model.word.weight.requires_grad_(False)  # 2/3 of the parameters; frozen (speed, memory, and the shipped size)
    head = list(model.head.parameters())
    body = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head.")]
    optimizer = torch.optim.AdamW([{"params": body, "lr": lr}, {"params": head, "lr": lr * 10}], weight_decay=0.01)
    plan = plan_batches(items, epochs, token_budget, rng)
    total = min(len(plan), steps) if steps else len(plan)
    start_step = 0
    if resume and checkpoint and checkpoint.exists():
        state = torch.load(checkpoint, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_step, total = state["step"], state["total"]
    base_lrs = [lr, lr * 10]
    model.train()
    started = last_save = timed_from = time.time()
    running: list[float] = []

    def save(step: int) -> None:
        if checkpoint:
            tmp = checkpoint.with_suffix(".tmp")
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "total": total}, tmp)
            tmp.replace(checkpoint)

    step = start_step
    while step < total:
        if time_budget and step == start_step + 10:
            timed_from = time.time()  # steps 10-40 time the run (the first ones warm the device up)
        if time_budget and step == start_step + 40:
            # the plan is cut to what the budget allows at that speed; the schedule below follows the
            # new total from here on (recorded, so a replay by steps matches)
            per_step = (time.time() - timed_from) / 30
            total = min(total, step + int((time_budget - (time.time() - started)) / per_step))
        progress = step / total
        scale = min(progress / warmup, (1 - progress) / (1 - warmup))
        for group, lr0 in zip(optimizer.param_groups, base_lrs, strict=False):
            group["lr"] = lr0 * max(scale, 0.0)
        batch = plan[step]
        tokens, item_of, _ = batch_logits(model, batch, pad_id, device, precision)
        loss = loss_of(batch, tokens, item_of, response_weight, label_smoothing)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running.append(float(loss.detach()))
        step += 1
        if log and (step % 50 == 0 or step == total):
            with open(log, "a") as f:
                f.write(json.dumps({"step": step, "of": total, "loss": round(float(np.mean(running[-50:])), 4),
                                    "seconds": round(time.time() - started, 1)}) + "\n")
        if checkpoint and time.time() - last_save > checkpoint_minutes * 60:
            save(step)
            last_save = time.time()
    save(step)
    model.eval()
    return {"steps": step, "planned_steps": len(plan), "epochs": round(epochs * step / max(1, len(plan)), 4),
            "seconds": round(time.time() - started, 1), "final_loss": round(float(np.mean(running[-50:])), 4) if running else None,
            "device": str(device), "precision": precision}


@torch.no_grad()
def token_probabilities(model, items: list[Item], pad_id: int, device: str | torch.device = "cpu",
                        token_budget: int = 16384, precision: str = "bf16") -> list[np.ndarray]:
    """P(unsupported) per answer token of each featurized record (torch; the ONNX graph must agree)."""
    device = torch.device(device)
    model.eval()
    out: list[np.ndarray | None] = [None] * len(items)
    index = sorted(range(len(items)), key=lambda i: max((len(w.ids) for w in items[i].windows), default=0))
    chunk: list[int] = []
    rows = 0
    for i in [*index, None]:  # None: the end, which scores the last chunk
        if i is not None and not items[i].windows:
            out[i] = np.zeros(0, dtype=np.float32)
            continue
        if chunk and (i is None or (rows + len(items[i].windows)) * 512 > token_budget):
            tokens, item_of, firsts = batch_logits(model, [items[j] for j in chunk], pad_id, device, precision)
            p = torch.sigmoid(tokens).cpu().numpy()
            for j, first in zip(chunk, firsts, strict=False):
                out[j] = p[first:first + items[j].answer_tokens]
            chunk, rows = [], 0
        if i is not None:
            chunk.append(i)
            rows += len(items[i].windows)
    return out  # type: ignore[return-value]


def featurize_record(tokenizer: XETokenizer, record: dict, reading: str = "all") -> Item:
    """A record to score (no labels needed): its windows, as inference builds them under ``reading``."""
    enc, windows = read_windows(tokenizer, record, reading)
    return Item(windows, None, int(record.get("label") or 0), sum(len(w.ids) for w in windows), len(enc))
