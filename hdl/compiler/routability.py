"""How often flow sets route in one phase: port partitions, 3D-parallel placements, explanations.

* :func:`set_partitions` enumerates every partition of the ports (all-reduce groups: one
  flow G > G per block); :func:`random_partition` draws one **uniformly** among all set
  partitions (Stam's algorithm: draw K with P(K = k) proportional to k^P / k!, throw each
  port into one of K urns uniformly, drop empty urns); :func:`random_flow_set` draws a
  general flow set with unequal inputs and outputs.
* :func:`partition_stats` routes many partitions and reports the one-phase fraction and the
  mean number of phases.
* :func:`placements` lists the paper's 3D-parallel placements of P ports (MP groups on
  consecutive ports, then PP, then DP: port = mp + MP * (pp + PP * dp)) for every
  factorisation P = MP x DP x PP, and the traffic each phase carries (MP all-reduce, DP
  all-reduce, PP stage-to-stage unicast, PP multicast from each stage's first MP rank
  to the next stage's MP group). :func:`placement_report` routes each.
* :func:`explain` says why a flow set is not routable in one phase: a minimal set of flows
  that cannot share a phase and where they collide.
"""

from __future__ import annotations

import math
import random
from typing import Iterator

from hdl.contracts.encoding import check_any_size as check_size
from hdl.compiler.flows import Flow, validate_flows
from hdl.compiler.router import DEFAULT_BUDGET, Router
from hdl.contracts.errors import FredError
from hdl.contracts.placement import Strategy, factorisations

__all__ = ["set_partitions", "bell_number", "random_partition", "random_flow_set",
           "partition_flows", "partition_stats", "placement_traffic",
           "placement_report", "explain", "EXHAUSTIVE_LIMIT"]

#: Largest number of partitions ``--exhaustive`` will enumerate.
EXHAUSTIVE_LIMIT = 200_000


def bell_number(n: int) -> int:
    row = [1]
    for _ in range(n):
        nxt = [row[-1]]
        for value in row:
            nxt.append(nxt[-1] + value)
        row = nxt
    return row[0]


def set_partitions(items) -> Iterator[list[list[int]]]:
    """Every partition of ``items`` into non-empty blocks (Bell(n) of them)."""
    items = list(items)
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partial in set_partitions(rest):
        yield [[first]] + partial
        for i in range(len(partial)):
            yield partial[:i] + [[first] + partial[i]] + partial[i + 1:]


def random_partition(ports: int, rng: random.Random) -> list[list[int]]:
    """A uniformly random set partition of ``range(ports)`` (Stam's urn algorithm)."""
    n = ports
    # Dobinski: P(K = k) = k^n / (e * Bell(n) * k!). Truncate where the tail is negligible.
    top = max(8, 4 * n)
    logw = [n * math.log(k) - math.lgamma(k + 1) for k in range(1, top + 1)]
    peak = max(logw)
    weights = [math.exp(w - peak) for w in logw]
    urns = rng.choices(range(1, top + 1), weights=weights)[0]
    blocks: dict[int, list[int]] = {}
    for port in range(n):
        blocks.setdefault(rng.randrange(urns), []).append(port)
    return sorted(blocks.values())


def partition_flows(partition) -> list[Flow]:
    """All-reduce flows (G > G) of a partition."""
    return [Flow(block, block) for block in partition]


