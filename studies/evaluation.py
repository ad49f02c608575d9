"""The main job: the paper's end-to-end results, the strategy sweep, and their files.

:func:`run_evaluation` runs the four workloads on the mesh and Fred-A..D (the paper's
strategies, 16 samples per DP replica), the Transformer-17B microbenchmarks (docs/sysmodel.md, Fabrics and collectives), the
strategy sweeps (Transformer-17B and Transformer-1T, 40 samples per DP replica, mesh and
Fred-D) and a diagnostic: for each workload, the factor by which NPU compute would have to be
faster (peak FLOPS and HBM bandwidth scaled together) for the model's Fred-C / Fred-D speedup
to equal the paper's. The diagnostic quantifies the disagreement; it is never used to
produce the headline speedups. With ``output`` it writes CSV, JSON and PNG files there.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from hdl.contracts.errors import FredError
from sysmodel.collectives import Collective, evaluate
from sysmodel.platform import Platform, default_platform
from sysmodel.switch_routing import ROUTER
from hdl.contracts.placement import factorisations, parse_strategy
from sysmodel.iteration_memo import simulate_once
from sysmodel.training import CATEGORIES
from sysmodel.workloads import WORKLOADS
from sysmodel.workload_file import get_workload
from studies.calibration import PaperCalibration, calibrate_paper
from studies.report import OMIT_NONE, check_writable, figure, pyplot, save_png, write_csv, write_json

__all__ = ["PAPER_SPEEDUP", "run_evaluation", "evaluation_steps", "sweep", "strategy_row", "rank_rows", "speedup_table", "implied_compute_scale", "calibrate",
           "microbenchmarks", "FRED_FABRICS", "SweepRow", "Microbenchmark", "Explanation",
           "SweepSummary", "SweepComparison", "Spread", "ImpliedComputeScale", "Calibration",
           "EvaluationResult", "write_evaluation", "evaluation_plots", "EARLY_PLOTS", "sweep_microbatches"]

FRED_FABRICS = ("fred-a", "fred-b", "fred-c", "fred-d")
#: The paper's end-to-end speedups over the mesh (Fred-A/B are not reported end to end).
PAPER_SPEEDUP = {
    "fred-c": {"resnet-152": 1.41, "transformer-17b": 1.75, "gpt-3": 1.34, "transformer-1t": 1.4},
    "fred-d": {"resnet-152": 1.76, "transformer-17b": 1.87, "gpt-3": 1.34, "transformer-1t": 1.4},
}
SWEEP_SAMPLES_PER_DP = 40  # the paper's strategy sweep: minibatch 40 x DP


# -- the results (their JSON is :func:`studies.report.to_json_dict` of these) -------------------
@dataclass(frozen=True)
class SweepRow:
    """One strategy of a sweep. A strategy that does not fit has ``feasible`` false, infinite
    times, the reason in ``notes`` and no breakdown (those fields are None and left out of the
    JSON). The ``<category>_s`` fields are the iteration's breakdown
    (:data:`sysmodel.training.CATEGORIES`); ``rank`` is set by :func:`rank_rows`."""

    strategy: str
    feasible: bool
    time_s: float
    time_per_sample_s: float
    notes: str
    eval_s: float = 0.0
    microbatches: int | None = field(default=None, metadata=OMIT_NONE)
    compute_s: float | None = field(default=None, metadata=OMIT_NONE)
    mp_s: float | None = field(default=None, metadata=OMIT_NONE)
    pp_s: float | None = field(default=None, metadata=OMIT_NONE)
    io_s: float | None = field(default=None, metadata=OMIT_NONE)
    dp_s: float | None = field(default=None, metadata=OMIT_NONE)
    bubble_s: float | None = field(default=None, metadata=OMIT_NONE)
    config_load_s: float | None = field(default=None, metadata=OMIT_NONE)
    exposed_comm_s: float | None = field(default=None, metadata=OMIT_NONE)
    rank: int | None = field(default=None, metadata=OMIT_NONE)


#: The columns of a ``sweep_<workload>_<fabric>.csv``.
SWEEP_CSV_FIELDS = ("rank", "strategy", "feasible", "time_per_sample_s", "time_s", "microbatches",
                    *[f"{c}_s" for c in CATEGORIES], "exposed_comm_s", "notes")   # no wall-clock column: the file is a result


@dataclass(frozen=True)
class Microbenchmark:
    """One collective case of the Transformer-17B microbenchmarks on one fabric."""

    case: str
    fabric: str
    time_s: float
    bytes_sent_per_npu: float
    effective_bandwidth_per_npu_gbps: float
    busiest_link: str
    algorithm: str


@dataclass(frozen=True)
class Explanation:
    """The breakdown facts behind one workload's speedups (per fabric: exposed communication
    and pipeline bubble seconds) and a sentence saying them."""

    mesh_time_s: float
    compute_fraction_of_mesh_iteration: float
    exposed_comm_s: dict
    bubble_s: dict
    text: str


@dataclass(frozen=True)
class SweepSummary:
    """One sweep (a workload on a fabric) summarised; None where no strategy fits."""

    best: str | None
    best_time_per_sample_s: float | None
    most_compute_efficient: str | None
    mean_exposed_comm_per_sample_s: float | None
    feasible: int
    total: int


@dataclass(frozen=True)
class SweepComparison:
    """Fred-D against the mesh over the strategies that fit on both."""

    exposed_comm_reduction: float
    mean_speedup: float
    strategies: int


@dataclass(frozen=True)
class Spread:
    """How far the paper's eight figures are from implying one compute speed."""

    min: float | None
    max: float | None
    ratio: float | None
    unreachable: list


