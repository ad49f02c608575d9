"""Intervals on the evaluation's speedups from the uncertain inputs (docs/uncertainty.md):
part of ``fred eval``.

Four inputs decide the speedups and are not known exactly (:func:`uncertain_inputs`, each with
the documented range it is drawn from and where the range comes from):

* the NPU's compute speed (peak FLOPS and HBM bandwidth together), as a factor on the block's
  own compute speed -- the documented H100-like NPU for the documented block, each workload's
  fitted factor ``k_w`` for the calibrated block;
* the links' efficiency (fraction of the line rate the collectives reach);
* the in-switch efficiency of Fred-B/D's in-switch collectives;
* the overlap policy (communication overlapped with compute, or serialised).

Propagation, by sampling: a Latin hypercube of ``samples`` points over the three continuous
inputs (compute factor log-uniform, the efficiencies uniform; each input's range cut into
``samples`` equal strata, one point per stratum, the strata paired by a seeded permutation, so
the result is the same on every run), evaluated under each overlap policy, plus the point value
itself. A speedup's interval is the smallest and the largest speedup over those runs: the range
the sampled inputs span, not a confidence interval (the inputs have ranges, not distributions).
Alongside, each input's effect alone: the speedup at its range's two ends, the others at their
point values (a one-at-a-time swing).

The calibrated block keeps each workload's fitted ``k_w`` (fitted at the point values of the
other inputs) and is not refitted per sample: its interval says how far the predictions move
when the other inputs are off, not how the fit would move.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass

from sysmodel.iteration_memo import simulate_once
from sysmodel.platform import Platform
from sysmodel.workload_file import get_workload
from sysmodel.workloads import WORKLOADS
from studies.calibration import FABRICS
from studies.in_switch_sensitivity import nvls_in_switch_efficiency, with_in_switch_efficiency

__all__ = ["UncertainInput", "uncertain_inputs", "DEFAULT_SAMPLES", "MAX_SAMPLES", "SpeedupInterval",
           "Swing", "UncertaintyBlock", "sample_points", "uncertainty_block", "block_runs"]

#: Latin-hypercube points per overlap policy in ``fred eval`` (so 2 x this many runs + 1 per
#: block, each the four workloads on the mesh and Fred-A..D).
DEFAULT_SAMPLES = 6
MAX_SAMPLES = 200
SEED = 36


@dataclass(frozen=True)
class UncertainInput:
    """One uncertain input: its range (``low``..``high``, the point value ``point`` inside) and
    where the range comes from. ``log``: sampled log-uniformly (a factor), else uniformly."""

    name: str
    low: float
    high: float
    point: float
    log: bool
    source: str


@functools.cache
def uncertain_inputs() -> tuple[UncertainInput, ...]:
    """The continuous uncertain inputs, in sampling order (the overlap policy is the fourth,
    evaluated at both values)."""
    nvls = nvls_in_switch_efficiency()
    return (
        UncertainInput("compute speed factor", 0.5, 4 / 3, 1.0, True,
                       "x0.5..x1.33 of the block's compute speed: the documented NPU runs each GEMM "
                       "at its shape's efficiency under an assumed peak fraction of 0.75 "
                       "(docs/sysmodel.md, Fidelity); x0.5 is every GEMM at half that (0.375 of "
                       "peak, as small and skinny GEMMs run), x1.33 every GEMM at the full peak. "
                       "The paper's own figures imply far faster compute (the implied compute "
                       "speed-ups below; the calibrated table)"),
        UncertainInput("link efficiency", 0.77, 1.0, 1.0, False,
                       "0.77 (NCCL's measured large-message ring bus bandwidth on A100, "
                       "configs/a100-cluster.toml) .. 1.0 (the RTL's line rate, the wafer's "
                       "documented value)"),
        UncertainInput("in-switch efficiency", nvls, 1.0, 1.0, False,
                       f"{nvls:.3f} (NVLink SHARP's measured in-switch efficiency, "
                       "configs/dgx-h100.toml) .. 1.0 (the RTL's measured line rate, documented); "
                       "Fred-B/D only"),
    )


@dataclass(frozen=True)
class SpeedupInterval:
    """One speedup: its value at the point inputs and the smallest and largest over the runs."""

    point: float
    low: float
    high: float


@dataclass(frozen=True)
class Swing:
    """One input's effect alone on one fabric and workload: the speedup at the two ends of its
    range (the overlap policy: overlap / serialised), the other inputs at their point values."""

    input: str
    fabric: str
    workload: str
    at_low: float
    at_high: float


@dataclass(frozen=True)
class UncertaintyBlock:
    """One table's intervals: ``intervals`` is ``{fabric: {workload: SpeedupInterval}}``;
    ``compute_scales`` the block's compute speed per workload (1.0: documented); ``runs`` the
    input settings evaluated per workload."""

    name: str
    assumes: str
    compute_scales: dict
    intervals: dict
    swings: list
    runs: int
    samples_per_policy: int


def sample_points(samples: int, seed: int = SEED) -> list[tuple[float, ...]]:
    """``samples`` Latin-hypercube points over :func:`uncertain_inputs` (one value per input,
    in their order): each range cut into ``samples`` strata, a point at a random place in each,
    the strata of the inputs paired by seeded permutations (deterministic)."""
    if not 1 <= samples <= MAX_SAMPLES:
        raise ValueError(f"samples must be in 1..{MAX_SAMPLES}, got {samples}")
    rng = random.Random(seed)
    columns = []
    for spec in uncertain_inputs():
        strata = list(range(samples))
        rng.shuffle(strata)
        column = []
        for s in strata:
            u = (s + rng.random()) / samples
            column.append(math.exp(math.log(spec.low) + u * (math.log(spec.high) - math.log(spec.low)))
                          if spec.log else spec.low + u * (spec.high - spec.low))
        columns.append(column)
    return list(zip(*columns))


def _platform(platform: Platform, compute: float, link: float, in_switch: float) -> Platform:
    p = platform.with_compute_scale(compute) if compute != 1 else platform
    if link != platform.link_efficiency:
        p = p.scaled(link_efficiency=link)
    return with_in_switch_efficiency(p, in_switch) if in_switch != 1.0 else p


def _speedups(platform: Platform, workload: str, values: tuple, scale: float, overlap: bool) -> dict:
    compute, link, in_switch = values
    p = _platform(platform, compute * scale, link, in_switch)
    wl = get_workload(workload)
    mesh = simulate_once(p, "mesh", wl, overlap=overlap).time_s
    return {f: mesh / simulate_once(p, f, wl, overlap=overlap).time_s for f in FABRICS}


def block_runs(samples: int) -> int:
    """The input settings one block evaluates per workload: the point, ``samples`` sampled under
    each overlap policy, and the two ends of each input's range (the swings; an end equal to the
    point value is the memoised point run)."""
    return 1 + 2 * samples + 2 * (len(uncertain_inputs()) + 1)


def uncertainty_block(platform: Platform, name: str, assumes: str, compute_scales: dict, *,
                      samples: int = DEFAULT_SAMPLES, overlap: bool = True, workloads=WORKLOADS,
                      tick=None) -> UncertaintyBlock:
    """The intervals of one table (see the module's docstring): ``compute_scales`` is
    ``{workload: compute speed factor}`` of the block; ``overlap`` the headline's policy (the
    point value); ``tick(1)`` after each workload. Cost: :func:`block_runs` settings per workload,
    each five iterations (the mesh and Fred-A..D; about 1.7 s per workload at 6 samples)."""
    point = tuple(spec.point for spec in uncertain_inputs())
    points = sample_points(samples)
    intervals = {f: {} for f in FABRICS}
    swings = []
    for w in workloads:
        k = compute_scales[w]
        at_point = _speedups(platform, w, point, k, overlap)
        runs = [at_point] + [_speedups(platform, w, v, k, flag) for v in points for flag in (True, False)]
        ends = {}
        for i, spec in enumerate(uncertain_inputs()):
            ends[spec.name] = [_speedups(platform, w, point[:i] + (end,) + point[i + 1:], k, overlap)
                               for end in (spec.low, spec.high)]
        ends["overlap policy"] = [_speedups(platform, w, point, k, flag) for flag in (True, False)]
        runs += [r for pair in ends.values() for r in pair]
        for f in FABRICS:
            values = [r[f] for r in runs]
            intervals[f][w] = SpeedupInterval(point=at_point[f], low=min(values), high=max(values))
            swings += [Swing(input=n, fabric=f, workload=w, at_low=lo[f], at_high=hi[f])
                       for n, (lo, hi) in ends.items()]
        if tick is not None:
            tick(1)
    return UncertaintyBlock(name=name, assumes=assumes, compute_scales=dict(compute_scales),
                            intervals=intervals, swings=swings, runs=block_runs(samples),
                            samples_per_policy=samples)
