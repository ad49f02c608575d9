"""``fred asic``: gate-level area (um^2, kGE) and static timing (ns, FO4) of the designs on the
OSU 0.35 um standard cells, with yosys + ABC and OpenSTA from Debian (:mod:`studies.asic_report`;
``make asic``, docs/asic.md). The tools are not PyPI packages: ``make asic-install`` installs
them; without them the command fails naming the missing packages."""

from __future__ import annotations

import argparse
import shlex
import sys

from fred.cli import print_json
from fred.commands._option_types import RANGES, int_in, ints_in
from studies.asic_report import DEFAULT_PORTS, SYNTHESIS_MODES

HELP = "OSU 0.35 um standard-cell area (kGE) and OpenSTA timing of the designs (Debian yosys, opensta)"


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ports", type=ints_in(2, 16), default=DEFAULT_PORTS,
                        help="Fred_m(P) sizes (default 4..12, which includes the chiplets Fred_3(10) "
                             "and Fred_3(12); hierarchical: 0.5-5 min each)")
    parser.add_argument("--synthesis", choices=SYNTHESIS_MODES, default="hierarchical",
                        help="Fred_m(P) hierarchical (each distinct module mapped once, default), flat "
                             "(Fred_3(8) flat: 7.5 min, 1.1 GB) or both")
    parser.add_argument("--middle", type=RANGES["middle"], default=3, help="m of Fred_m(P) (default 3)")
    parser.add_argument("--only", type=_names, default=(),
                        help="design names to run, comma-separated (default all; --list shows them)")
    parser.add_argument("--list", action="store_true", help="list the designs and exit")
    parser.add_argument("--max-fanout", type=int_in(2, 64), default=16,
                        help="loads per net before a buffer tree is inserted (default 16)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per tool step (default 3600)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the results already in OUT/asic.json that this run does not measure again")
    parser.add_argument("--out", default="results/asic",
                        help="folder of the netlists, logs and asic.json (default results/asic)")


def run(args) -> int:
    from hdl.contracts.errors import FredError
    from studies.asic_report import asic_designs
    from studies.report import check_writable
    designs = asic_designs(args.ports, middle=args.middle, synthesis=args.synthesis)
    if args.only:
        unknown = sorted(set(args.only) - {d["name"] for d in designs})
        if unknown:
            raise FredError(f"unknown design {', '.join(unknown)} in --only; available: "
                            + ", ".join(d["name"] for d in designs))
        designs = [d for d in designs if d["name"] in args.only]
    if args.list:
        print("\n".join(d["name"] for d in designs))
        return 0
    check_writable(args.out, folder=True)
    from eda.asic import find_asic_tools
    find_asic_tools()                       # a missing package is named before anything is built
    summary = _report(designs, args)
    if args.json:
        print_json(summary)
    else:
        from studies.asic_report import markdown
        print(f"\nFO4 delay (OSU 0.35 um, OpenSTA): {summary['fo4_ns'] * 1000:.0f} ps; "
              f"NAND2X1 = {summary['nand2_um2']:g} um^2 = 1 GE")
        print(markdown(summary["results"]))
        for failure in summary["failures"]:
            print(f"FAILED {failure['name']}: {failure['error']}")
    return 1 if summary["failures"] else 0


def _report(designs, args) -> dict:
    from hdl.contracts.characterization import read_characterization
    from studies.asic_report import asic_report
    from studies.cost import load_cost_model
    from sysmodel.switch_timing import shipped_characterization_path
    characterization = read_characterization(shipped_characterization_path()).document
    return asic_report(designs, out=args.out, max_fanout=args.max_fanout, timeout=args.timeout,
                       command="fred " + shlex.join(sys.argv[1:]),
                       characterization=characterization, cost=load_cost_model(), merge=args.merge)
