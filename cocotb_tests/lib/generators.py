"""Idle and backpressure generators: infinite iterators of booleans, one value per cycle.

They are orthogonal to scenarios: any driver takes any idle generator (``True`` = insert an idle
cycle instead of offering the next item) and any sink takes any backpressure generator (``True`` =
hold ``ready`` low this cycle).
"""

from __future__ import annotations

import itertools
import random
from typing import Iterator

__all__ = ["never", "always", "random_idle", "random_backpressure", "bursts"]


def never() -> Iterator[bool]:
    """No idle cycles / no backpressure."""
    return itertools.repeat(False)


def always() -> Iterator[bool]:
    """Idle forever / ready never high (for tests of stalls)."""
    return itertools.repeat(True)


def random_idle(rng: random.Random, probability: float) -> Iterator[bool]:
    """Independent idle cycles with the given probability."""
    _check_probability(probability)
    while True:
        yield rng.random() < probability


def random_backpressure(rng: random.Random, probability: float) -> Iterator[bool]:
    """Independent cycles of ``ready`` low with the given probability."""
    return random_idle(rng, probability)


def bursts(rng: random.Random, *, on: tuple[int, int] = (1, 16),
           off: tuple[int, int] = (1, 16)) -> Iterator[bool]:
    """Alternating runs: ``False`` for a random length in ``on``, then ``True`` for one in ``off``."""
    while True:
        for _ in range(rng.randint(*on)):
            yield False
        for _ in range(rng.randint(*off)):
            yield True


def _check_probability(probability: float) -> None:
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"probability must be in [0, 1], got {probability}")
