"""Standard-cell synthesis and static timing on the OSU 0.35 um library (``make asic``).

The optional ASIC flow uses Debian's packages, not PyPI: ``yosys`` (with its ``yosys-abc``),
``opensta`` (the ``sta`` binary) and ``qflow-tech-osu035`` (the OSU 0.35 um standard cells'
liberty file). :func:`find_asic_tools` finds them or raises a :class:`FredError` naming every
missing package and the install command (``make asic-install``).

One design (a Verilog file with module ``top``) goes through:

1. yosys: ``synth -flatten`` (or, ``hierarchical``, ``synth`` keeping the hierarchy: each
   distinct module of the hierarchical Verilog mapped once, then flattened after mapping; see
   :func:`yosys_script`), flip-flops mapped to the liberty's DFFs (``dfflibmap``), logic by
   ABC to the liberty's cells with a delay target and ABC's fanout buffering and gate sizing
   (:data:`ABC_SCRIPT`), nets split and wire-to-wire assignments buffered so OpenSTA can read the
   netlist; ``stat -liberty`` gives cells by type and area (um^2, the liberty's unit).
2. OpenSTA: one ideal clock on ``clk``, inputs and outputs constrained to it with zero external
   delay, ``report_checks``: the worst path's start, end, cells and arrival time (ns). No wire
   load model (the liberty defines none), so delays are cell delays into pin capacitances.

:func:`fo4_delay` measures the library's fanout-of-4 inverter delay with OpenSTA on a chain of
INVX1 each loaded by four INVX1, so a path can be stated in FO4 delays (a node-independent
measure). The report readers (:func:`parse_stat`, :func:`parse_sta_report`,
:func:`liberty_cell_area`) are pure text functions, tested without the tools.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["AsicTools", "find_asic_tools", "liberty_cell_area", "parse_stat", "parse_hierarchy_stat",
           "parse_sta_report",
           "yosys_script", "sta_script", "synthesize", "static_timing", "fo4_delay",
           "INSTALL_COMMAND", "LIBERTY", "NAND2_CELL"]

#: where ``qflow-tech-osu035`` installs the OSU 0.35 um liberty file
LIBERTY = Path("/usr/share/qflow/tech/osu035/osu035_stdcells.lib")
#: the gate-equivalent reference cell (GE = area / this cell's area)
NAND2_CELL = "NAND2X1"
#: Debian package of each tool the flow needs
PACKAGES = {"yosys": "yosys", "yosys-abc": "yosys", "sta": "opensta", "liberty": "qflow-tech-osu035"}
INSTALL_COMMAND = "sudo apt-get install -y yosys berkeley-abc opensta qflow-tech-osu035"

#: ABC's liberty mapping (yosys' default for ``-liberty``) followed by fanout buffering and gate
#: sizing against the delay target ``{D}`` (ps): without ``buffer`` a control net driving
#: thousands of pins stays on one INVX1 and dominates the critical path. Register outputs are
#: outside ABC's network and are not buffered (a limit docs/asic.md states).
ABC_SCRIPT = ("+strash;&get,-n;&fraig,-x;&put;scorr;dc2;dretime;strash;&get,-n;&dch,-f;&nf,{D};&put;"
              "buffer,-N,8;upsize,{D};dnsize,{D};stime,-p")


@dataclass(frozen=True)
class AsicTools:
    yosys: str
    sta: str
    liberty: Path


def find_asic_tools(*, liberty: Path = LIBERTY) -> AsicTools:
    """The flow's tools (on PATH) and liberty; a :class:`FredError` naming each missing Debian
    package otherwise."""
    found = {name: shutil.which(name) for name in ("yosys", "yosys-abc", "sta")}
    missing = [f"{name} (package {PACKAGES[name]})" for name, path in found.items() if not path]
    if not Path(liberty).is_file():
        missing.append(f"the OSU 0.35 um liberty {liberty} (package {PACKAGES['liberty']})")
    if missing:
        raise FredError("the ASIC flow needs Debian packages that are not installed: "
                        + "; ".join(missing) + f". Install them with `make asic-install` "
                        f"({INSTALL_COMMAND}); the flow is optional and not part of make test")
    return AsicTools(yosys=found["yosys"], sta=found["sta"], liberty=Path(liberty))


def liberty_cell_area(text: str, cell: str) -> float:
    """Area of ``cell`` in a liberty file's text (the library's area unit, um^2 for OSU)."""
    match = re.search(r"\bcell\s*\(\s*\"?" + re.escape(cell) + r"\"?\s*\)\s*\{[^}]*?\barea\s*:\s*([0-9.eE+-]+)",
                      text)
    if match is None:
        raise FredError(f"liberty: no area for cell {cell}")
    return float(match.group(1))


def parse_stat(text: str, top: str) -> dict:
    """``{"cells": {type: count}, "area_um2": float}`` of module ``top`` in yosys'
    ``stat -liberty`` text output (its JSON output of yosys 0.23 has no area)."""
    header = re.search(r"^=== \\?" + re.escape(top) + r" ===$", text, re.MULTILINE)
    if header is None:
        raise FredError(f"yosys stat: no module {top}")
    body = text[header.end():]
    end = re.search(r"^=== ", body, re.MULTILINE)
    body = body[:end.start()] if end else body
    area = re.search(r"Chip area for module '\\?" + re.escape(top) + r"':\s*([0-9.]+)", body)
    if area is None:
        raise FredError(f"yosys stat: no chip area for {top} (was stat run with -liberty?)")
    count_block = re.search(r"Number of cells:\s*\d+\n((?:\s+\S+\s+\d+\n)*)", body)
    cells = {}
    for line in (count_block.group(1) if count_block else "").splitlines():
        name, count = line.split()
        cells[name] = int(count)
    if not cells:
        raise FredError(f"yosys stat: no cells listed for {top}")
    return {"cells": cells, "area_um2": float(area.group(1))}


_PATH_LINE = re.compile(r"^\s*(-?[0-9.]+)\s+(-?[0-9.]+)\s+([\^v])\s+(\S+)/(\S+)\s+\((\S+)\)\s*$")


def parse_sta_report(text: str) -> dict:
    """The worst path of an OpenSTA ``report_checks`` text: start and end points, arrival,
    required time and slack (ns), and the cells it crosses ``[{instance, cell, pin, delay_ns}]``
    (launching flip-flop first). ``logic_levels`` counts the combinational cells on it."""
    start = re.search(r"^Startpoint:\s*(\S+)", text, re.MULTILINE)
    end = re.search(r"^Endpoint:\s*(\S+)", text, re.MULTILINE)
    arrival = re.search(r"^\s*(-?[0-9.]+)\s+data arrival time", text, re.MULTILINE)
    slack = re.search(r"^\s*(-?[0-9.]+)\s+slack", text, re.MULTILINE)
    required = re.search(r"^\s*(-?[0-9.]+)\s+data required time", text, re.MULTILINE)
    if not (start and end and arrival and slack):
        raise FredError("OpenSTA report: no timing path (no Startpoint/Endpoint/arrival/slack); "
                        "is the clock port named clk?")
    section = text[start.start():arrival.start()]
    cells = []
    for line in section.splitlines():
        m = _PATH_LINE.match(line)
        # the clock pin of the launching flop and the endpoint's data pin are not cell delays
        if m and m.group(5) != "CLK" and m.group(4) != end.group(1):
            cells.append({"instance": m.group(4), "pin": m.group(5), "cell": m.group(6),
                          "delay_ns": float(m.group(1))})
    launch = [c for c in cells if c["cell"].startswith("DFF")]
    return {"startpoint": start.group(1), "endpoint": end.group(1),
            "arrival_ns": float(arrival.group(1)),
            "required_ns": float(required.group(1)) if required else None,
            "slack_ns": float(slack.group(1)), "path": cells,
            "logic_levels": len(cells) - len(launch)}


def yosys_script(*, top: str, liberty: Path, delay_target_ps: float, hierarchical: bool = False) -> str:
    """The yosys commands of step 1 (see the module docstring); writes ``stat.txt`` and
    ``netlist.v`` in the working folder.

    ``hierarchical``: ``synth`` without ``-flatten``, so each distinct module (the hierarchical
    Verilog of :mod:`hdl.emit.hierarchy` has one per component and parameter set) is optimized
    and mapped by ABC once, however many instances it has; ``stat_hier.txt`` records each
    module's area and the hierarchy. The mapped netlist is then flattened (copies of mapped
    cells, no further optimization) so the fanout buffer trees and OpenSTA see every instance.
    Nothing is optimized across module boundaries (constants, unused outputs), which a flat run
    does: the hierarchical area is an upper bound of the flat one (docs/asic.md measures the gap)."""
    abc = ABC_SCRIPT
    synth = [f"synth -top {top}"] if hierarchical else [f"synth -flatten -top {top}"]
    mapped = [f"dfflibmap -liberty {liberty}", f"abc -D {delay_target_ps:g} -liberty {liberty} -script {abc}",
              "opt_clean -purge"]
    if hierarchical:
        mapped += [f"tee -q -o stat_hier.txt stat -liberty {liberty} -top {top}", "flatten", "opt_clean -purge"]
    return "; ".join([
        "read_verilog dut.v", *synth, *mapped, "splitnets -ports", "opt_clean -purge", "insbuf -buf BUFX2 A Y",
        f"tee -q -o stat.txt stat -liberty {liberty}", "write_verilog -noattr -noexpr -nodec netlist.v",
    ])


def parse_hierarchy_stat(text: str, top: str) -> dict:
    """Yosys ``stat -liberty -top`` text of a hierarchical design: ``{"modules": {name:
    {"instances", "area_um2"}}, "area_um2"}``, where a module's ``area_um2`` is its own cells'
    area (one instance, submodules excluded), ``instances`` its number of instances in the whole
    design (the counts of the hierarchy listing multiplied down every path from ``top``), and
    the total ``area_um2`` yosys' area of ``top`` over the hierarchy."""
    own = {}                                     # a module of submodules only has no area line
    for section in re.split(r"^(?==== )", text, flags=re.MULTILINE):
        header = re.match(r"=== \\?(\S+) ===", section)
        if header and header.group(1) != "design":
            area = re.search(r"^\s*Chip area for module '[^']+':\s*([0-9.]+)", section, re.MULTILINE)
            own[header.group(1)] = float(area.group(1)) if area else 0.0
    listing = re.search(r"^=== design hierarchy ===\n\n(.*?)\n\n", text, re.MULTILINE | re.DOTALL)
    total = re.search(r"Chip area for top module '\\?" + re.escape(top) + r"':\s*([0-9.]+)", text)
    if listing is None or total is None:
        raise FredError(f"yosys stat: no design hierarchy for {top} (was stat run with -top?)")
    instances: dict[str, int] = {}
    stack: list[tuple[int, int]] = []            # (indent, instances of that line's module)
    for line in listing.group(1).splitlines():
        indent = len(line) - len(line.lstrip())
        name, count = line.split()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        number = int(count) * (stack[-1][1] if stack else 1)
        instances[name] = instances.get(name, 0) + number
        stack.append((indent, number))
    missing = sorted(set(instances) - set(own))
    if missing:
        raise FredError(f"yosys stat: no area for module(s) {', '.join(missing)}")
    return {"modules": {name: {"instances": n, "area_um2": own[name]} for name, n in instances.items()},
            "area_um2": float(total.group(1))}


