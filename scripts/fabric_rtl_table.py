"""RTL cycles of the paper's Fig. 9 cases on the fabric RTL (issue 15), as a Markdown table.

Usage: ``python scripts/fabric_rtl_table.py [--fabric fred-b fred-d] [--sizes 16 4096]
[--backpressure P] [--json]``; run it under the shared lock on the project machine. Each case
is one ``run_fabric`` call (bit-exact check included; a case with errors is reported as such).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cocotb_tests.fabric.run import run_fabric  # noqa: E402
from hdl.contracts.fabric import fabric_spec, make_request  # noqa: E402

CASES = [("wafer all-reduce", dict(group="wafer", op="all-reduce")),
         ("MP2-DP5-PP2 MP all-reduce", dict(strategy="MP2-DP5-PP2", dim="mp", op="all-reduce")),
         ("MP2-DP5-PP2 DP all-reduce", dict(strategy="MP2-DP5-PP2", dim="dp", op="all-reduce")),
         ("MP2-DP5-PP2 PP multicast", dict(strategy="MP2-DP5-PP2", dim="pp", op="multicast"))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fabric", nargs="+", default=["fred-b", "fred-d"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[16, 4096])
    parser.add_argument("--backpressure", type=float, default=0.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for name in args.fabric:
        spec = fabric_spec(name)
        for label, kwargs in CASES:
            for size in args.sizes:
                run = run_fabric(spec, make_request(spec, size_flits=size, **kwargs),
                                 sink_backpressure=args.backpressure)
                rows.append(dict(fabric=name, case=label, size_flits=size, cycles=run.cycles,
                                 phases=max(run.phases.values()), checked=run.flits_checked,
                                 errors=len(run.errors), cycles_per_s=run.cycles_per_s))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"RTL cycles, {datetime.now(timezone.utc).isoformat(timespec='seconds')}, "
          f"`python scripts/fabric_rtl_table.py {' '.join(argv or sys.argv[1:])}`\n")
    print("| fabric | case | size (flits) | RTL cycles | phases (max switch) | flits checked | errors |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fabric']} | {r['case']} | {r['size_flits']} | {r['cycles']} | {r['phases']} | "
              f"{r['checked']} | {r['errors']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