@dataclass(frozen=True)
class ImpliedComputeScale:
    """Per overlap policy, ``{fabric: {workload: compute speed-up that reproduces the paper's
    figure, or None}}``, and the spread of each policy; all None (an empty JSON object)
    without the diagnostic."""

    overlap: dict | None = field(default=None, metadata=OMIT_NONE)
    serialised: dict | None = field(default=None, metadata=OMIT_NONE)
    spread: dict | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class Calibration:
    """One global compute speed-up fitted on ``anchor`` and the table it predicts (all None
    but ``anchor`` when no speed-up reaches the anchor's figure)."""

    anchor: str
    scale: float | None
    speedup: dict | None
    error: dict | None
    within_10pct: list


@dataclass(frozen=True)
class EvaluationResult:
    """Everything ``fred eval`` reports; ``results/results.json`` is this, as JSON.

    ``iterations`` and ``sweep`` are keyed ``"<workload>/<fabric>"``; ``sweep_summary`` holds a
    :class:`SweepSummary` per sweep and a :class:`SweepComparison` per
    ``"<workload>/fred-d vs mesh"``."""

    speedup: dict
    explanation: dict            # {workload: Explanation}
    paper_speedup: dict
    iterations: dict             # {"w/f": sysmodel.training.IterationResult}
    microbenchmarks: list        # [Microbenchmark]
    sweep: dict                  # {"w/f": [SweepRow]}
    sweep_summary: dict          # {"w/f": SweepSummary, "w/fred-d vs mesh": SweepComparison}
    overlap: str
    implied_compute_scale: ImpliedComputeScale
    calibration: Calibration | None
    # one compute parameter per workload fitted on its Fred-C figure (labelled; the headline
    # "speedup" above stays the documented platform's; docs/sysmodel.md)
    calibration_paper: PaperCalibration | None
    compute_sensitivity: dict
    platform: dict
    # each level's switch timing (its chiplet's measured point, docs/sysmodel.md "Chiplets")
    switch_timing: dict
    compiler: str
    elapsed_s: float
    # Fred-B/D at NVLink SHARP's measured in-switch efficiency instead of the RTL's line rate,
    # and Fred-D's break-even efficiency against Fred-C (studies/in_switch_sensitivity.py)
    in_switch_sensitivity: object = None
    # the speedups' intervals from the uncertain inputs, one block per table (the documented
    # platform; with --calibration paper also the calibrated one): studies/uncertainty.py
    uncertainty: list = field(default_factory=list)

    def iteration(self, workload: str, fabric: str):
        """The headline iteration of ``workload`` on ``fabric``."""
        return self.iterations[f"{workload}/{fabric}"]

    def sweep_rows(self, workload: str, fabric: str) -> list:
        return self.sweep[f"{workload}/{fabric}"]


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        print(text, file=sys.stderr, flush=True)


def _tick(tick, n: int = 1) -> None:
    """Report ``n`` finished steps to ``tick`` (a progress bar's ``update``), if any."""
    if tick is not None:
        tick(n)


def evaluation_steps(*, with_diagnostic: bool = True, calibration_mode: str | None = None,
                     uncertainty_samples: int | None = None) -> int:
    """The steps :func:`run_evaluation` reports to its ``tick``: every headline iteration, the
    microbenchmarks, every sweep strategy, every (workload, compute scale) of the sensitivity
    curves and every diagnostic fit of both overlap policies, the calibration, with
    ``calibration_mode="paper"`` every workload's fit, and with ``uncertainty_samples`` every
    workload of each uncertainty block."""
    from hdl.contracts.placement import factorisations
    steps = len(WORKLOADS) * (1 + len(FRED_FABRICS)) + 1 + 4 * len(factorisations(default_platform().npus))
    if with_diagnostic:
        fits = sum(len(t) for t in PAPER_SPEEDUP.values())
        steps += 2 * (len(WORKLOADS) * len(COMPUTE_SCALES) + fits) + 1
    if calibration_mode == "paper":
        steps += len(WORKLOADS)
    if uncertainty_samples:
        steps += len(WORKLOADS) * (2 if calibration_mode == "paper" else 1)
    return steps


def speedup_table(platform: Platform | None = None, *, progress: bool = False,
                  workloads=WORKLOADS, overlap: bool = True, tick=None) -> tuple[dict, dict]:
    """({fabric: {workload: speedup}}, {(workload, fabric): IterationResult}); ``overlap=False``
    runs every iteration in the serialised mode (:func:`simulate_iteration`)."""
    platform = platform or default_platform()
    runs = {}
    for w in workloads:
        for fabric in ("mesh", *FRED_FABRICS):
            start = time.perf_counter()
            runs[(w, fabric)] = simulate_once(platform, fabric, get_workload(w), overlap=overlap)
            _progress(progress, f"  {w:16s} {fabric:7s} {runs[(w, fabric)].time_s:10.4f} s/iteration "
                                f"({time.perf_counter() - start:.2f} s)")
            _tick(tick)
    table = {f: {w: runs[(w, "mesh")].time_s / runs[(w, f)].time_s for w in workloads}
             for f in FRED_FABRICS}
    return table, runs