def sta_script(*, top: str, liberty: Path, netlist: str = "netlist.v", clock: str | None = "clk",
               period_ns: float = 10.0) -> str:
    """OpenSTA commands: worst max-delay path of ``netlist`` (one ideal clock on ``clock``, or
    unconstrained input-to-output paths without one)."""
    lines = [f"read_liberty {liberty}", f"read_verilog {netlist}", f"link_design {top}"]
    if clock:
        lines += [f"create_clock -name clk -period {period_ns:g} [get_ports {clock}]",
                  f"set_input_delay 0 -clock clk [delete_from_list [all_inputs] [get_ports {clock}]]",
                  "set_output_delay 0 -clock clk [all_outputs]"]
    else:
        lines += [f"set_max_delay {period_ns:g} -from [all_inputs] -to [all_outputs]"]
    lines += ["report_checks -path_delay max -digits 3", "exit"]
    return "\n".join(lines) + "\n"


def _run(command: list[str], log: Path, *, timeout: float | None) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=log.parent, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FredError(f"{Path(command[0]).name} exceeded {timeout:.0f} s in {log.parent}") from None
    log.write_text(done.stdout + done.stderr)
    if done.returncode or "Error" in done.stderr:
        tail = (done.stdout + done.stderr).strip().splitlines()[-10:]
        raise FredError(f"{Path(command[0]).name} failed (see {log}):\n" + "\n".join(tail))
    return done.stdout


