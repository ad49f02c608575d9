"""Router benchmark and routability table (``fred bench router``, ``make bench-router``).

    fred bench router                                 # P = 64 routing time per flow set (prints)
    fred bench router --write-doc docs/routability.md # also the full table

Figures printed (never asserted): for Fred_m(64), m in {2, 3, 4}, the wall-clock time per
flow set of ``Router.route`` (one-phase attempt plus, when needed, phase splitting) for four
kinds of flow sets -- uniformly random port partitions (all-reduce groups), random general
flow sets, random full permutations (unicast) and the traffic phases of every 3D-parallel
placement of 64 NPUs -- as mean / median / max, with the one-phase fraction.

``--write-doc`` additionally measures, for P in {8, 16, 32, 64} x m in {2, 3, 4}: the
fraction of partitions routable in one phase and the mean number of phases (exhaustive for
P = 8, ``--samples`` uniform random partitions otherwise), the same for the paper's greedy
colouring without backtracking, random general flow sets, and the 3D-parallel placements
of every N <= P NPUs; and writes them with the timing table to the given Markdown file.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from hdl.compiler import Flow, Router
from hdl.compiler.routability import (bell_number, partition_flows, placement_report,
                                      placement_traffic, random_flow_set, random_partition,
                                      set_partitions)
from hdl.contracts.placement import factorisations
from studies.report import Column, Markdown, check_writable

SIZES = (8, 16, 32, 64)
ODD_SIZES = (10, 12, 20)  # the paper's chiplets Fred_3(10), Fred_3(12); 20 NPUs on one switch
TABLE_SIZES = (4,) + SIZES  # P = 4 added: the assignment asked whether m = 2 needs 2 phases there
MIDDLES = (2, 3, 4)


def _flow_sets(kind: str, ports: int, count: int, seed: int) -> list[list[Flow]]:
    rng = random.Random(seed)
    if kind == "partition":
        return [partition_flows(random_partition(ports, rng)) for _ in range(count)]
    if kind == "general":
        return [random_flow_set(ports, rng) for _ in range(count)]
    if kind == "permutation":
        sets = []
        for _ in range(count):
            dst = list(range(ports))
            rng.shuffle(dst)
            sets.append([Flow((s,), (d,)) for s, d in enumerate(dst)])
        return sets
    if kind == "placement":
        return [flows for p in factorisations(ports) for flows in placement_traffic(p).values()]
    raise ValueError(kind)


def time_routing(ports: int, middle: int, kind: str, count: int, seed: int) -> dict:
    sets = _flow_sets(kind, ports, count, seed)
    times, one, phases = [], 0, 0
    for flows in sets:
        router = Router(ports=ports, middle=middle, seed=seed)  # fresh: no memo carried over
        start = time.perf_counter()
        result = router.route(flows)
        times.append(time.perf_counter() - start)
        one += result.routable_in_one_phase
        phases += len(result.phases)
    return {"kind": kind, "sets": len(sets), "mean_ms": 1e3 * statistics.mean(times),
            "median_ms": 1e3 * statistics.median(times), "max_ms": 1e3 * max(times),
            "one_phase_fraction": one / len(sets), "mean_phases": phases / len(sets)}


def routability_row(ports: int, middle: int, samples: int, seed: int) -> dict:
    if bell_number(ports) <= 5000:
        source = [partition_flows(p) for p in set_partitions(range(ports))]
        mode = "all"
    else:
        rng = random.Random(seed)
        source = [partition_flows(random_partition(ports, rng)) for _ in range(samples)]
        mode = f"{samples} random"
    router = Router(ports=ports, middle=middle, seed=seed)
    greedy = Router(ports=ports, middle=middle, backtrack=False)
    one = phases = greedy_one = bound = 0
    for flows in source:
        result = router.route(flows)
        one += result.routable_in_one_phase
        bound += result.one_phase == "search-bound"
        phases += len(result.phases)
        greedy_one += greedy.try_one_phase(flows)[0] is not None
    rng = random.Random(seed + 1)
    general = [random_flow_set(ports, rng) for _ in range(len(source) if mode != "all" else samples)]
    general_one = sum(router.try_one_phase(f)[0] is not None for f in general)
    return {"ports": ports, "middle": middle, "mode": mode, "total": len(source),
            "one_phase_fraction": one / len(source), "mean_phases": phases / len(source),
            "greedy_one_phase_fraction": greedy_one / len(source), "search_bound": bound,
            "general_total": len(general), "general_one_phase_fraction": general_one / len(general)}


def placement_row(ports: int, middle: int) -> dict:
    total = failing = 0
    examples = []
    for npus in range(2, ports + 1):
        for entry in placement_report(ports=ports, middle=middle, npus=npus):
            for kind, value in entry["phases"].items():
                total += 1
                if value["one_phase"] != "routed":
                    failing += 1
                    if len(examples) < 3:
                        examples.append(f"{entry['placement']} {kind} ({value['phase_count']} phases)")
    full = placement_report(ports=ports, middle=middle)
    return {"ports": ports, "middle": middle, "traffic_phases": total, "not_one_phase": failing,
            "examples": examples, "full_placements": len(full),
            "full_all_one_phase": sum(e["all_one_phase"] for e in full)}


def run(count: int = 50, samples: int = 1000, seed: int = 1, write_doc: Path | None = None) -> None:
    """Print the routing time per flow set on Fred_m(64) (``count`` sets per random kind, seeded
    by ``seed``); with ``write_doc``, also measure the routability tables (``samples`` random
    partitions per (P, m) where enumeration is too large) and write the report there."""
    if write_doc:   # an unwritable report fails now, not after the measurements
        check_writable(write_doc)
    timing = []
    print(f"Routing time per flow set on Fred_m(64) ({count} sets per random kind, seed {seed})")
    print(f"{'m':>2} {'kind':12} {'sets':>5} {'mean ms':>9} {'median ms':>10} {'max ms':>9} {'1-phase':>8} {'phases':>7}")
    for middle in MIDDLES:
        for kind in ("partition", "general", "permutation", "placement"):
            row = time_routing(64, middle, kind, count, seed)
            row["middle"] = middle
            timing.append(row)
            print(f"{middle:>2} {kind:12} {row['sets']:>5} {row['mean_ms']:>9.2f} {row['median_ms']:>10.2f} "
                  f"{row['max_ms']:>9.2f} {row['one_phase_fraction']:>8.3f} {row['mean_phases']:>7.3f}", flush=True)
    if not write_doc:
        return

    table, place = [], []
    print("\nRoutability of port partitions (all-reduce groups)")
    for ports in TABLE_SIZES:
        for middle in MIDDLES:
            row = routability_row(ports, middle, samples, seed)
            table.append(row)
            print(f"P={ports:>2} m={middle} {row['mode']:>11}: one phase {row['one_phase_fraction']:.4f}, "
                  f"mean phases {row['mean_phases']:.4f}, greedy {row['greedy_one_phase_fraction']:.4f}, "
                  f"general {row['general_one_phase_fraction']:.4f}", flush=True)
    print("\n3D-parallel placements")
    for ports in SIZES:
        for middle in MIDDLES:
            row = placement_row(ports, middle)
            place.append(row)
            print(f"P={ports:>2} m={middle}: {row['not_one_phase']}/{row['traffic_phases']} traffic phases "
                  f"need > 1 phase; N=P: {row['full_all_one_phase']}/{row['full_placements']} placements "
                  "fully one-phase", flush=True)
    wafer = {(ports, middle): placement_report(ports=ports, middle=middle, npus=20)
             for ports in (32, 20) for middle in (2, 3)}
    odd = [routability_row(ports, middle, samples, seed)
           for ports in ODD_SIZES for middle in (2, 3)]
    odd_place = [placement_row(ports, middle) for ports in ODD_SIZES for middle in (2, 3)]
    _write_doc(Path(write_doc), dict(samples=samples, count=count, seed=seed), timing, table,
               place, wafer, odd, odd_place)
    print(f"\nwrote {write_doc}")


def _wafer_cell(entry: dict) -> str:
    bad = {k: v for k, v in entry["phases"].items() if v["one_phase"] != "routed"}
    return "all one phase" if not bad else "; ".join(
        f"{k}: {v['phase_count']} phases" for k, v in bad.items())


def _partitions(row: dict) -> str:
    return f"{row['mode']} ({row['total']})"


#: the table of one-phase routability of port partitions (rows of :func:`routability_row`)
ROUTABILITY_COLUMNS = [
    Column("P", "ports"), Column("m", "middle"), Column("partitions", _partitions),
    Column("one phase", "one_phase_fraction", ".4f"), Column("mean phases", "mean_phases", ".4f"),
    Column("greedy one phase", "greedy_one_phase_fraction", ".4f"), Column("bound", "search_bound"),
    Column("general flow sets one phase",
           lambda r: f"{r['general_one_phase_fraction']:.4f} ({r['general_total']})")]
#: the table of 3D-parallel placements (rows of :func:`placement_row`)
PLACEMENT_COLUMNS = [
    Column("P", "ports"), Column("m", "middle"), Column("traffic phases (all N <= P)", "traffic_phases"),
    Column("need > 1 phase", "not_one_phase"), Column("examples", lambda r: "; ".join(r["examples"]) or "-"),
    Column("placements of N = P fully one-phase",
           lambda r: f"{r['full_all_one_phase']}/{r['full_placements']}")]
#: the non-power-of-two table: rows are (routability row, placement row) pairs
ODD_COLUMNS = [
    Column("P", lambda rp: rp[0]["ports"]), Column("m", lambda rp: rp[0]["middle"]),
    Column("partitions", lambda rp: _partitions(rp[0])),
    Column("one phase", lambda rp: rp[0]["one_phase_fraction"], ".4f"),
    Column("mean phases", lambda rp: rp[0]["mean_phases"], ".4f"),
    Column("general flow sets one phase", lambda rp: rp[0]["general_one_phase_fraction"], ".4f"),
    Column("placement traffic phases (all N <= P) needing > 1 phase",
           lambda rp: f"{rp[1]['not_one_phase']}/{rp[1]['traffic_phases']}")]
#: the routing time table (rows of :func:`time_routing` with their ``middle``)
TIMING_COLUMNS = [
    Column("m", "middle"), Column("flow sets", "kind"), Column("sets", "sets"),
    Column("mean ms", "mean_ms", ".2f"), Column("median ms", "median_ms", ".2f"),
    Column("max ms", "max_ms", ".2f"), Column("one phase", "one_phase_fraction", ".3f"),
    Column("mean phases", "mean_phases", ".3f")]
#: the switches of the 20-NPU wafer table, one column each
WAFER_SWITCHES = [(32, 2), (32, 3), (20, 2), (20, 3)]


def _findings(table, place) -> list[str]:
    items = []
    for middle in MIDDLES:
        rows = [r for r in place if r["middle"] == middle]
        failing = sum(r["not_one_phase"] for r in rows)
        total = sum(r["traffic_phases"] for r in rows)
        items.append(f"m = {middle}: {total - failing}/{total} traffic phases of 3D-parallel placements "
                     f"(every N <= P, P in {{8, 16, 32, 64}}) route in one phase"
                     + ("." if failing == 0 else f"; {failing} need two phases or more."))
    p64 = {r["middle"]: r for r in table if r["ports"] == 64}
    items += [
        f"Uniformly random partitions of 64 ports route in one phase with probability "
        + ", ".join(f"{p64[m]['one_phase_fraction']:.3f} (m = {m})" for m in MIDDLES)
        + "; at m = 2 they almost never do (group sets are rarely free of odd conflict cycles at"
        " every level), at m = 3 almost always.",
        f"Backtracking over colourings (vs the first valid colouring) changes the one-phase "
        "fraction only slightly: " + ", ".join(
            f"P={r['ports']} m={r['middle']}: {r['greedy_one_phase_fraction']:.3f} -> "
            f"{r['one_phase_fraction']:.3f}" for r in table
            if r["greedy_one_phase_fraction"] != r["one_phase_fraction"]) + ".",
    ]
    return items


def _write_doc(path: Path, options: dict, timing, table, place, wafer, odd, odd_place) -> None:
    """Write the routability report to ``path``: ``options`` (``samples``, ``count``, ``seed``)
    as run; the rows of :func:`time_routing` (``timing``), :func:`routability_row` (``table``,
    with a P = 64 row per m for the findings; ``odd``), :func:`placement_row` (``place``,
    ``odd_place``, one per ``odd`` row) and ``wafer``: ``placement_report`` of 20 NPUs per
    switch of :data:`WAFER_SWITCHES`."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    doc = Markdown().heading("Routability of Fred_m(P)", 1)
    doc.paragraph(
        "Generated by `fred bench router --write-doc docs/routability.md` "
        f"(`--samples {options['samples']} --count {options['count']} --seed {options['seed']}`) on {now}, "
        f"Python {platform.python_version()}, {platform.machine()}. Do not edit by hand.")
    doc.paragraph("\n".join([
        "Method: `hdl/compiler/router.py` (colouring of the conflict graph per level with",
        "conflict-directed backjumping, nogoods learned from failed subnetworks; exact unless",
        "the search bound is hit -- the `bound` column counts those; phase splitting by",
        "first-fit decreasing + phase elimination + random restarts + bounded exact search).",
        "Partitions are all-reduce",
        "groups (one flow G > G per block), drawn uniformly among all set partitions (Stam's",
        "algorithm) or enumerated (`all`). *greedy* is the same router without backtracking",
        "(first valid colouring at each level, the paper's algorithm as written). *general* is",
        "random general flow sets (`random_flow_set`: unequal inputs and outputs, some ports idle)."]))
    doc.heading("Findings (computed from the tables below)").bullets(_findings(table, place), marker="-")
    doc.heading("One-phase routability of port partitions").table(ROUTABILITY_COLUMNS, table)
    doc.heading("3D-parallel placements").paragraph("\n".join([
        "Placements of N NPUs on ports 0..N-1 (port = mp + MP*(pp + PP*dp): MP groups on consecutive",
        "ports, then PP, then DP) for every ordered factorisation N = MP x DP x PP and every",
        "2 <= N <= P. Traffic phases per placement: MP all-reduce, DP all-reduce, PP stage-to-stage",
        "unicast, PP multicast (first MP rank of a stage to the next stage's MP group); each is one",
        "flow set. `fred routability --ports P --middle m --npus N --samples 1` lists them with the",
        "reason (a minimal set of flows that cannot share a phase and the microswitches they share)."]))
    doc.table(PLACEMENT_COLUMNS, place)
    doc.heading("The paper's 20-NPU wafer on one switch", 3).paragraph(
        "Every placement of 20 NPUs on ports 0..19 of Fred_m(32) (RTL sizes) and of Fred_m(20)"
        " (compiler extension; `fred routability --ports P --middle m --npus 20 --samples 1`). The "
        "paper's GPT-3 strategy is MP(2)-DP(5)-PP(2).")
    # a row: the entries of one placement, one per switch (every switch lists the same placements)
    doc.table([Column("placement", lambda entries: entries[0]["placement"])]
              + [Column(f"Fred_{m}({p})", i, _wafer_cell) for i, (p, m) in enumerate(WAFER_SWITCHES)],
              zip(*(wafer[key] for key in WAFER_SWITCHES)))
    for ports in (32, 20):
        reasons = [(e["placement"], k, v["why"]["reason"]) for e in wafer[(ports, 2)]
                   for k, v in e["phases"].items() if "why" in v]
        if reasons:
            doc.paragraph(f"Why on Fred_2({ports}) (`explain()`: a deletion-minimal set of flows "
                          "that cannot share a phase):")
            doc.bullets([f"{name} {kind}: {reason}." for name, kind, reason in reasons], marker="-")
    doc.heading("Non-power-of-two switches (compiler extension)").paragraph(
        "Odd P: demux/mux on the last port, subnetworks Fred_m(ceil(P/2)) (docs/configuration.md).")
    doc.table(ODD_COLUMNS, zip(odd, odd_place))
    doc.heading("Routing time per flow set at P = 64").paragraph("\n".join([
        f"`fred bench router --count {options['count']} --seed {options['seed']}` (or `make bench-router`);",
        f"wall clock on {os.cpu_count()} CPUs shared with other jobs (1-min load average at the end "
        f"{os.getloadavg()[0]:.1f}, so expect noise) of `Router.route` with a fresh router (no memo carried between sets), one-phase",
        "attempt plus splitting when needed; *placement* = every traffic phase of every",
        "placement of 64 NPUs."]))
    doc.table(TIMING_COLUMNS, timing)
    doc.write(path)