def sweep(workload: str, fabric: str, platform: Platform | None = None, *,
          samples_per_dp: int = SWEEP_SAMPLES_PER_DP, progress: bool = False,
          overlap: bool = True, tick=None) -> list[SweepRow]:
    """Every MP x DP x PP factorisation of the NPU count, ranked by time per sample.

    Pipelines use max(the workload's microbatches, PP) microbatches (more if memory needs);
    strategies that do not fit are listed last with the reason."""
    platform = platform or default_platform()
    platform.check_fabric(fabric)
    base = get_workload(workload)
    rows = []
    strategies = factorisations(platform.npus)
    for n, strategy in enumerate(strategies, 1):
        row = strategy_row(platform, fabric, base, strategy, samples_per_dp, overlap)
        rows.append(row)
        _progress(progress, f"  sweep {workload} {fabric} [{n}/{len(strategies)}] {strategy}: "
                            f"{'%.4f s' % row['time_s'] if row['feasible'] else 'does not fit'}")
        _tick(tick)
    return rank_rows(rows)


def strategy_row(platform: Platform, fabric: str, base, strategy, samples_per_dp: int,
                 overlap: bool = True) -> dict:
    """One row of a strategy sweep: ``strategy`` of workload ``base`` on ``fabric`` with
    max(the workload's microbatches, PP) microbatches (more if memory needs); a strategy that
    does not fit is a row with ``feasible`` false and the reason in ``notes``.

    The row is plain data (a dict with the fields of :class:`SweepRow`): a point that process
    pools, clusters and the point cache carry (:mod:`studies.points`)."""
    start = time.perf_counter()
    try:
        m = sweep_microbatches(base.microbatches, strategy.pp, samples_per_dp)
        # once per platform value: design-space points whose designs give one platform (two
        # chiplets whose figures these iterations read are equal: studies.cost.design_switch_timing)
        r = simulate_once(platform, fabric, base.with_microbatches(m), strategy,
                          samples_per_dp=samples_per_dp, overlap=overlap)
        row = {"strategy": str(strategy), "time_s": r.time_s, "feasible": True,
               "time_per_sample_s": r.time_s / (samples_per_dp * strategy.dp),
               "microbatches": r.microbatches, **{f"{k}_s": v for k, v in r.breakdown.items()},
               "exposed_comm_s": sum(r.breakdown[k] for k in ("mp", "pp", "io", "dp")),
               "notes": "; ".join(r.notes)}
    except FredError as exc:
        row = {"strategy": str(strategy), "time_s": math.inf, "time_per_sample_s": math.inf,
               "feasible": False, "notes": str(exc)}
    row["eval_s"] = time.perf_counter() - start
    return row


def rank_rows(rows) -> list[SweepRow]:
    """Sweep rows (:class:`SweepRow` s, or :func:`strategy_row` dicts) ranked by time per
    sample (feasible first), each given its ``rank``.

    The minibatch is 40 x DP, so strategies process different numbers of samples per
    iteration: rank by time per sample (inverse training throughput)."""
    typed = [r if isinstance(r, SweepRow) else SweepRow(**r) for r in rows]
    typed.sort(key=lambda r: (not r.feasible, r.time_per_sample_s))
    return [replace(r, rank=rank) for rank, r in enumerate(typed, 1)]


def sweep_microbatches(workload_microbatches: int, pp: int, samples_per_dp: int) -> int:
    """Microbatches of a sweep strategy: max(the workload's, PP) with a pipeline (1 without),
    raised to the next divisor of ``samples_per_dp``; an error when there is none."""
    least = max(workload_microbatches, pp) if pp > 1 else 1
    divisors = [k for k in range(least, samples_per_dp + 1) if samples_per_dp % k == 0]
    if not divisors:
        raise FredError(f"PP({pp}) needs at least {least} microbatches, more than the "
                        f"{samples_per_dp} samples per DP replica")
    return divisors[0]


def implied_compute_scale(workload: str, fabric: str, target: float,
                          platform: Platform | None = None, curve: tuple | None = None, *,
                          overlap: bool = True) -> float | None:
    """Smallest factor k >= 1 (NPU compute k times faster) at which the model's speedup of
    ``fabric`` over the mesh reaches ``target``; None when no k up to 1e4 does.

    The speedup is not monotonic in k (e.g. GPT-3: MP traffic dominates at k ~ 100, the I/O
    streams, equally fast on both fabrics, at k ~ 1e4), so the first crossing is bracketed on
    a grid (``curve`` = (scales, speedups) from :func:`compute_sensitivity`, else computed)
    and then bisected."""
    platform = platform or default_platform()
    w = get_workload(workload)

    def speedup(k: float) -> float:
        p = platform.with_compute_scale(k)
        return (simulate_once(p, "mesh", w, overlap=overlap).time_s
                / simulate_once(p, fabric, w, overlap=overlap).time_s)

    scales, values = curve if curve else (COMPUTE_SCALES, [speedup(k) for k in COMPUTE_SCALES])
    if values[0] >= target:
        return float(scales[0])
    for (k0, v0), (k1, v1) in zip(zip(scales, values), zip(scales[1:], values[1:])):
        if v0 < target <= v1:
            lo, hi = math.log(k0), math.log(k1)
            for _ in range(6):  # within 6 % of the crossing factor
                mid = (lo + hi) / 2
                if speedup(math.exp(mid)) < target:
                    lo = mid
                else:
                    hi = mid
            return math.exp((lo + hi) / 2)
    return None


COMPUTE_SCALES = (1, 2, 4, 8, 16, 32, 64, 128, 1000, 10000)


