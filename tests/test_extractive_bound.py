"""The offline summarizer's size bound: the linear trim (``max_chars`` only) drops exactly
what the render-per-drop loop drops (the loop still runs when ``max_tokens`` is set)."""

from __future__ import annotations

import random

import pytest

from adapters.extractive import ExtractiveSummarizer
from adapters.structured import FIELDS, Item, StructuredSummary

_WORDS = ["budget", "Postgres", "deploy", "42", "Friday", "team", "the", "東京", "cost", "v2"]


def _doc(rng: random.Random) -> StructuredSummary:
    doc = StructuredSummary()
    for name in FIELDS:
        setattr(doc, name, [Item(key=rng.choice(["", "", "k", "a: b"]),
                                 value=" ".join(rng.choice(_WORDS)
                                                for _ in range(rng.randint(1, 12))))
                            for _ in range(rng.randint(0, 25))])
    return doc


@pytest.mark.parametrize("seed", range(60))
def test_the_linear_trim_drops_what_the_loop_drops(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice([0, 1, 10, 80, 300, 900, 4000])
    fast = ExtractiveSummarizer(max_chars=limit)
    loop = ExtractiveSummarizer(max_chars=limit, max_tokens=10**9)  # takes the loop
    doc = _doc(rng)
    assert fast._bound(doc.model_copy(deep=True)) == loop._bound(doc.model_copy(deep=True))
