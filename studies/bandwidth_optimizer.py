"""Per-dimension bandwidth optimizer of a cluster (docs/bandwidth_optimizer.md).

Question (Won et al., LIBRA: "Exploring Multi-dimensional Hierarchical Network Topologies for
Efficient Distributed Training of Trillion Parameter DL Models", arXiv 2109.11762): how to
split a budget of network bandwidth (or cost) per NPU across the dimensions of a cluster to
minimise the iteration time of a workload (or a weighted set) or maximise performance per cost.

Variables: the bandwidth per NPU per direction ``B_i`` of every free dimension (not a wafer:
a ``fred``/``mesh`` dimension's bandwidth is its wafer's; an optical ring's is its bandwidth per
wavelength). Budget: ``sum_i B_i <= budget`` (``unit="gbps"``) or ``sum_i c_i B_i <= budget``
(``unit="cost"``, ``c_i`` the dimension kind's cost per GBps per NPU from ``configs/cost.toml``,
``[network]``, times the wavelengths of an optical ring). Objectives: ``time`` = sum_k w_k T_k(B) / T_k(B_file) (each workload's iteration
time relative to the cluster file's own bandwidths, so workloads of very different length
weigh as asked); ``perf-per-cost`` = maximise 1 / (time x cost per NPU), cost per NPU =
``npu_cost`` + sum_i c_i B_i.

How the event-driven model is used: every objective evaluation runs the project's cluster
model with the candidate bandwidths -- the wafer's iteration once per workload (it does not
depend on the outer bandwidths), then the cross-wafer gradient all-reduce chunked and
scheduled by :func:`sysmodel.multidim_collectives.run_collective` (the same composition as
:func:`sysmodel.cluster_training.simulate_cluster_iteration`; a test pins the equality).

Search: (1) closed-form starts: the hierarchical all-reduce sends ``L_i`` bytes per NPU into
dimension ``i`` (per unit of bandwidth it costs ``L_i / B_i`` seconds); if its stages were
serial, ``T = sum_i L_i / B_i`` and Lagrange gives ``B_i ~ sqrt(L_i / c_i)``; if chunks
pipeline perfectly, ``T = max_i L_i / B_i`` and ``B_i ~ L_i``. (2) A grid over the budget
shares (step ``1/grid``). (3) ``scipy.optimize.minimize`` (Nelder-Mead, bounded) from the best
of those. The optimum reported is the best point evaluated, so it is never worse than the
grid's best (the grid's best is printed beside it). Sensitivity: the objective's relative
change for +1 % and -1 % of each dimension's bandwidth alone, and of the budget (same shares).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hdl.contracts.errors import FredError
from sysmodel.cluster_training import simulate_cluster_iteration
from sysmodel.dimension_timing import stage_bytes_sent
from sysmodel.dimensions import WAFER_KINDS, Cluster, with_bandwidth
from sysmodel.multidim_collectives import DEFAULT_CHUNKS, chunk_stages, run_collective

__all__ = ["OBJECTIVES", "BUDGET_UNITS", "NetworkCost", "Optimum", "free_dimensions",
           "dimension_loads", "closed_form_split", "workload_time_function",
           "collective_time_function", "optimize_bandwidth"]

OBJECTIVES = ("time", "perf-per-cost")
BUDGET_UNITS = ("gbps", "cost")


@dataclass(frozen=True)
class NetworkCost:
    """Cost per NPU: ``npu_cost`` plus, per free dimension, ``per_gbps[kind]`` x its GBps."""

    npu_cost: float
    per_gbps: dict
    source: str = ""

    def of(self, cluster: Cluster, bandwidths: dict) -> float:
        return self.npu_cost + sum(self.per_gbps_of(cluster.dimension(n)) * b for n, b in bandwidths.items())

    def per_gbps_of(self, dim) -> float:
        """Cost per GBps of ``dim``'s bandwidth per NPU (an optical ring: one transceiver of
        that rate per wavelength per node)."""
        return self.coefficient(dim.kind) * (dim.optical.wavelengths if dim.optical else 1)

    def coefficient(self, kind: str) -> float:
        if kind not in self.per_gbps:
            raise FredError(f"the cost model {self.source or ''} has no per-GBps cost for {kind} dimensions "
                            f"([network.gbps_cost] lists {', '.join(sorted(self.per_gbps))})")
        return self.per_gbps[kind]


def free_dimensions(cluster: Cluster) -> tuple[str, ...]:
    """Names of the dimensions whose bandwidth is a variable: not wafers, more than one member."""
    names = tuple(d.name for d in cluster.dimensions if d.kind not in WAFER_KINDS and d.size > 1)
    if not names:
        raise FredError(f"cluster {cluster.name!r} has no dimension whose bandwidth can be chosen "
                        f"(wafer dimensions take theirs from the wafer platform)")
    return names


def with_bandwidths(cluster: Cluster, bandwidths: dict) -> Cluster:
    """``cluster`` with the named dimensions' bandwidths replaced."""
    dims = tuple(with_bandwidth(d, bandwidths[d.name]) if d.name in bandwidths else d for d in cluster.dimensions)
    return replace(cluster, dimensions=dims)


