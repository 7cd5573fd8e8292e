"""The judge's price table: USD per one million tokens, and the cost of a call from its token counts.

Prices live here and nowhere else; :class:`~groundtrace.backends.judge.JudgeClient` takes ``prices=``
to add or override models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from groundtrace.score import Cost


class Price(BaseModel):
    """USD per one million tokens."""

    model_config = ConfigDict(frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)


#: Standard (non-batch, uncached-input) list prices in USD per 1M tokens, as published on
#: https://openai.com/api/pricing on PRICES_DATE. Prices change: pass ``prices=`` to override or add
#: models (an Azure deployment name, a local model at 0.0). A model missing here costs ``None``.
PRICES_DATE = "2025-06-01"
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(input=0.15, output=0.60),
    "gpt-4o": Price(input=2.50, output=10.00),
    "gpt-4.1": Price(input=2.00, output=8.00),
    "gpt-4.1-mini": Price(input=0.40, output=1.60),
    "gpt-4.1-nano": Price(input=0.10, output=0.40),
    "o3-mini": Price(input=1.10, output=4.40),
    "gpt-3.5-turbo": Price(input=0.50, output=1.50),
}

_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def price_of(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of ``model``; a dated snapshot (``gpt-4o-mini-2024-07-18``) takes its family's price."""
    if model in prices:
        return prices[model]
    return prices.get(_SNAPSHOT.sub("", model))


def cost_of(model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, Price]) -> Cost:
    price = price_of(model, prices)
    usd = None if price is None else (input_tokens * price.input + output_tokens * price.output) / 1e6
    return Cost(input_tokens=input_tokens, output_tokens=output_tokens, usd=usd)


__all__ = ["DEFAULT_PRICES", "PRICES_DATE", "Price", "cost_of", "price_of"]
