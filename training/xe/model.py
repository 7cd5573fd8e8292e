"""The cross-encoder in torch, for training: multilingual-e5-small's BERT encoder (post-LayerNorm,
exact GELU) with its first ``layers`` layers, and a token head that gives P(unsupported) per token.

Input: ``<s> question + contexts </s></s> answer </s>``; the loss reads only the answer's tokens.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.ao = (nn.Linear(hidden, hidden) for _ in range(4))
        self.aln = nn.LayerNorm(hidden, eps=eps)
        self.fi = nn.Linear(hidden, ffn)
        self.fo = nn.Linear(ffn, hidden)
        self.oln = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        split = lambda y: y.view(b, t, self.heads, h // self.heads).transpose(1, 2)  # noqa: E731
        ctx = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=keys)
        x = self.aln(x + self.ao(ctx.transpose(1, 2).reshape(b, t, h)))
        return self.oln(x + self.fo(F.gelu(self.fi(x))))


class CrossEncoder(nn.Module):
    def __init__(self, vocab: int, hidden: int = 384, layers: int = 6, heads: int = 12, ffn: int = 1536,
                 max_positions: int = 512, eps: float = 1e-12) -> None:
        super().__init__()
        self.config = dict(vocab=vocab, hidden=hidden, layers=layers, heads=heads, ffn=ffn,
                           max_positions=max_positions, eps=eps)
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_positions, hidden)
        self.type_emb = nn.Parameter(torch.zeros(hidden))
        self.ln = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(Layer(hidden, heads, ffn, eps) for _ in range(layers))
        self.head = nn.Linear(hidden, 1)

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.word(ids) + self.pos(positions)[None] + self.type_emb)
        keys = mask[:, None, None, :]  # True = a real token to attend to (padding is never attended)
        for layer in self.layers:
            x = layer(x, keys)
        return x

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logit of P(unsupported) per token, [batch, tokens]."""
        return self.head(self.encode(ids, mask)).squeeze(-1)


def from_pruned(config: dict, tensors: dict[str, np.ndarray], layers: int) -> CrossEncoder:
    """The first ``layers`` layers of multilingual-e5-small from ``e5_file.read_pruned`` (word
    embeddings already sliced to the pruned vocabulary), and a fresh token head."""
    model = CrossEncoder(config["vocab"], config["hidden"], layers, config["heads"], config["ffn"],
                         config["max_positions"], config["eps"])
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
    with torch.no_grad():
        model.word.weight.copy_(t["emb.word"])
        model.pos.weight.copy_(t["emb.pos"])
        model.type_emb.copy_(t["emb.type"].reshape(-1, config["hidden"])[0])
        model.ln.weight.copy_(t["emb.ln.w"])
        model.ln.bias.copy_(t["emb.ln.b"])
        for i, layer in enumerate(model.layers):
            for name in ("q", "k", "v", "ao", "fi", "fo"):
                getattr(layer, name).weight.copy_(t[f"l{i}.{name}.w"])
                getattr(layer, name).bias.copy_(t[f"l{i}.{name}.b"])
            for name in ("aln", "oln"):
                getattr(layer, name).weight.copy_(t[f"l{i}.{name}.w"])
                getattr(layer, name).bias.copy_(t[f"l{i}.{name}.b"])
        nn.init.normal_(model.head.weight, std=0.02)
        nn.init.zeros_(model.head.bias)
    return model
