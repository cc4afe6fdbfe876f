"""A small, approximate price table for the cost column of ``gdn eval``.

Prices are list prices in USD per million tokens as published by the providers when this table was
written; they change, and discounts (batching, caching) are ignored. A suite overrides or extends the
table with ``prices: {provider/model: {input, output}}``. A model name matches an entry when it starts
with the entry's model name (``gpt-4o-mini-2024-07-18`` uses ``gpt-4o-mini``); the longest entry
wins. Offline providers (``python``, ``scripted``, ``local``) cost nothing unless the suite prices them.
"""

from __future__ import annotations

from collections.abc import Mapping

# (provider, model prefix) -> (input, output) USD per 1M tokens
PRICES: dict[str, tuple[float, float]] = {
    "openai/gpt-4o-mini": (0.15, 0.60),
    "openai/gpt-4o": (2.50, 10.00),
    "openai/gpt-4.1-nano": (0.10, 0.40),
    "openai/gpt-4.1-mini": (0.40, 1.60),
    "openai/gpt-4.1": (2.00, 8.00),
    "openai/o4-mini": (1.10, 4.40),
    "openai/o3": (2.00, 8.00),
    "anthropic/claude-3-5-haiku": (0.80, 4.00),
    "anthropic/claude-haiku-4": (1.00, 5.00),
    "anthropic/claude-sonnet-4": (3.00, 15.00),
    "anthropic/claude-3-7-sonnet": (3.00, 15.00),
    "anthropic/claude-opus-4": (15.00, 75.00),
    "google/gemini-2.5-flash-lite": (0.10, 0.40),
    "google/gemini-2.5-flash": (0.30, 2.50),
    "google/gemini-2.5-pro": (1.25, 10.00),
    "google/gemini-2.0-flash": (0.10, 0.40),
}

FREE_PROVIDERS = frozenset({"python", "scripted", "local"})


def price_for(provider: str, model: str, overrides: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens, or None when the model is in no table. The suite's
    ``prices`` come first (they may price even an offline provider, e.g. to compare budgets)."""
    found = _longest(provider, model, overrides)
    if found is not None:
        return found
    if provider in FREE_PROVIDERS:
        return (0.0, 0.0)
    return _longest(provider, model, PRICES)


def _longest(provider: str, model: str, table: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
    best: tuple[int, tuple[float, float]] | None = None
    for key, price in table.items():
        entry_provider, _, entry_model = key.partition("/")
        fits = entry_provider == provider and model.startswith(entry_model)
        if fits and (best is None or len(entry_model) > best[0]):
            best = (len(entry_model), price)
    return best[1] if best else None


def cost(prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> float | None:
    if price is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


__all__ = ["FREE_PROVIDERS", "PRICES", "cost", "price_for"]