def random_flow_set(ports: int, rng: random.Random, *, flows: int | None = None,
                    idle: float = 0.2) -> list[Flow]:
    """A random general flow set: each port's input (and, independently, its output) joins
    one of ``flows`` flows or, with probability ``idle``, none; flows left without an input
    or an output are dropped. Inputs and outputs of a flow generally differ in number."""
    k = flows if flows is not None else rng.randint(1, max(1, ports // 2))
    inputs = [[] for _ in range(k)]
    outputs = [[] for _ in range(k)]
    for port in range(ports):
        if rng.random() >= idle:
            inputs[rng.randrange(k)].append(port)
        if rng.random() >= idle:
            outputs[rng.randrange(k)].append(port)
    result = [Flow(i, o) for i, o in zip(inputs, outputs) if i and o]
    return result or [Flow((0,), (0,))]


def partition_stats(*, ports: int, middle: int, exhaustive: bool = False, samples: int = 0,
                    seed: int = 0, budget: int = DEFAULT_BUDGET, backtrack: bool = True) -> dict:
    """Route partitions of the ports (all-reduce groups); one-phase fraction, mean phases.

    ``exhaustive`` enumerates all Bell(P) partitions (refused above EXHAUSTIVE_LIMIT);
    otherwise ``samples`` uniform random partitions from ``seed``. ``backtrack=False``
    measures the router without backtracking (first valid colouring per level).
    """
    check_size(ports, middle)
    if exhaustive:
        total = bell_number(ports)
        if total > EXHAUSTIVE_LIMIT:
            raise FredError(f"--exhaustive over {ports} ports means {total:,} partitions (limit "
                            f"{EXHAUSTIVE_LIMIT:,}); use --samples N --seed S")
        source = set_partitions(range(ports))
        mode = "exhaustive"
    else:
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise FredError(f"samples must be a positive integer, got {samples!r}")
        rng = random.Random(seed)
        source = (random_partition(ports, rng) for _ in range(samples))
        mode = "random"
    router = Router(ports=ports, middle=middle, budget=budget, seed=seed, backtrack=backtrack)
    total = one = phases = bound = 0
    histogram: dict[int, int] = {}
    for partition in source:
        result = router.route(partition_flows(partition))
        total += 1
        one += result.routable_in_one_phase
        bound += result.one_phase == "search-bound"
        phases += len(result.phases)
        histogram[len(result.phases)] = histogram.get(len(result.phases), 0) + 1
    return {"ports": ports, "middle": middle, "mode": mode, "seed": None if exhaustive else seed,
            "backtrack": backtrack,
            "total": total, "one_phase_count": one, "one_phase_fraction": one / total,
            "mean_phases": phases / total, "search_bound_count": bound,
            "phase_histogram": {str(k): v for k, v in sorted(histogram.items())}}


def placement_traffic(strategy: Strategy) -> dict[str, list[Flow]]:
    """Flow set of each communication phase of a 3D-parallel placement on switch ports
    (:meth:`hdl.contracts.placement.Strategy.rank`; empty kinds omitted): MP and DP all-reduces of
    every group, PP stage-to-stage sends, and the PP multicast to the next stage's MP group."""
    kinds: dict[str, list[Flow]] = {}
    if strategy.mp > 1:
        kinds["mp-allreduce"] = [Flow(g, g) for g in strategy.groups("mp")]
    if strategy.dp > 1:
        kinds["dp-allreduce"] = [Flow(g, g) for g in strategy.groups("dp")]
    if strategy.pp > 1:
        port = strategy.rank
        kinds["pp-send"] = [Flow((port(mp=mp, dp=dp, pp=pp),), (port(mp=mp, dp=dp, pp=pp + 1),))
                            for dp in range(strategy.dp) for pp in range(strategy.pp - 1)
                            for mp in range(strategy.mp)]
        if strategy.mp > 1:
            kinds["pp-multicast"] = [
                Flow((port(mp=0, dp=dp, pp=pp),), [port(mp=i, dp=dp, pp=pp + 1) for i in range(strategy.mp)])
                for dp in range(strategy.dp) for pp in range(strategy.pp - 1)]
    return kinds


def explain(flows, *, ports: int, middle: int, router: Router | None = None) -> dict:
    """Why ``flows`` do not fit one phase: a minimal subset that cannot (deletion-minimal:
    dropping any one of its flows makes it routable) and the microswitches its flows share
    at the top level. Returns ``{"routable": True}`` if they do fit."""
    flows = validate_flows(flows, ports)
    router = router or Router(ports=ports, middle=middle)
    config, status = router.try_one_phase(flows)
    if config is not None:
        return {"routable": True}
    core = list(flows)
    for flow in list(flows):
        trial = [f for f in core if f != flow]
        if trial and router.try_one_phase(trial)[0] is None:
            core = trial
    shares = []
    for i, a in enumerate(core):
        for b in core[i + 1:]:
            where = []
            for kind, attr in (("input", "inputs"), ("output", "outputs")):
                ua = {p // 2 for p in getattr(a, attr)}
                ub = {p // 2 for p in getattr(b, attr)}
                where += [f"{kind} microswitch {u} (ports {2 * u},{2 * u + 1})"
                          for u in sorted(ua & ub)]
            if where:
                shares.append(f"{a} and {b} share {', '.join(where)}")
    reason = _why(core, ports, middle, path="")
    return {"routable": False, "status": status, "core": [str(f) for f in core],
            "reason": reason, "conflicts": shares}


def _conflict_edges(flows) -> set[tuple[int, int]]:
    return {(i, j) for i, a in enumerate(flows) for j, b in enumerate(flows) if i < j
            and ({p // 2 for p in a.inputs} & {p // 2 for p in b.inputs}
                 or {p // 2 for p in a.outputs} & {p // 2 for p in b.outputs})}


def _why(core: list[Flow], ports: int, middle: int, path: str) -> str:
    """Where a (deletion-minimal) unroutable flow set fails, following forced colourings."""
    where = f"in {path} (a Fred_{middle}({ports}))" if path else f"at the top of Fred_{middle}({ports})"
    edges = _conflict_edges(core)
    if not _colourable(len(core), edges, middle):
        cycle = " (an odd cycle)" if middle == 2 else ""
        return (f"{where} the conflict graph of flows {'; '.join(map(str, core))} (edges: shared "
                f"input or output microswitches) needs more than {middle} colours{cycle}")
    colouring = _forced_two_colouring(len(core), edges) if middle == 2 else None
    if colouring is None or ports <= 4:
        count = _count_colourings(len(core), edges, middle, limit=10_000)
        tried = f"all {count}" if count < 10_000 else "every one of the >= 10,000"
        return (f"{where} {tried} valid {middle}-colourings of flows {'; '.join(map(str, core))} "
                "(up to renaming subnetworks) put flows together in a middle subnetwork where "
                "their projected ports conflict again and cannot be routed")
    sub_ports = (ports + 1) // 2
    sub_router = Router(ports=sub_ports, middle=middle)
    for k in range(middle):
        projected = [Flow({p // 2 for p in f.inputs}, {p // 2 for p in f.outputs})
                     for f, c in zip(core, colouring) if c == k]
        if projected and sub_router.try_one_phase(projected)[0] is None:
            sub_core = list(projected)
            for flow in list(projected):
                trial = [f for f in sub_core if f != flow]
                if trial and sub_router.try_one_phase(trial)[0] is None:
                    sub_core = trial
            forced = (f"{where} the 2-colouring is forced (the conflict graph is connected); "
                      f"middle subnetwork {k} receives the projected flows, and ")
            return forced + _why(sub_core, sub_ports, middle, f"{path + '.' if path else ''}mid[{k}]")
    return f"{where} no colouring routes all subnetworks"  # pragma: no cover - core is unroutable


def _count_colourings(n: int, edges, m: int, limit: int) -> int:
    """Proper m-colourings up to renaming colours (a new colour opens only after the last)."""
    adj = [set() for _ in range(n)]
    for i, j in edges:
        adj[i].add(j)
        adj[j].add(i)
    colour = [-1] * n
    count = 0

    def go(i, used):
        nonlocal count
        if count >= limit:
            return
        if i == n:
            count += 1
            return
        for c in range(min(m, used + 1)):
            if all(colour[j] != c for j in adj[i] if j < i):
                colour[i] = c
                go(i + 1, max(used, c + 1))
        colour[i] = -1

    go(0, 0)
    return count


def _forced_two_colouring(n: int, edges) -> list[int] | None:
    """The 2-colouring of a connected bipartite graph (unique up to swapping), else None."""
    adj = [[] for _ in range(n)]
    for i, j in edges:
        adj[i].append(j)
        adj[j].append(i)
    colour = [-1] * n
    colour[0] = 0
    stack = [0]
    while stack:
        node = stack.pop()
        for nb in adj[node]:
            if colour[nb] < 0:
                colour[nb] = 1 - colour[node]
                stack.append(nb)
    return colour if all(c >= 0 for c in colour) else None


def _colourable(n: int, edges, m: int) -> bool:
    adj = [set() for _ in range(n)]
    for i, j in edges:
        adj[i].add(j)
        adj[j].add(i)
    colour = [-1] * n

    def go(i):
        if i == n:
            return True
        for c in range(m):
            if all(colour[j] != c for j in adj[i]):
                colour[i] = c
                if go(i + 1):
                    return True
        colour[i] = -1
        return False

    return go(0)


def placement_report(*, ports: int, middle: int, npus: int | None = None,
                     budget: int = DEFAULT_BUDGET) -> list[dict]:
    """Route every traffic phase of every 3D-parallel placement of ``npus`` NPUs (default:
    one per port) on ports 0..npus-1 of Fred_m(ports)."""
    check_size(ports, middle)
    npus = ports if npus is None else npus
    if isinstance(npus, bool) or not isinstance(npus, int) or not 1 <= npus <= ports:
        raise FredError(f"npus must be an integer in 1..{ports} (the switch ports), got {npus!r}")
    router = Router(ports=ports, middle=middle, budget=budget)
    report = []
    for placement in factorisations(npus):
        entry = {"placement": placement.paper_name, "mp": placement.mp, "dp": placement.dp,
                 "pp": placement.pp, "phases": {}}
        for kind, flows in placement_traffic(placement).items():
            result = router.route(flows)
            item = {"flows": len(flows), "one_phase": result.one_phase,
                    "phase_count": len(result.phases)}
            if not result.routable_in_one_phase:
                item["why"] = explain(flows, ports=ports, middle=middle, router=router)
            entry["phases"][kind] = item
        entry["all_one_phase"] = all(v["one_phase"] == "routed" for v in entry["phases"].values())
        report.append(entry)
    return report
