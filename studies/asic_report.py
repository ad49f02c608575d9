"""Gate-level cost of the designs on the OSU 0.35 um standard cells (``fred asic``, ``make asic``;
docs/asic.md).

For each design (:func:`asic_designs`): Verilog from the Amaranth design, then
:mod:`eda.asic` (yosys + ABC to the OSU liberty, flat or, for Fred_m(P), hierarchically: each
distinct module mapped once, the area summed over the instances, fanout buffer trees of :mod:`eda.fanout_buffers`,
OpenSTA). A result records cells by type, flip-flops, area (um^2) with and without the buffer
trees, gate equivalents (GE = area / NAND2X1 area, 96 um^2 in this library), the worst
register-to-register (or port) path in ns and in FO4 delays (:func:`eda.asic.fo4_delay`), the
cells on it, and the seconds the run took.

For a Fred_m(P) that the switch characterization (``data/characterization.json``) also counted
in yosys generic cells, ``generic_ge`` is that count priced by ``configs/cost.toml``'s
gate-equivalent ratios, and ``asic_per_generic_ge`` the measured ratio: how far the cost model's
hand ratios are from a real library (the cost file's ``[logic] asic_per_generic_ge``).

A hierarchical result also records ``modules_mapped`` (distinct modules), ``area_hierarchy_um2``
(yosys' sum over the instances, before the buffer trees) and ``area_by_component`` (um^2 per
component: a module and its named submodules, such as ``fred_input_ms_m3_fp16x4_t8`` with its
fork, paths and buffers, summed over every instance).

Writes ``OUT/<name>/`` (Verilog, yosys and OpenSTA scripts and logs, netlists) and
``OUT/asic.json`` (results and provenance: tool versions, liberty, date, command).
"""

from __future__ import annotations

import json
import platform as host
import re
import subprocess
import time
from pathlib import Path

from eda.asic import (NAND2_CELL, AsicTools, find_asic_tools, fo4_delay, static_timing,
                      synthesize)
from eda.fanout_buffers import buffer_fanout, liberty_cells, netlist_cells
from hdl.contracts.errors import FredError
from studies.report import Column, table_text, write_json

__all__ = ["asic_designs", "asic_point", "asic_report", "area_by_component", "generic_ge_of", "markdown",
           "register_output", "COLUMNS", "DEFAULT_PORTS", "EXTRAS", "FORMATS", "SYNTHESIS_MODES"]

#: Fred_3(P) sizes synthesized by default: P = 4..12, which includes the wafer's chiplets
#: Fred_3(10) and Fred_3(12) (:data:`studies.characterization.grid.CHIPLETS`). Hierarchical
#: synthesis takes 0.5-5 min per size (docs/asic.md); flat, Fred_3(8) alone took 7.5 min.
DEFAULT_PORTS = tuple(range(4, 13))
#: how Fred_m(P) is synthesized: flat (one netlist, optimized across modules), hierarchical
#: (each distinct module mapped once; records named ``..._hier`` as the characterization's), or both
SYNTHESIS_MODES = ("hierarchical", "flat", "both")
#: the reduction unit's formats (one lane each: the adder per format)
FORMATS = ("int32", "fp16", "bf16", "fp32")
#: the other routers, at their registry defaults
EXTRAS = ("mesh_router", "packet_switch")


def asic_designs(ports=DEFAULT_PORTS, *, middle: int = 3, formats=FORMATS, extras=EXTRAS,
                 synthesis: str = "hierarchical") -> list[dict]:
    """``[{name, kind, ...}]``: the microswitches and the odd-P demux and mux (fp16 x 4, as the
    characterization), the reduction unit per format (1 lane), the extras at their registry
    defaults, and Fred_m(P) for each P (fp16 x 4 lanes, 4 phases, as the characterization;
    ``synthesis`` one of :data:`SYNTHESIS_MODES`, a hierarchical record named
    ``fred_switch_P<P>m<m>_hier``; ``chiplet`` true for the wafer's chiplet sizes), in
    increasing size. The parts and extras are synthesized flat."""
    if synthesis not in SYNTHESIS_MODES:
        raise FredError(f"synthesis {synthesis!r} is not one of {', '.join(SYNTHESIS_MODES)}")
    from studies.characterization.grid import CHIPLET_MIDDLE, CHIPLETS
    designs = [{"name": "rd_microswitch", "kind": "rd", "ports": 2, "middle": None},
               {"name": f"input_microswitch_m{middle}", "kind": "input", "ports": 2, "middle": middle},
               {"name": f"output_microswitch_m{middle}", "kind": "output", "ports": 2, "middle": middle},
               {"name": f"demux_m{middle}", "kind": "demux", "ports": 1, "middle": middle},
               {"name": f"mux_m{middle}", "kind": "mux", "ports": 1, "middle": middle}]
    designs += [{"name": f"adder_{dtype}_l1", "kind": "adder", "dtype": dtype, "lanes": 1} for dtype in formats]
    designs += [{"name": extra, "kind": extra} for extra in extras]
    modes = ("flat", "hierarchical") if synthesis == "both" else (synthesis,)
    for p in sorted(ports):
        for mode in modes:
            designs.append({"name": f"fred_switch_P{p}m{middle}" + ("_hier" if mode == "hierarchical" else ""),
                            "kind": "switch", "ports": p, "middle": middle, "synthesis": mode,
                            "chiplet": p in CHIPLETS and middle == CHIPLET_MIDDLE})
    return designs


