"""The paper where its inputs are unknown, stated as calibration (docs/sysmodel.md, Fidelity).

The paper does not give its NPU's compute speed or how much work an iteration holds (its
tables were images), and the four workloads imply different compute speeds (docs/sysmodel.md).
``fred eval --calibration paper`` therefore fits ONE compute-time parameter per workload --
the factor ``k_w`` by which that workload's compute (peak FLOPS and HBM bandwidth together) is
faster than the documented H100-like NPU -- on ONE figure per workload, its Fred-C speedup
(the full-bandwidth fabric without in-switch collectives), and predicts the three others
(Fred-A, Fred-B, Fred-D) from the model's mechanisms alone: the mesh's routes and hotspots,
the iso-bisection uplinks, in-switch reduction. Nothing else is fitted.

Where no ``k`` reaches the Fred-C figure, the ``k`` whose speedup comes closest is used and
the fit says so (``reached: false``).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from sysmodel.platform import Platform, default_platform
from sysmodel.iteration_memo import simulate_once
from sysmodel.workloads import WORKLOADS
from sysmodel.workload_file import get_workload

__all__ = ["PAPER_SPEEDUP", "ANCHOR", "SCALES", "fit_workload", "calibrate_paper", "WorkloadFit",
           "PaperCalibration"]

#: The paper's end-to-end speedups over the mesh (Fred-A/B are not reported end to end).
PAPER_SPEEDUP = {
    "fred-c": {"resnet-152": 1.41, "transformer-17b": 1.75, "gpt-3": 1.34, "transformer-1t": 1.4},
    "fred-d": {"resnet-152": 1.76, "transformer-17b": 1.87, "gpt-3": 1.34, "transformer-1t": 1.4},
}
#: The figure each workload's parameter is fitted on.
ANCHOR = "fred-c"
FABRICS = ("fred-a", "fred-b", "fred-c", "fred-d")
#: Compute speed-ups scanned (log grid) before bisection.
SCALES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 10000)


@dataclass(frozen=True)
class WorkloadFit:
    """One workload's fitted compute factor (``reached`` false: the closest on the grid)."""

    compute_scale: float
    reached: bool
    anchor: str
    anchor_target: float
    compute_s_per_iteration_mesh: float
    mesh_s_per_iteration: float


@dataclass(frozen=True)
class PaperCalibration:
    """The ``calibration_paper`` entry of ``fred eval --calibration paper``: per workload its
    fit, the speedups predicted at it (``{fabric: {workload: speedup}}``), their errors
    against the paper, and each fit's anchor curve (``{workload: {"scales", "speedup"}}``)."""

    name: str
    what: str
    fitted: dict          # {workload: WorkloadFit}
    speedup: dict
    paper_speedup: dict
    error: dict
    fred_d_within_10pct: bool
    fred_d_worst_error: float | None
    curves: dict


def _speedups(platform: Platform, workload, k: float, fabrics=FABRICS, overlap: bool = True) -> dict:
    p = platform.with_compute_scale(k)
    mesh = simulate_once(p, "mesh", workload, overlap=overlap)
    out = {"mesh_s": mesh.time_s, "compute_s": mesh.breakdown["compute"]}
    for f in fabrics:
        out[f] = mesh.time_s / simulate_once(p, f, workload, overlap=overlap).time_s
    return out


def fit_workload(workload: str, platform: Platform | None = None, *, overlap: bool = True,
                 progress: bool = False) -> dict:
    """Fit ``k`` on the workload's Fred-C figure; predict Fred-A, B, D there."""
    platform = platform or default_platform()
    wl = get_workload(workload)
    target = PAPER_SPEEDUP[ANCHOR][workload]

    def anchor(k):
        return _speedups(platform, wl, k, (ANCHOR,), overlap)[ANCHOR]

    values = [anchor(k) for k in SCALES]
    k_fit, reached = None, False
    for (k0, v0), (k1, v1) in zip(zip(SCALES, values), zip(SCALES[1:], values[1:])):
        if (v0 - target) * (v1 - target) <= 0 and v0 != v1:
            lo, hi, vlo = math.log(k0), math.log(k1), v0
            for _ in range(12):   # the crossing factor to within 2^-12 of the bracket
                mid = (lo + hi) / 2
                vm = anchor(math.exp(mid))
                if (vm - target) * (vlo - target) > 0:
                    lo, vlo = mid, vm
                else:
                    hi = mid
            k_fit, reached = math.exp((lo + hi) / 2), True
            break
    if k_fit is None:   # closest on the grid
        k_fit = min(zip(SCALES, values), key=lambda kv: abs(kv[1] - target))[0]
    at = _speedups(platform, wl, k_fit, FABRICS, overlap)
    predicted = {f: at[f] for f in FABRICS}
    error = {f: predicted[f] / PAPER_SPEEDUP[f][workload] - 1
             for f in PAPER_SPEEDUP if workload in PAPER_SPEEDUP[f]}
    if progress:
        print(f"  {workload:16s} compute x{k_fit:.4g} ({'fits' if reached else 'closest to'} "
              f"{ANCHOR} {target}): " + ", ".join(f"{f} {v:.3f}" for f, v in predicted.items()),
              file=sys.stderr, flush=True)
    return {"compute_scale": k_fit, "reached": reached, "anchor": ANCHOR,
            "anchor_target": target, "compute_s_per_iteration_mesh": at["compute_s"],
            "mesh_s_per_iteration": at["mesh_s"], "speedup": predicted, "error": error,
            "anchor_curve": {"scales": list(SCALES), "speedup": values}}


def calibrate_paper(platform: Platform | None = None, *, workloads=WORKLOADS, overlap: bool = True,
                    progress: bool = False, tick=None) -> PaperCalibration:
    """The ``calibration`` entry of ``fred eval --calibration paper``; ``tick(1)`` after each
    workload's fit (a progress bar's ``update``)."""
    platform = platform or default_platform()
    fits = {}
    for w in workloads:
        fits[w] = fit_workload(w, platform, overlap=overlap, progress=progress)
        if tick is not None:
            tick(1)
    speedup = {f: {w: fits[w]["speedup"][f] for w in workloads} for f in FABRICS}
    error = {f: {w: fits[w]["error"][f] for w in workloads if f in fits[w]["error"]}
             for f in PAPER_SPEEDUP}
    fred_d = [abs(e) for e in error["fred-d"].values()]
    fit_fields = WorkloadFit.__dataclass_fields__
    return PaperCalibration(
        name="paper",
        what=(f"one compute-speed factor per workload (peak FLOPS and HBM bandwidth x k), "
              f"fitted on that workload's {ANCHOR} figure; fred-a, fred-b and fred-d predicted"),
        fitted={w: WorkloadFit(**{k: fits[w][k] for k in fit_fields}) for w in workloads},
        speedup=speedup, paper_speedup=PAPER_SPEEDUP, error=error,
        fred_d_within_10pct=all(e <= 0.10 for e in fred_d),
        fred_d_worst_error=max(fred_d) if fred_d else None,
        curves={w: fits[w]["anchor_curve"] for w in workloads})