def compute_sensitivity(platform: Platform | None = None, scales=COMPUTE_SCALES, *,
                        overlap: bool = True, tick=None) -> dict:
    """{workload: {fabric: [speedup at each compute scale]}, "scales": [...]} for Fred-C and
    Fred-D: how the
    speedup over the mesh grows as NPU compute (FLOPS and HBM bandwidth) gets faster."""
    platform = platform or default_platform()
    out = {"scales": list(scales)}
    for w in WORKLOADS:
        wl = get_workload(w)
        curves = {f: [] for f in PAPER_SPEEDUP}  # the paper's fabrics only (keeps eval fast)
        for k in scales:
            p = platform.with_compute_scale(k)
            mesh = simulate_once(p, "mesh", wl, overlap=overlap).time_s
            for f in curves:
                curves[f].append(mesh / simulate_once(p, f, wl, overlap=overlap).time_s)
            _tick(tick)
        out[w] = curves
    return out


def microbenchmarks(platform: Platform | None = None, size: float = 1e9) -> list[Microbenchmark]:
    """The paper's Transformer-17B effective-bandwidth table, from the model."""
    platform = platform or default_platform()
    s = parse_strategy("MP2-DP5-PP2")
    cases = {
        "MP(20) wafer-wide all-reduce": [Collective("all-reduce", tuple(range(platform.npus)), size)],
        "MP2-DP5-PP2 MP all-reduce": [Collective("all-reduce", g, size) for g in s.groups("mp")],
        "MP2-DP5-PP2 DP all-reduce": [Collective("all-reduce", g, size) for g in s.groups("dp")],
        "MP2-DP5-PP2 PP multicast": [Collective("multicast", d, size, root=r)
                                     for r, d in s.stage_transfers(0)],
    }
    rows = []
    for case, colls in cases.items():
        for fabric in ("mesh", *FRED_FABRICS):
            r = evaluate(platform, fabric, colls)
            rows.append(Microbenchmark(case=case, fabric=fabric, time_s=r.time_s,
                                       bytes_sent_per_npu=r.bytes_sent_per_npu,
                                       effective_bandwidth_per_npu_gbps=r.effective_bandwidth_per_npu_gbps,
                                       busiest_link=r.busiest_link, algorithm=",".join(r.algorithms)))
    return rows


def run_evaluation(output: str | Path | None = "results", *, progress: bool = True,
                   platform: Platform | None = None, with_diagnostic: bool = True,
                   overlap: bool = True, calibration_mode: str | None = None,
                   uncertainty_samples: int | None = None, tick=None,
                   background: bool | None = None) -> EvaluationResult:
    """Everything ``fred eval`` reports; writes files into ``output`` unless it is None (an
    output folder that cannot be written is an error before any work).

    ``overlap`` chooses the headline's overlap policy (False: the serialised mode). The
    diagnostic always covers both policies: for each, the compute speed-up each of the paper's
    eight figures implies, and the spread between them (one global compute speed can only
    reproduce the table if the eight agree).

    ``background`` (default: where the machine can, :func:`studies.background_work.can_fork`):
    the strategy sweeps (with their plot) run in a forked child process beside the other steps,
    and the in-switch study and the breakdown and sensitivity plots in another beside the
    uncertainty blocks (neither reads what the other steps compute); the same
    functions compute the same values either way (docs/sysmodel.md, Speed, twenty-sixth
    increment). The sweeps' progress lines and steps are reported when they are collected,
    after the uncertainty blocks."""
    from studies.background_work import ForkedCall, can_fork
    if calibration_mode not in (None, "none", "paper"):
        raise FredError(f"unknown calibration {calibration_mode!r}; expected paper or none")
    if output is not None:
        check_writable(output, folder=True)
    out = None if output is None else Path(output)
    platform = platform or default_platform()
    start = time.perf_counter()
    background = can_fork() if background is None else background
    if background:   # once, before the forks, what each process would load (or compile) again
        from sysmodel.compiled_code import warm_up_all
        warm_up_all()    # the model's compiled code: on a fresh clone, compiled once, not per process
        if out is not None:
            pyplot()     # each child plots with it (0.3 s each otherwise)
    # the sweeps read nothing the other steps compute: on the second core meanwhile
    sweeping = ForkedCall(_swept, platform, overlap, progress, out, in_background=background).start()
    in_switch_and_plots = None
    try:
        _progress(progress, "[1/4] end-to-end iterations: 4 workloads x 5 fabrics")
        table, runs = speedup_table(platform, progress=progress, overlap=overlap, tick=tick)
        _progress(progress, "[2/4] collective microbenchmarks")
        micro = microbenchmarks(platform)
        _tick(tick)
        _progress(progress, "[3/4] strategy sweeps (transformer-17b, transformer-1t on mesh and "
                            "fred-d): in a background process, reported after the uncertainty")
        diagnostic, sensitivity = (_diagnostic(platform, progress, tick) if with_diagnostic
                                   else (ImpliedComputeScale(), {}))
        paper_calibration = None
        if calibration_mode == "paper":
            _progress(progress, "calibration 'paper': one compute factor per workload fitted on its "
                                "Fred-C figure; Fred-A, B, D predicted")
            paper_calibration = calibrate_paper(platform, overlap=overlap, progress=progress, tick=tick)
        calibration = None
        if with_diagnostic:   # reuses the anchor's sensitivity curve of the headline's policy
            workload, fabric = CALIBRATION_ANCHOR
            curve = sensitivity["overlap" if overlap else "serialised"]
            calibration = calibrate(platform, overlap=overlap, progress=progress,
                                    curve=(curve["scales"], curve[workload][fabric]))
            _tick(tick)
        known = dict(
            speedup=table, explanation=explain(table, runs), paper_speedup=PAPER_SPEEDUP,
            iterations={f"{w}/{f}": r for (w, f), r in runs.items()}, microbenchmarks=micro,
            overlap="overlap" if overlap else "serialised",
            implied_compute_scale=diagnostic, calibration=calibration,
            calibration_paper=paper_calibration, compute_sensitivity=sensitivity,
            platform=platform.to_dict(),
            switch_timing={level: platform.switch_at(level).to_dict() for level in ("l1", "l2")},
            compiler=ROUTER)
        _progress(progress, "in-switch efficiency: Fred-B/D at NVLink SHARP's measured efficiency "
                            "(in a background process, with the breakdown and sensitivity plots)")
        # the in-switch study and the plots that read nothing computed from here on, meanwhile
        early = _partial_result(**known)
        early_plots = [] if out is None else [(draw, path) for draw, path in evaluation_plots(out, early)
                                              if path.name in EARLY_PLOTS]
        in_switch_and_plots = ForkedCall(_in_switch_and_plots, platform, overlap, paper_calibration,
                                         early_plots, early, in_background=background).start()
        uncertainty = _uncertainty(platform, uncertainty_samples, paper_calibration, overlap, progress, tick)
        sweeps, sweep_log, sweep_steps = sweeping.result()
        print(sweep_log, end="", file=sys.stderr, flush=True)
        _tick(tick, sweep_steps)
        elapsed_s = time.perf_counter() - start
        if out is not None:   # the plot that reads the uncertainty, while the child may still draw
            with_uncertainty = _partial_result(**known, uncertainty=uncertainty)
            _draw([(draw, path) for draw, path in evaluation_plots(out, with_uncertainty)
                   if path.name == SPEEDUP_PLOT], with_uncertainty)
        result = EvaluationResult(
            **known, sweep={f"{w}/{f}": rows for (w, f), rows in sweeps.items()},
            sweep_summary=_sweep_summary(sweeps), elapsed_s=elapsed_s,
            in_switch_sensitivity=in_switch_and_plots.result(), uncertainty=uncertainty)
        if out is not None:
            write_evaluation(out, result, drawn=[out / name for name in (*EARLY_PLOTS, SWEEP_PLOT, SPEEDUP_PLOT)])
            _progress(progress, f"wrote {output}/ (report.md, speedup.csv, iterations.csv, microbenchmarks.csv, "
                                f"sweep_*.csv, in_switch_sensitivity.csv, results.json, speedup.png, breakdown.png, sweep.png, sensitivity.png)")
        return result
    except BaseException:
        sweeping.abandon()
        if in_switch_and_plots is not None:
            in_switch_and_plots.abandon()
        raise


