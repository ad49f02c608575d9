"""argparse option types the subcommands share: a bad value is argparse's one-line usage error
naming the option (``argument --ports: expected comma-separated integers, got '4,x'``)."""

from __future__ import annotations

import argparse

__all__ = ["comma_ints"]


def comma_ints(text: str) -> tuple[int, ...]:
    """``"4,8,16"`` -> ``(4, 8, 16)`` (empty items skipped, so ``""`` is ``()``)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