def synthesize(tools: AsicTools, folder: Path, *, top: str = "top", delay_target_ps: float = 5000,
               timeout: float | None = None, hierarchical: bool = False) -> dict:
    """Step 1 on ``folder/dut.v``: cells by type and area (of the flattened netlist);
    ``folder/netlist.v`` for step 2. ``hierarchical`` (:func:`yosys_script`) adds
    ``"hierarchy"``: :func:`parse_hierarchy_stat` of the mapped hierarchy."""
    script = yosys_script(top=top, liberty=tools.liberty, delay_target_ps=delay_target_ps,
                          hierarchical=hierarchical)
    (folder / "synth.ys").write_text(script.replace("; ", "\n") + "\n")
    _run([tools.yosys, "-q", "-s", "synth.ys"], folder / "yosys.log", timeout=timeout)
    stat = parse_stat((folder / "stat.txt").read_text(), top)
    if hierarchical:
        stat["hierarchy"] = parse_hierarchy_stat((folder / "stat_hier.txt").read_text(), top)
    return stat


def static_timing(tools: AsicTools, folder: Path, *, top: str = "top", clock: str | None = "clk",
                  netlist: str = "netlist.v", timeout: float | None = None) -> dict:
    """Step 2 on ``folder/netlist.v``: the worst path (:func:`parse_sta_report`)."""
    (folder / "sta.tcl").write_text(sta_script(top=top, liberty=tools.liberty, netlist=netlist,
                                               clock=clock))
    report = _run([tools.sta, "-no_splash", "-exit", "sta.tcl"], folder / "sta.log", timeout=timeout)
    return parse_sta_report(report)