#: The strategy sweeps :func:`run_evaluation` makes: (workload, fabric).
SWEPT = tuple((w, fabric) for w in ("transformer-17b", "transformer-1t") for fabric in ("mesh", "fred-d"))


def _swept(platform: Platform, overlap: bool, progress: bool, out: Path | None) -> tuple[dict, str, int]:
    """:data:`SWEPT`'s sweeps, ``{(workload, fabric): rows}``, with the progress lines they
    printed and the steps they ticked (reported by the caller); with ``out``, their plot drawn
    there (:data:`SWEEP_PLOT`)."""
    import contextlib
    import io
    log, steps = io.StringIO(), [0]

    def count(n: int = 1) -> None:
        steps[0] += n
    with contextlib.redirect_stderr(log):
        sweeps = {(w, fabric): sweep(w, fabric, platform, progress=progress, overlap=overlap, tick=count)
                  for w, fabric in SWEPT}
    if out is not None:
        _plot_sweeps(out / SWEEP_PLOT,
                     _partial_result(sweep={f"{w}/{f}": rows for (w, f), rows in sweeps.items()}))
    return sweeps, log.getvalue(), steps[0]


def _in_switch_and_plots(platform: Platform, overlap: bool, paper_calibration, plots: list,
                         result: EvaluationResult):
    """:func:`studies.in_switch_sensitivity.in_switch_sensitivity`'s study (returned), then
    ``plots`` drawn from ``result`` (:func:`_draw`)."""
    from studies.in_switch_sensitivity import in_switch_sensitivity
    study = in_switch_sensitivity(platform, overlap=overlap, calibration=paper_calibration)
    _draw(plots, result)
    return study


def _partial_result(**known) -> EvaluationResult:
    """An :class:`EvaluationResult` of the fields ``known``; every other one a
    :func:`studies.background_work.not_yet` that raises when read (what a plot drawn before the
    whole result is computed is given)."""
    from studies.background_work import not_yet
    return EvaluationResult(**{f.name: known[f.name] if f.name in known else not_yet(f.name)
                               for f in dataclasses.fields(EvaluationResult)})


def _draw(plots: list, result: EvaluationResult) -> None:
    for draw, path in plots:
        draw(path, result)