def area_by_component(modules: dict) -> dict[str, float]:
    """um^2 per component of a hierarchical result: :func:`eda.asic.parse_hierarchy_stat`'s
    modules grouped by the name before the first dot (Amaranth names a component's unnamed
    submodules ``component.sub``), each module's area times its instances; largest first."""
    totals: dict[str, float] = {}
    for name, module in modules.items():
        root = name.split(".")[0]
        totals[root] = totals.get(root, 0.0) + module["area_um2"] * module["instances"]
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def _component(design: dict):
    from hdl.designs.registry import get_design
    from studies.characterization.cost import build_component
    kind = design["kind"]
    if kind == "adder":
        return get_design("adder").build(dtype=design["dtype"], lanes=design["lanes"])
    if kind in EXTRAS:
        return get_design(kind).build()
    return build_component(design)


def asic_point(design: dict, tools: AsicTools, *, out: Path, fo4_ns: float, max_fanout: int = 16,
               delay_target_ps: float = 5000, timeout: float | None = None) -> dict:
    """Synthesize, buffer and time one design (see the module docstring); its result record."""
    from hdl.emit.verilog import to_verilog
    folder = out / design["name"]
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    (folder / "dut.v").write_text(to_verilog(_component(design), name="top"))
    generated = time.time()
    hierarchical = design.get("synthesis") == "hierarchical"
    stat = synthesize(tools, folder, top="top", delay_target_ps=delay_target_ps, timeout=timeout,
                      hierarchical=hierarchical)
    synthesized = time.time()
    library = liberty_cells(tools.liberty.read_text())
    netlist, buffers = buffer_fanout((folder / "netlist.v").read_text(), library, max_fanout=max_fanout)
    (folder / "netlist_buffered.v").write_text(netlist)
    cells = netlist_cells(netlist)
    area = sum(library[cell]["area"] * count for cell, count in cells.items())
    path = static_timing(tools, folder, top="top", netlist="netlist_buffered.v", timeout=timeout)
    nand2 = library[NAND2_CELL]["area"]
    hierarchy = {}
    if hierarchical:
        modules = stat["hierarchy"]["modules"]
        hierarchy = {"modules_mapped": len(modules), "area_hierarchy_um2": stat["hierarchy"]["area_um2"],
                     "area_by_component": area_by_component(modules)}
    return {**design, **hierarchy,
            "cells": sum(cells.values()), "cells_by_type": cells,
            "flip_flops": sum(n for cell, n in cells.items() if cell.startswith("DFF")),
            "area_um2": area, "area_unbuffered_um2": stat["area_um2"], "fanout_buffers": buffers,
            "ge": round(area / nand2, 1), "kge": round(area / nand2 / 1000, 2),
            "critical_path_ns": path["arrival_ns"], "critical_path_fo4": round(path["arrival_ns"] / fo4_ns, 1),
            "logic_levels": path["logic_levels"], "startpoint": path["startpoint"], "endpoint": path["endpoint"],
            "path_cells": [c["cell"] for c in path["path"]],
            "start_register": register_output(netlist, path["startpoint"]),
            "end_register": register_output(netlist, path["endpoint"]),
            "seconds": {"verilog": round(generated - started, 1), "yosys": round(synthesized - generated, 1),
                        "total": round(time.time() - started, 1)}}


