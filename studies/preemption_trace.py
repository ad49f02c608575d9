"""Where a preemption's cycles go on the packet fabric: a per-cycle trace of every switch's
control unit and every uplink (``python -m studies.preemption_trace``; docs/fabric_validation.md,
"Drains along a path").

Runs a concurrent scenario (:func:`studies.concurrent_case.scenario_classes`) on a small
packet fabric in Amaranth's simulator (:func:`cocotb_tests.fabric.packet_fabric_sim.
run_packet_fabric_amaranth`) and records, in every cycle, each switch's control-unit state,
VC and waiting VCs and each uplink direction's flit (valid, VC). :func:`switch_events` reduces
that to what the model's preemption charge needs per switch: the cycle the higher class's
header first waits there, the cycle the switch leaves DRAIN for it, and how many lower-class
flits still entered the switch over its uplinks between the preemption's first header at any
switch and its own (the lower class still being served there while switches before it drain).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from cocotb_tests.fabric.packet_fabric_sim import run_packet_fabric_amaranth
from hdl.compiler.concurrent_program import concurrent_program
from hdl.contracts.fabric import fabric_spec
from hdl.contracts.fabric_partition import uplinks
from hdl.contracts.packet import VC
from hdl.designs.fabric.packet_fabric_top import PacketFabricTop
from hdl.designs.switch.control_unit import CUState
from studies.concurrent_case import scenario_classes

__all__ = ["trace_case", "switch_events", "uplink_timeline", "LATER"]

#: cycles the other classes are held back by when one class runs alone (``alone=``): past
#: the end of the small cases this tool runs
LATER = 4000


def trace_case(fabric: str, scenario: str, *, size: int, load_size: int, delay: int,
               alone=None, watchdog_cycles: int = 20_000, **spec_overrides) -> dict:
    """Run ``scenario`` on ``fabric_spec(fabric, **spec_overrides)`` (``alone``: a class's
    name: every other class starts :data:`LATER` cycles later, so that one runs by itself in
    the same program) and return ``{"spec",
    "classes", "run", "cycles": [per cycle {"sw": [(state, vc, waiting)], "up": {name: vc or
    None}}], "uplinks": [UplinkEnds]}``."""
    spec = fabric_spec(fabric, **spec_overrides)
    classes = scenario_classes(spec, scenario, size=size, load_size=load_size, delay=delay)
    if alone is not None:
        classes = [c if c.name == alone else dataclasses.replace(c, delay=c.delay + LATER)
                   for c in classes]
    program, request, vcs, delays, _ = concurrent_program(spec, classes)
    ends = uplinks(spec)
    seen = {}

    class ProbedTop(PacketFabricTop):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            seen["switches"] = [m.submodules[n] for n in _switch_names(spec)]
            seen["links"] = {e.name: m.submodules[e.name] for e in ends}
            return m

    cycles = []

    async def each_cycle(ctx, dut):
        sw = [(ctx.get(s.state), ctx.get(s.vc), ctx.get(s.waiting)) for s in seen["switches"]]
        field = dut.packet.header["vc"]
        up = {}
        for name, link in seen["links"].items():     # every flit's tag carries its packet's vc
            tag = ctx.get(link.o.payload.tag)
            up[name] = (tag >> field.offset) & ((1 << field.width) - 1) if ctx.get(link.o.valid) else None
        cycles.append({"sw": sw, "up": up})

    run = run_packet_fabric_amaranth(spec, request, program=program, vcs=vcs, delays=delays,
                                     watchdog_cycles=watchdog_cycles, each_cycle=each_cycle,
                                     top=lambda *a, **k: ProbedTop(*a, **k))
    return {"spec": spec, "classes": classes, "run": run, "cycles": cycles, "uplinks": ends}


def _switch_names(spec) -> list[str]:
    return [f"switch_l1_{s}" if s < spec.l1_count else
            "switch_l2" if spec.l2_planes == 1 else f"switch_l2_{s - spec.l1_count}"
            for s in range(len(spec.switch_ports))]


def switch_events(trace: dict, *, high: int = int(VC.MP), low: int = int(VC.DP)) -> list[dict]:
    """Per switch: ``first_wait`` (first cycle a packet of the ``high`` VC waits at an input
    head there), ``drain`` (cycles in DRAIN from then), ``running`` (first cycle after that
    with no ``high`` packet waiting: its first packet started), and
    ``low_flits_in`` (``low`` flits entering it over its uplinks from the first ``high``
    header at any switch to its own ``first_wait``: the lower class still arriving while
    the switches before it drain); None fields for a switch ``high`` never reaches."""
    spec, cycles = trace["spec"], trace["cycles"]
    n = len(spec.switch_ports)
    out = []
    for s in range(n):
        first = next((c for c, row in enumerate(cycles) if row["sw"][s][2] >> high & 1), None)
        ev = {"switch": _switch_names(spec)[s], "first_wait": first, "drain": None,
              "running": None, "low_flits_in": None}
        if first is not None:
            # its header's packet starts: no packet of ``high`` waits at a head any more
            run_at = next((c for c in range(first, len(cycles))
                           if not cycles[c]["sw"][s][2] >> high & 1), None)
            ev["running"] = run_at
            end = run_at if run_at is not None else len(cycles)
            ev["drain"] = sum(1 for c in range(first, end) if cycles[c]["sw"][s][0] == CUState.DRAIN)
        out.append(ev)
    starts = [e["first_wait"] for e in out if e["first_wait"] is not None]
    if starts:
        t0 = min(starts)
        for s, ev in enumerate(out):
            if ev["first_wait"] is None:
                continue
            into = [e.name for e in trace["uplinks"] if e.sink == s]
            ev["low_flits_in"] = sum(1 for c in range(t0, ev["first_wait"])
                                     for name in into if cycles[c]["up"][name] == low)
    return out


#: one character per cycle of :func:`uplink_timeline`: the VC of the flit on the link
TIMELINE_CHARS = {None: ".", int(VC.MP): "M", int(VC.DP): "d", int(VC.PP): "p", int(VC.CTRL): "c"}


def uplink_timeline(trace: dict, cycles: int) -> dict[str, str]:
    """Per uplink direction that carried a flit in the first ``cycles`` cycles, one character
    per cycle (:data:`TIMELINE_CHARS`: the VC of the flit leaving the link, '.' none)."""
    rows = trace["cycles"][:cycles]
    out = {}
    for name in sorted(rows[0]["up"]) if rows else ():
        line = "".join(TIMELINE_CHARS[row["up"][name]] for row in rows)
        if line.strip("."):
            out[name] = line
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", default="fred-a")
    ap.add_argument("--scenario", default="mp-under-dp")
    ap.add_argument("--npus", type=int, default=6)
    ap.add_argument("--npus-per-l1", type=int, default=2)
    ap.add_argument("--uplink-ports", type=int, default=None)
    ap.add_argument("--size", type=int, default=40)
    ap.add_argument("--load-size", type=int, default=400)
    ap.add_argument("--delay", type=int, default=200)
    ap.add_argument("--high", default="mp", choices=["mp", "pp"], help="the preempting class's VC")
    ap.add_argument("--low", default="dp", choices=["dp", "pp"], help="the preempted class's VC")
    ap.add_argument("--alone", default=None,
                    help="a class to run by itself (the others start %d cycles later)" % LATER)
    ap.add_argument("--timeline", type=int, default=0, metavar="CYCLES",
                    help="also print each used uplink direction's VC per cycle for the first "
                         "CYCLES cycles (M MP, d DP, p PP, . idle)")
    args = ap.parse_args(argv)
    over = {"npus": args.npus, "npus_per_l1": args.npus_per_l1}
    if args.uplink_ports is not None:
        over["uplink_ports"] = args.uplink_ports
    trace = trace_case(args.fabric, args.scenario, size=args.size, load_size=args.load_size,
                       delay=args.delay, alone=args.alone, **over)
    run = trace["run"]
    done = [e["done_cycle"] for e in run.engines]
    ends = {cls.name: max(done[r] for coll in cls.request.collectives for r in coll.ranks)
            for cls in trace["classes"]}
    high = int(VC[args.high.upper()])
    print(json.dumps({"class_ends": ends, "preemptions": [s["preemptions"] for s in run.switches],
                      "switches": switch_events(trace, high=high,
                                                low=int(VC[args.low.upper()]))}, indent=1))
    for name, line in uplink_timeline(trace, args.timeline).items():
        print(f"{name:20s} {line}")


if __name__ == "__main__":
    main()