def _uncertainty(platform: Platform, samples: int | None, paper_calibration, overlap: bool,
                 progress: bool, tick) -> list:
    """The uncertainty blocks (:mod:`studies.uncertainty`): the documented platform's table and,
    with a paper calibration, the calibrated one."""
    if not samples:
        return []
    from studies.uncertainty import uncertainty_block
    blocks = [("documented", "the documented H100-like NPU (compute x1), link efficiency 1.0, "
                             "in-switch efficiency 1.0", {w: 1.0 for w in WORKLOADS})]
    if paper_calibration is not None:
        blocks.append(("calibrated", "each workload's compute x k_w fitted on its Fred-C figure "
                                     "(docs/sysmodel.md); the rest as documented",
                       {w: fit.compute_scale for w, fit in paper_calibration.fitted.items()}))
    out = []
    for name, assumes, scales in blocks:
        _progress(progress, f"uncertainty ({name}): {samples} Latin-hypercube points per overlap "
                            f"policy, and each input's range ends")
        out.append(uncertainty_block(platform, name, assumes, scales, samples=samples,
                                     overlap=overlap, tick=tick))
    return out


def _diagnostic(platform: Platform, progress: bool, tick) -> tuple[ImpliedComputeScale, dict]:
    """For both overlap policies, the sensitivity curves and the compute speed-up each of the
    paper's figures implies: (the implied scales with their spread, {policy: curves})."""
    policies = {"overlap": True, "serialised": False}
    scales, sensitivity = {}, {}
    for policy, flag in policies.items():
        _progress(progress, f"[4/4] sensitivity ({policy}): speedup vs NPU compute speed (x1 .. x10000)")
        sensitivity[policy] = compute_sensitivity(platform, overlap=flag, tick=tick)
        _progress(progress, f"  diagnostic ({policy}): compute speed-up that would reproduce the paper")
        for fabric, targets in PAPER_SPEEDUP.items():
            for w, target in targets.items():
                curve = (sensitivity[policy]["scales"], sensitivity[policy][w][fabric])
                scale = implied_compute_scale(w, fabric, target, platform, curve, overlap=flag)
                scales.setdefault(policy, {}).setdefault(fabric, {})[w] = scale
                shown = f"x{scale:.3g}" if scale else "no compute speed reaches the paper's figure"
                _progress(progress, f"  {w:16s} {fabric}: compute {shown}")
                _tick(tick)
    return (ImpliedComputeScale(overlap=scales["overlap"], serialised=scales["serialised"],
                                spread={policy: _spread(scales[policy]) for policy in policies}),
            sensitivity)


#: The one figure the calibration fits (ResNet-152 on Fred-C: pure DP, one all-reduce, no
#: in-switch reduction, so it depends on the compute speed and the all-reduce bandwidth only).
CALIBRATION_ANCHOR = ("resnet-152", "fred-c")


def calibrate(platform: Platform | None = None, *, overlap: bool = True, progress: bool = False,
              anchor=CALIBRATION_ANCHOR, curve: tuple | None = None) -> Calibration:
    """Fit ONE global compute speed-up on one paper figure and predict the other seven.

    The factor k (peak FLOPS and HBM bandwidth x k) is the one that makes the model's
    ``anchor`` speedup equal the paper's; the whole table is then recomputed at k and each
    figure compared with the paper. This tests whether the paper's platform differs from the
    documented one by a single compute constant; it never changes the headline table.
    ``curve``: the anchor's (scales, speedups) from :func:`compute_sensitivity`, when known."""
    platform = platform or default_platform()
    workload, fabric = anchor
    k = implied_compute_scale(workload, fabric, PAPER_SPEEDUP[fabric][workload], platform, curve,
                              overlap=overlap)
    if k is None:
        return Calibration(anchor=f"{workload}/{fabric}", scale=None, speedup=None, error=None,
                           within_10pct=[])
    fast = platform.with_compute_scale(k)
    _progress(progress, f"  calibration: compute x{k:.3g} fits {workload} on {fabric}; predicting the rest")
    table, _ = speedup_table(fast, overlap=overlap)
    error = {f: {w: table[f][w] / target - 1 for w, target in targets.items()}
             for f, targets in PAPER_SPEEDUP.items()}
    return Calibration(anchor=f"{workload}/{fabric}", scale=k, speedup=table, error=error,
                       within_10pct=sorted(f"{w}/{f}" for f, per in error.items()
                                           for w, e in per.items() if abs(e) <= 0.10))


def _spread(scales: dict) -> Spread:
    """How far the paper's eight figures are from implying one compute speed."""
    found = [k for per in scales.values() for k in per.values() if k is not None]
    unreachable = [f"{w}/{f}" for f, per in scales.items() for w, k in per.items() if k is None]
    return Spread(min=min(found, default=None), max=max(found, default=None),
                  ratio=max(found) / min(found) if found else None, unreachable=unreachable)


def explain(table: dict, runs: dict) -> dict:
    """Per workload, the :class:`Explanation`: the breakdown facts behind each speedup (and
    its gap to the paper)."""
    out = {}
    for w in WORKLOADS:
        mesh = runs[(w, "mesh")]
        comm = {f: sum(runs[(w, f)].breakdown[c] for c in ("mp", "pp", "io", "dp"))
                for f in ("mesh", *FRED_FABRICS)}
        fraction = mesh.breakdown["compute"] / mesh.time_s
        lines = [f"compute is {100 * fraction:.1f} % of the mesh "
                 f"iteration ({mesh.time_s:.4g} s); exposed communication mesh {comm['mesh']:.3g} s"]
        for f in ("fred-c", "fred-d"):
            paper = PAPER_SPEEDUP[f][w]
            lines.append(f"{f}: exposed communication {comm[f]:.3g} s, speedup {table[f][w]:.3f} vs paper "
                         f"{paper:.2f} ({100 * (table[f][w] / paper - 1):+.0f} %)")
        out[w] = Explanation(
            mesh_time_s=mesh.time_s, compute_fraction_of_mesh_iteration=fraction, exposed_comm_s=comm,
            bubble_s={f: runs[(w, f)].breakdown["bubble"] for f in ("mesh", *FRED_FABRICS)},
            text="; ".join(lines))
    return out