#: FO4 chain: stage i drives stage i+1 and three dummy INVX1 (four loads)
FO4_STAGES = 7


def fo4_netlist(stages: int = FO4_STAGES) -> str:
    """Structural Verilog of ``stages`` INVX1 in a chain, each loaded by four INVX1 inputs."""
    lines = ["module fo4(a, y);", "  input a;", "  output y;",
             "  wire " + ", ".join(f"n{i}" for i in range(1, stages + 1)) + ";"]
    lines.append("  INVX1 s0 (.A(a), .Y(n1));")
    for i in range(1, stages):
        lines.append(f"  INVX1 s{i} (.A(n{i}), .Y(n{i + 1}));")
    for i in range(1, stages + 1):
        for k in range(3):
            lines.append(f"  INVX1 load{i}_{k} (.A(n{i}), .Y());")
    lines += [f"  BUFX2 out (.A(n{stages}), .Y(y));", "endmodule", ""]
    return "\n".join(lines)


def fo4_delay(tools: AsicTools, folder: Path) -> float:
    """The library's FO4 inverter delay (ns): the mean delay of the chain's middle stages (the
    first stages' input slew and the last stage's output buffer are left out)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fo4.v").write_text(fo4_netlist())
    path = static_timing(tools, folder, top="fo4", clock=None, netlist="fo4.v")["path"]
    stages = [c for c in path if c["instance"].startswith("s")]
    middle = stages[2:-1]
    if not middle:
        raise FredError(f"FO4 chain: OpenSTA reported {len(stages)} inverter stages, need more than 3")
    return sum(c["delay_ns"] for c in middle) / len(middle)