def dimension_loads(cluster: Cluster, names, size: float = 1.0) -> dict:
    """Bytes one NPU sends into each named dimension in an all-reduce of ``size`` bytes over
    them in the file's order (one chunk): the ``L_i`` of the closed forms."""
    order = tuple(d for d in cluster.dimensions if d.name in names)
    loads = {n: 0.0 for n in names}
    for dim, op, nbytes in chunk_stages("all-reduce", order, size):
        loads[dim.name] += stage_bytes_sent(dim, op, nbytes)
    return loads


def closed_form_split(loads: dict, coefficients: dict, budget: float, rule: str) -> dict:
    """The budget split ``B_i ~ sqrt(L_i / c_i)`` (``rule="serial"``) or ``B_i ~ L_i``
    (``"pipelined"``), scaled so ``sum c_i B_i = budget``."""
    weight = {n: math.sqrt(l / coefficients[n]) if rule == "serial" else l for n, l in loads.items()}
    spend = sum(coefficients[n] * w for n, w in weight.items())
    return {n: budget * w / spend for n, w in weight.items()}


def collective_time_function(cluster: Cluster, size: float, *, schedule: str = "fixed", chunks: int = 1):
    """``f(bandwidths) -> seconds`` of an all-reduce of ``size`` bytes per NPU over the free
    dimensions."""
    names = free_dimensions(cluster)

    def time(bandwidths: dict) -> float:
        return run_collective(with_bandwidths(cluster, bandwidths), "all-reduce", size,
                              dimensions=list(names), schedule=schedule, chunks=chunks).time_s
    return time


def workload_time_function(cluster: Cluster, workloads, *, schedule: str = "themis",
                           chunks: int = DEFAULT_CHUNKS):
    """``f(bandwidths) -> sum_k w_k T_k / T_k(file)`` for ``workloads`` = [(Workload, weight)]
    and the per-workload iteration times ``f.times(bandwidths)`` (module docstring)."""
    names = free_dimensions(cluster)
    outer = [d.name for d in cluster.dimensions[1:]]
    bases = []
    for workload, weight in workloads:
        r = simulate_cluster_iteration(cluster, workload, schedule=schedule, chunks=chunks)
        bases.append((workload.name, weight, r.wafer.time_s, r.gradient_bytes_per_npu, r.time_s))

    def times(bandwidths: dict) -> dict:
        c = with_bandwidths(cluster, bandwidths)
        out = {}
        for name, _, wafer_s, share, _ in bases:
            cross = run_collective(c, "all-reduce", share, dimensions=outer, schedule=schedule,
                                   chunks=chunks).time_s if outer else 0.0
            out[name] = wafer_s + cross
        return out

    def objective(bandwidths: dict) -> float:
        t = times(bandwidths)
        return sum(w * t[name] / t_file for name, w, _, _, t_file in bases)
    objective.times = times
    objective.names = names
    return objective


@dataclass(frozen=True)
class Optimum:
    """The optimizer's answer: ``bandwidths`` (GBps per NPU per free dimension), the
    ``objective`` value (lower is better: relative time, or time x cost for perf-per-cost),
    the time part and cost, the grid's best beside it, the closed-form starts, the sensitivity,
    the evaluations made."""

    objective_name: str
    budget: float
    budget_unit: str
    bandwidths: dict
    objective: float
    time: float
    cost: float
    grid_best: dict
    closed_form: dict
    sensitivity: dict
    evaluations: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _plain(bandwidths: dict) -> dict:
    return {n: float(b) for n, b in bandwidths.items()}


class _Problem:
    """The budget, cost coefficients and objective as a function of budget shares."""

    def __init__(self, cluster, time_fn, names, budget, unit, objective, cost: NetworkCost):
        self.cluster, self.time_fn, self.names = cluster, time_fn, names
        self.budget, self.unit, self.objective = budget, unit, objective
        self.cost = cost
        self.coefficients = {n: (cost.per_gbps_of(cluster.dimension(n)) if unit == "cost" else 1.0)
                             for n in names}
        self.seen: dict = {}

    def bandwidths(self, shares, level: float = 1.0) -> dict:
        """Shares of the budget (summing to 1) spent at ``level`` of it, as GBps per dimension."""
        return {n: max(level * s * self.budget / self.coefficients[n], 1e-9) for n, s in zip(self.names, shares)}

    def evaluate(self, bandwidths: dict) -> tuple[float, float, float]:
        key = tuple(round(bandwidths[n], 9) for n in self.names)
        if key not in self.seen:
            t = self.time_fn(bandwidths)
            c = self.cost.of(self.cluster, bandwidths) if self.cost.per_gbps else 0.0
            self.seen[key] = (t * c if self.objective == "perf-per-cost" else t, t, c)
        return self.seen[key]

    def best(self) -> tuple:
        key = min(self.seen, key=lambda k: self.seen[k][0])
        return _plain(dict(zip(self.names, key))), self.seen[key]