def _sweep_summary(sweeps) -> dict:
    out = {}
    for (w, fabric), rows in sweeps.items():
        feasible = [r for r in rows if r.feasible]
        best = feasible[0] if feasible else None
        compute_best = (min(feasible, key=lambda r: r.compute_s / r.time_s * r.time_per_sample_s)
                        if feasible else None)  # least compute time per sample
        out[f"{w}/{fabric}"] = SweepSummary(
            best=best.strategy if best else None,
            best_time_per_sample_s=best.time_per_sample_s if best else None,
            most_compute_efficient=compute_best.strategy if compute_best else None,
            mean_exposed_comm_per_sample_s=(
                sum(r.exposed_comm_s / r.time_s * r.time_per_sample_s for r in feasible)
                / len(feasible) if feasible else None),
            feasible=len(feasible), total=len(rows))
    for w in ("transformer-17b", "transformer-1t"):
        mesh, fred = sweeps.get((w, "mesh")), sweeps.get((w, "fred-d"))
        if not mesh or not fred:
            continue
        mt = {r.strategy: r for r in mesh if r.feasible}
        ft = {r.strategy: r for r in fred if r.feasible}
        common = sorted(set(mt) & set(ft))
        if common:
            ratio = (sum(mt[s].exposed_comm_s for s in common)
                     / max(sum(ft[s].exposed_comm_s for s in common), 1e-30))  # same samples
            speed = sum(mt[s].time_s / ft[s].time_s for s in common) / len(common)
            out[f"{w}/fred-d vs mesh"] = SweepComparison(exposed_comm_reduction=ratio, mean_speedup=speed,
                                                         strategies=len(common))
    return out


#: The plots that read nothing computed after the calibration (neither the sweeps nor the
#: uncertainty blocks), by file name: :func:`run_evaluation` draws them beside the uncertainty
#: blocks; the sweeps' plot (:data:`SWEEP_PLOT`) is drawn with the sweeps.
EARLY_PLOTS = ("breakdown.png", "sensitivity.png")
SWEEP_PLOT = "sweep.png"
SPEEDUP_PLOT = "speedup.png"   # reads the uncertainty blocks


def evaluation_plots(out: Path, result: EvaluationResult) -> list:
    """The folder's plots in drawing order, ``[(draw, path)]`` with ``draw(path, result)``; the
    sensitivity plot only where the diagnostic ran."""
    plots = [(_plot_speedup, SPEEDUP_PLOT), (_plot_breakdown, "breakdown.png"),
             (_plot_sensitivity, "sensitivity.png"), (_plot_sweeps, SWEEP_PLOT)]
    return [(draw, out / name) for draw, name in plots
            if draw is not _plot_sensitivity or result.compute_sensitivity]


def write_evaluation(out: Path, result: EvaluationResult, *, drawn=()) -> None:
    """``results.json`` (the whole result), the CSV tables and the PNG plots into ``out``; the
    plots at the paths ``drawn`` are left out (drawn already, :func:`run_evaluation`)."""
    from studies.eval_report import SPEEDUP_CSV_FIELDS, rounded, speedup_rows, write_report
    six = {f.name: _six_figures for f in dataclasses.fields(Microbenchmark)}
    write_json(out / "results.json", result)
    write_csv(out / "speedup.csv", speedup_rows(result), SPEEDUP_CSV_FIELDS)
    write_csv(out / "iterations.csv",
              [(*key.split("/"), r.strategy, r.microbatches, f"{r.time_s:.6g}",
                *[f"{r.breakdown[c]:.6g}" for c in CATEGORIES], f"{r.memory.total / 1e9:.2f}",
                "; ".join(r.notes)) for key, r in result.iterations.items()],
              ["workload", "fabric", "strategy", "microbatches", "time_s",
               *[f"{c}_s" for c in CATEGORIES], "memory_gb", "notes"])
    write_csv(out / "microbenchmarks.csv", result.microbenchmarks, formats=six)
    if result.in_switch_sensitivity is not None:
        write_csv(out / "in_switch_sensitivity.csv", result.in_switch_sensitivity.rows,
                  formats={f.name: lambda x: rounded(x, 4)
                           for f in dataclasses.fields(result.in_switch_sensitivity.rows[0])})
    for key, rows in result.sweep.items():
        write_csv(out / f"sweep_{key.replace('/', '_')}.csv", rows, SWEEP_CSV_FIELDS,
                  formats={f: _six_figures for f in SWEEP_CSV_FIELDS})
    _draw([(draw, path) for draw, path in evaluation_plots(out, result) if path not in set(drawn)], result)
    write_report(out / "report.md", result)


def _six_figures(x):
    """A CSV cell: a float to six significant figures (the model's values carry no more)."""
    return f"{x:.6g}" if isinstance(x, float) else x