def register_output(netlist: str, instance: str) -> str | None:
    """The net a flip-flop ``instance`` of a mapped netlist drives (its ``Q``): the RTL register's
    name (such as ``config_memory.active[66]``), where the instance itself has an anonymous
    name; None if the instance is not a flip-flop of the netlist."""
    match = re.search(r"^  DFF\w* " + re.escape(instance) + r" \(\n(?:.*\n)*?\s*\.Q\((.*?)\)\n", netlist,
                      re.MULTILINE)
    return match.group(1).strip().lstrip("\\") if match else None


def _version(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"
    text = (done.stdout + done.stderr).strip()
    return text.splitlines()[0] if text else ""


def _provenance(tools: AsicTools, command: str) -> dict:
    return {"command": command, "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "host": f"{host.machine()}, {host.system()}",
            "yosys": _version([tools.yosys, "-V"]), "opensta": _version([tools.sta, "-version"]),
            "liberty": str(tools.liberty),
            "liberty_package": _version(["dpkg-query", "-W", "qflow-tech-osu035"])}


def generic_ge_of(result: dict, characterization: dict | None, cost) -> float | None:
    """The cost model's gate equivalents of the same design from the characterization's yosys
    generic cells (a Fred_m(P) or microswitch it measured), or None."""
    if not characterization:
        return None
    for c in characterization.get("cost", []):
        if c.get("name") == result["name"] and c.get("generic_cells_by_type"):
            return cost.gate_equivalents_of(c["generic_cells_by_type"])
    return None


def asic_report(designs: list[dict], *, out: Path | str = "results/asic", max_fanout: int = 16,
                delay_target_ps: float = 5000, timeout: float | None = None, command: str = "",
                characterization: dict | None = None, cost=None, merge: bool = False,
                log=print) -> dict:
    """Every design through the flow; ``{"provenance", "fo4_ns", "nand2_um2", "results",
    "failures"}``, also written to ``OUT/asic.json``. ``characterization`` and ``cost`` (the
    cost model) add ``generic_ge`` and ``asic_per_generic_ge`` where the characterization has
    the design. A design that fails is listed in ``failures`` with its error, the rest go on.
    With ``merge``, the results already in ``OUT/asic.json`` are kept unless measured again
    (each result names the run that measured it: ``run``)."""
    tools = find_asic_tools()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fo4 = fo4_delay(tools, out / "fo4")
    nand2 = liberty_cells(tools.liberty.read_text())[NAND2_CELL]["area"]
    results, failures = [], []
    run = {"command": command, "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for design in designs:
        try:
            result = asic_point(design, tools, out=out, fo4_ns=fo4, max_fanout=max_fanout,
                                delay_target_ps=delay_target_ps, timeout=timeout)
        except FredError as exc:
            failures.append({"name": design["name"], "error": str(exc)})
            log(f"asic {design['name']}: FAILED: {exc}")
            continue
        generic = generic_ge_of(result, characterization, cost) if cost else None
        if generic:
            result["generic_ge"] = round(generic, 1)
            result["asic_per_generic_ge"] = round(result["ge"] / generic, 3)
        result["run"] = run
        results.append(result)
        log(f"asic {design['name']}: {result['kge']} kGE, {result['cells']} cells, "
            f"{result['critical_path_ns']} ns ({result['critical_path_fo4']} FO4), "
            f"{result['seconds']['total']} s")
    if merge and (out / "asic.json").is_file():
        names = {r["name"] for r in results}
        kept = [r for r in json.loads((out / "asic.json").read_text())["results"] if r["name"] not in names]
        results = kept + results
    summary = {"provenance": _provenance(tools, command), "fo4_ns": round(fo4, 4), "nand2_um2": nand2,
               "max_fanout": max_fanout, "delay_target_ps": delay_target_ps,
               "results": results, "failures": failures}
    write_json(out / "asic.json", summary, sort_keys=False, trailing_newline=True)
    return summary


COLUMNS = [Column("design", "name"), Column("cells", "cells"), Column("flip-flops", "flip_flops"),
           Column("area, um^2", lambda r: f"{r['area_um2']:,.0f}"), Column("kGE", "kge"),
           Column("buffers added", "fanout_buffers"),
           Column("critical path, ns", "critical_path_ns"), Column("FO4", "critical_path_fo4"),
           Column("cells on path", "logic_levels"),
           Column("generic-cell GE (cost model)", lambda r: r.get("generic_ge", "-")),
           Column("OSU GE / generic GE", lambda r: r.get("asic_per_generic_ge", "-")),
           Column("time, s", lambda r: r["seconds"]["total"])]


def markdown(results: list[dict]) -> str:
    """The Markdown table of ``results`` (:func:`asic_point` records), without a final newline."""
    return table_text(COLUMNS, results)