def _simplex_grid(k: int, steps: int):
    """Every share vector of ``k`` parts in multiples of 1/steps, each part > 0."""
    if k == 1:
        yield (1.0,)
        return
    for first in range(1, steps - k + 2):
        for rest in _simplex_grid(k - 1, steps - first):
            yield (first / steps,) + tuple(r * (steps - first) / steps for r in rest)


def _shares_from(x) -> list[float]:
    """Stick-breaking: ``k-1`` numbers in (0, 1) -> ``k`` shares summing to 1."""
    shares, left = [], 1.0
    for v in x:
        shares.append(left * v)
        left -= left * v
    return shares + [left]


def _to_sticks(shares) -> list[float]:
    x, left = [], 1.0
    for s in shares[:-1]:
        x.append(min(max(s / left, 1e-6), 1 - 1e-6) if left > 0 else 0.5)
        left -= s
    return x


def optimize_bandwidth(cluster: Cluster, time_fn, *, budget: float, unit: str = "gbps",
                       objective: str = "time", cost: NetworkCost | None = None, grid: int = 20,
                       closed_form_start: bool = True, max_evaluations: int = 400) -> Optimum:
    """The bandwidth split of ``cluster``'s free dimensions minimising ``time_fn`` (or time x
    cost) under ``budget`` (module docstring)."""
    from scipy.optimize import minimize
    if objective not in OBJECTIVES:
        raise FredError(f"objective {objective!r} is not one of {', '.join(OBJECTIVES)}")
    if unit not in BUDGET_UNITS:
        raise FredError(f"budget unit {unit!r} is not one of {', '.join(BUDGET_UNITS)}")
    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget > 0):
        raise FredError(f"the budget must be a number > 0, got {budget!r}")
    if (unit == "cost" or objective == "perf-per-cost") and cost is None:
        raise FredError("a cost budget or the perf-per-cost objective needs a cost model ([network] of cost.toml)")
    names = free_dimensions(cluster)
    problem = _Problem(cluster, time_fn, names, budget, unit, objective,
                       cost or NetworkCost(0.0, {}, "none"))
    free_level = objective == "perf-per-cost"     # spending less than the budget may pay
    loads = dimension_loads(cluster, names)
    closed = {rule: closed_form_split(loads, problem.coefficients, budget, rule) for rule in ("serial", "pipelined")}
    if closed_form_start:
        for split in closed.values():
            problem.evaluate(split)
    # perf-per-cost may spend less than the budget: the grid also tries 1/64 .. 1/2 of it
    levels = tuple(2.0 ** -k for k in range(6, -1, -1)) if free_level else (1.0,)
    grid_points = [problem.bandwidths(shares, level) for shares in _simplex_grid(len(names), grid) for level in levels]
    grid_best = min(grid_points, key=lambda b: problem.evaluate(b)[0])
    grid_value = problem.evaluate(grid_best)
    start_bw, _ = problem.best()          # the best of the grid and the closed forms
    spend = sum(problem.coefficients[n] * b for n, b in start_bw.items())
    x0 = _to_sticks([problem.coefficients[n] * start_bw[n] / spend for n in names])
    if free_level:
        x0.append(min(max(spend / budget, 1e-3), 1.0))

    def f(x):
        level = x[-1] if free_level else 1.0
        return problem.evaluate(problem.bandwidths(_shares_from(x[:-1] if free_level else x), level))[0]
    if x0:
        minimize(f, x0, method="Nelder-Mead", bounds=[(1e-4, 1.0)] * len(x0),
                 options={"maxfev": max_evaluations, "xatol": 1e-5, "fatol": 1e-9})
    best, (value, t, c) = problem.best()
    return Optimum(objective, float(budget), unit, best, float(value), float(t), float(c),
                   {"bandwidths": _plain(grid_best), "objective": float(grid_value[0]), "step": 1 / grid},
                   closed, _sensitivity(problem, best, value), len(problem.seen))


def _sensitivity(problem: _Problem, best: dict, value: float) -> dict:
    """Relative change of the objective for +1 % and -1 % of each dimension's bandwidth alone,
    and of everything (``budget``: the budget's shadow price), as ``{name: (up, down)}``. The
    model is piecewise (chunk schedules, maxima), so the two sides can differ."""
    out = {}
    for n in list(problem.names) + ["budget"]:
        sides = []
        for factor in (1.01, 0.99):
            moved = {k: b * factor if n in (k, "budget") else b for k, b in best.items()}
            sides.append(float(problem.evaluate(moved)[0] / value - 1.0) if value else 0.0)
        out[n] = tuple(sides)
    return out
