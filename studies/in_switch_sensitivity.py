"""What NVLink SHARP's measured in-switch efficiency would mean for FRED (docs/sysmodel.md,
"In-switch efficiency"): part of ``fred eval``.

The wafer evaluation runs FRED's in-switch collectives at the RTL's measured line rate
(``in_switch_efficiency`` = 1.0, the default of every variant). The only in-network reduction
measured in production, NVSwitch's NVLS, reaches less: its multicast / reduction traffic runs
at ``in_switch_efficiency`` = 0.836 of point-to-point traffic (fitted on one measured point,
``configs/dgx-h100.toml``; ``fred validate --collectives``). This study reruns Fred-B and
Fred-D with every in-switch flow at that efficiency (their endpoint algorithms unchanged) and
finds, per workload, the efficiency below which Fred-D no longer beats Fred-C (the same
uplinks without in-switch collectives). Only the efficiency is carried over: NVLS's
GPU-driven protocol moves a further 1/N of the data each way (:mod:`sysmodel.multimem`),
which FRED's switch-driven flows do not.

Settings: the documented platform (the headline's); with ``fred eval --calibration paper``,
also each workload at its fitted compute factor, where communication weighs more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sysmodel.iteration_memo import simulate_once
from sysmodel.platform import Platform
from sysmodel.workload_file import get_workload
from sysmodel.workloads import WORKLOADS

__all__ = ["NVLS_PLATFORM", "nvls_in_switch_efficiency", "with_in_switch_efficiency",
           "break_even_efficiency", "in_switch_sensitivity", "InSwitchRow", "InSwitchSensitivity"]

#: The shipped platform whose NVLS variant holds the measured efficiency.
NVLS_PLATFORM = "dgx-h100"
IN_SWITCH_FABRICS = ("fred-b", "fred-d")


def nvls_in_switch_efficiency() -> float:
    """The ``in_switch_efficiency`` of the NVLS variant of ``configs/dgx-h100.toml``."""
    from studies.collective_validation import shipped_platform
    p = shipped_platform(NVLS_PLATFORM)
    return next(v.in_switch_efficiency for _, v in sorted(p.variants.items()) if v.in_switch)


def with_in_switch_efficiency(platform: Platform, efficiency: float) -> Platform:
    """``platform`` with every variant that has in-switch collectives at ``efficiency``."""
    return replace(platform, variants={
        name: replace(v, in_switch_efficiency=efficiency) if v.in_switch else v
        for name, v in platform.variants.items()})


def _time(platform: Platform, fabric: str, workload, overlap: bool) -> float:
    return simulate_once(platform, fabric, workload, overlap=overlap).time_s


def break_even_efficiency(platform: Platform, workload, *, overlap: bool = True,
                          steps: int = 14) -> float | None:
    """The in-switch efficiency at which Fred-D's iteration takes as long as Fred-C's
    (bisection on (0, 1], to 2^-steps): below it Fred-C is faster. None when Fred-D does not
    beat Fred-C even at line rate; 0.0 when it still does at 2^-steps (in-switch traffic too
    small to matter)."""
    target = _time(platform, "fred-c", workload, overlap)

    def fred_d(eff: float) -> float:
        return _time(with_in_switch_efficiency(platform, eff), "fred-d", workload, overlap)

    if fred_d(1.0) >= target:
        return None
    lo, hi = 2.0 ** -steps, 1.0
    if fred_d(lo) < target:
        return 0.0
    for _ in range(steps):   # fred_d(lo) >= target > fred_d(hi)
        mid = (lo + hi) / 2
        if fred_d(mid) >= target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class InSwitchRow:
    """One workload in one setting: speedups over the mesh at line rate and at NVLS's efficiency,
    and Fred-D's break-even efficiency against Fred-C (None: Fred-D never beats it)."""

    setting: str
    workload: str
    compute_scale: float
    fred_b_line_rate: float
    fred_b_nvls: float
    fred_d_line_rate: float
    fred_d_nvls: float
    fred_c: float
    fred_d_break_even_efficiency: float | None


@dataclass(frozen=True)
class InSwitchSensitivity:
    nvls_efficiency: float
    source: str
    rows: list        # [InSwitchRow]


def _rows(setting: str, platform: Platform, workloads, scales: dict, eff: float, overlap: bool) -> list:
    rows = []
    for w in workloads:
        p = platform.with_compute_scale(scales.get(w, 1.0))
        wl = get_workload(w)
        mesh = _time(p, "mesh", wl, overlap)
        slow = with_in_switch_efficiency(p, eff)
        rows.append(InSwitchRow(
            setting=setting, workload=w, compute_scale=scales.get(w, 1.0),
            fred_b_line_rate=mesh / _time(p, "fred-b", wl, overlap),
            fred_b_nvls=mesh / _time(slow, "fred-b", wl, overlap),
            fred_d_line_rate=mesh / _time(p, "fred-d", wl, overlap),
            fred_d_nvls=mesh / _time(slow, "fred-d", wl, overlap),
            fred_c=mesh / _time(p, "fred-c", wl, overlap),
            fred_d_break_even_efficiency=break_even_efficiency(p, wl, overlap=overlap)))
    return rows


def in_switch_sensitivity(platform: Platform, *, overlap: bool = True, calibration=None,
                          workloads=WORKLOADS) -> InSwitchSensitivity:
    """The study (module docstring) on ``platform``; with ``calibration`` (a
    :class:`studies.calibration.PaperCalibration`) also at each workload's fitted compute factor."""
    eff = nvls_in_switch_efficiency()
    rows = _rows("documented", platform, workloads, {}, eff, overlap)
    if calibration is not None:
        scales = {w: f.compute_scale for w, f in calibration.fitted.items() if math.isfinite(f.compute_scale)}
        rows += _rows("calibrated (paper)", platform, [w for w in workloads if w in scales], scales, eff, overlap)
    return InSwitchSensitivity(
        nvls_efficiency=eff, rows=rows,
        source=f"configs/{NVLS_PLATFORM}.toml [fred.variants.nvls] in_switch_efficiency "
               f"(fitted on NVLS all-reduce, 8x H100, https://github.com/NVIDIA/nccl-tests/issues/212)")