def _plot_speedup(path: Path, result: EvaluationResult) -> None:
    import numpy as np
    fig, ax = figure(figsize=(9, 4.5))
    x = np.arange(len(WORKLOADS))
    width = 0.13
    documented = next((b for b in result.uncertainty if b.name == "documented"), None)
    for i, fabric in enumerate(FRED_FABRICS):
        vals = [result.speedup[fabric][w] for w in WORKLOADS]
        # the interval over the uncertain inputs (studies/uncertainty.py), when the run made it
        err = None if documented is None else np.array(
            [[v - documented.intervals[fabric][w].low for v, w in zip(vals, WORKLOADS)],
             [documented.intervals[fabric][w].high - v for v, w in zip(vals, WORKLOADS)]])
        ax.bar(x + (i - 2) * width, vals, width, yerr=err, capsize=2, label=f"{fabric} (model)")
    for i, fabric in enumerate(("fred-c", "fred-d")):
        vals = [PAPER_SPEEDUP[fabric][w] for w in WORKLOADS]
        ax.bar(x + (i + 2) * width, vals, width, label=f"{fabric} (paper)", hatch="//", alpha=0.5)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, WORKLOADS)
    ax.set_ylabel("speedup over 2D mesh")
    ax.set_title("End-to-end training-iteration speedup (model, documented platform, vs paper)"
                 + ("\nerror bars: smallest-largest over the uncertain inputs (results/report.md)"
                    if documented is not None else ""), fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    save_png(fig, path, dpi=120)


def _plot_breakdown(path: Path, result: EvaluationResult) -> None:
    import numpy as np
    fig, axes = figure(1, len(WORKLOADS), figsize=(14, 4))
    for ax, wl in zip(axes, WORKLOADS):
        fabrics = ("mesh", *FRED_FABRICS)
        bottom = np.zeros(len(fabrics))
        for cat in CATEGORIES:
            vals = np.array([result.iteration(wl, f).breakdown[cat] for f in fabrics])
            ax.bar(fabrics, vals, bottom=bottom, label=cat)
            bottom += vals
        ax.set_title(wl)
        ax.set_ylabel("seconds per iteration")
        ax.tick_params(axis="x", rotation=45)
    fig.suptitle("Training iteration time by category, mesh and Fred-A..D (documented platform)")
    handles, labels = axes[0].get_legend_handles_labels()
    # one legend for all panels, outside the bars (inside it covered the thin communication bars)
    fig.legend(handles, labels, loc="center right", fontsize=7, title="category")
    fig.tight_layout(rect=(0, 0, 0.88, 0.94))
    save_png(fig, path, dpi=120, tight=False)


def _plot_sensitivity(path: Path, result: EvaluationResult) -> None:
    sens = result.compute_sensitivity
    cal = result.calibration
    fig, axes = figure(1, len(WORKLOADS), figsize=(14, 3.8), sharey=True)
    for ax, wl in zip(axes, WORKLOADS):
        for policy, line in (("overlap", "-"), ("serialised", "-.")):
            for fabric, colour in zip(PAPER_SPEEDUP, ("tab:blue", "tab:orange")):
                ax.plot(sens[policy]["scales"], sens[policy][wl][fabric], line, color=colour,
                        marker="o", ms=3, label=f"{fabric} {policy}")
        for fabric, style in (("fred-c", ":"), ("fred-d", "--")):
            ax.axhline(PAPER_SPEEDUP[fabric][wl], ls=style, color="gray", lw=0.8,
                       label=f"paper {fabric}")
        # each panel its own workload's fitted factor (--calibration paper), else the global fit
        # only on the panel of the workload it was fitted on
        fit = result.calibration_paper.fitted.get(wl) if result.calibration_paper else None
        if fit is not None:
            ax.axvline(fit.compute_scale, color="k", lw=0.6,
                       label=f"fitted on {fit.anchor}: x{fit.compute_scale:.3g}")
        elif cal is not None and cal.scale and cal.anchor.split("/")[0] == wl:
            ax.axvline(cal.scale, color="k", lw=0.6, label=f"fitted on {cal.anchor}: x{cal.scale:.3g}")
        ax.set_xscale("log")
        ax.set_title(wl)
        ax.legend(fontsize=6)
        ax.set_xlabel("NPU compute speed (x H100 at 50 %)")
    axes[0].set_ylabel("speedup over the mesh")
    fig.suptitle("Speedup over the mesh against NPU compute speed (documented platform)")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    save_png(fig, path, dpi=120, tight=False)


def _plot_sweeps(path: Path, result: EvaluationResult) -> None:
    import numpy as np
    fig, axes = figure(1, 2, figsize=(14, 4.5))
    for ax, wl in zip(axes, ("transformer-17b", "transformer-1t")):
        mesh = {r.strategy: r for r in result.sweep_rows(wl, "mesh")}
        fred = {r.strategy: r for r in result.sweep_rows(wl, "fred-d")}
        names = [r.strategy for r in result.sweep_rows(wl, "fred-d") if r.feasible]
        x = np.arange(len(names))
        ax.bar(x - 0.2, [mesh[n].time_per_sample_s * 1e3 if mesh[n].feasible else 0
                         for n in names], 0.4, label="mesh")
        ax.bar(x + 0.2, [fred[n].time_per_sample_s * 1e3 for n in names], 0.4, label="fred-d")
        ax.set_xticks(x, names, rotation=70, fontsize=7)
        ax.set_ylabel("ms per sample (ranked on fred-d)")
        ax.set_title(f"strategy sweep: {wl} (40 samples per DP replica)")
        ax.legend()
    save_png(fig, path, dpi=120)
