"""Pipeline schedules: the order in which one pipeline stage runs its forward and backward
passes (GPipe, 1F1B, and Megatron's interleaved 1F1B over several model chunks per stage).
:mod:`sysmodel.task_graphs` turns these orders into tasks.
"""

from __future__ import annotations

from hdl.contracts.errors import FredError

__all__ = ["pipeline_ops", "interleaved_ops"]


def pipeline_ops(schedule: str, stage: int, pp: int, m: int) -> list[tuple[str, int]]:
    """Order of ``stage``'s forward ("F", microbatch) and backward ("B", microbatch) passes
    over ``m`` microbatches in a ``pp``-stage pipeline: GPipe (all forwards, then all backwards
    in reverse) or 1F1B (PP - stage - 1 warm-up forwards, then alternating, then the rest)."""
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in reversed(range(m))]
    warm = min(pp - stage - 1, m)
    ops = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        ops += [("F", warm + i), ("B", i)]
    ops += [("B", i) for i in range(m - warm, m)]
    return ops


def interleaved_ops(stage: int, pp: int, m: int, chunks: int) -> list[tuple[str, int, int]]:
    """Order of ``stage``'s (kind, microbatch, model chunk) passes in Megatron's interleaved
    1F1B (Narayanan et al. 2021) with ``chunks`` model chunks per stage: forward k runs chunk
    (k // pp) % chunks of microbatch (k // (pp*chunks))*pp + k % pp; backward k the chunks in
    reverse; (pp - stage - 1)*2 + (chunks - 1)*pp warm-up forwards, then one forward / one
    backward alternately, then the remaining backwards. ``m`` must be a multiple of ``pp``."""
    if m % pp:
        raise FredError(f"the interleaved schedule needs the microbatches ({m}) to be a "
                        f"multiple of PP ({pp})")
    total = m * chunks

    def fwd(k):
        return ("F", (k // (pp * chunks)) * pp + k % pp, (k // pp) % chunks)

    def bwd(k):
        return ("B", (k // (pp * chunks)) * pp + k % pp, chunks - 1 - (k // pp) % chunks)

    warm = min((pp - stage - 1) * 2 + (chunks - 1) * pp, total)
    ops = [fwd(k) for k in range(warm)]
    for k in range(total - warm):
        ops += [fwd(warm + k), bwd(k)]
    ops += [bwd(k) for k in range(total - warm, total)]
    return ops
