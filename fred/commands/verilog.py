"""``fred verilog``: write Verilog for one design, or for every design (``make verilog``).

Hierarchical Verilog (``hdl.emit.verilog.to_verilog``: one module per distinct component) unless
``--flat``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fred.cli import print_json
from fred.commands._option_types import VERILOG_PARAM_RANGES, output_path, verilog_identifier
from hdl.contracts.errors import FredError
from hdl.designs.registry import DESIGNS, get_design

HELP = "write Verilog for a design (--unit NAME with its options, or --all)"
DEFAULT_UNIT = "switch"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--unit", default=None,
                        help=f"design to emit: {', '.join(DESIGNS)} (default: {DEFAULT_UNIT})")
    parser.add_argument("--all", action="store_true",
                        help="emit every design with its default parameters into the folder -o")
    parser.add_argument("--list", action="store_true", help="list designs and their parameters")
    parser.add_argument("--flat", action="store_true",
                        help="Amaranth's flat output (one module per instance) instead of hierarchical "
                             "Verilog (one module per distinct component); for comparisons")
    parser.add_argument("-o", "--output", type=Path,
                        help="output file (a folder with --all); '-' or none prints to stdout")
    parser.add_argument("--name", type=verilog_identifier, default=None, metavar="PREFIX",
                        help="prefix the top module and every submodule with PREFIX, so several "
                             "generated designs (e.g. Fred_3(12) and Fred_3(10)) coexist in one "
                             "design: --name chipA_ gives top chipA_fred_switch (docs/switch.md)")
    seen = {}
    for design in DESIGNS.values():
        for name, param in design.params.items():
            if name in seen:
                continue
            seen[name] = param
            bounded = VERILOG_PARAM_RANGES.get(name) if param.type is not str else None
            parser.add_argument("--" + name.replace("_", "-"), dest=name, type=bounded or param.type,
                                default=None, metavar=name.upper(), help=param.help)


def _given(args) -> dict:
    names = {name for design in DESIGNS.values() for name in design.params}
    return {name: getattr(args, name) for name in sorted(names) if getattr(args, name) is not None}


def run(args) -> int:
    args.name = args.name or ""
    if args.list:
        listing = {unit: {"top": d.top, "description": d.description,
                          "params": {n: p.default for n, p in d.params.items()}}
                   for unit, d in DESIGNS.items()}
        if args.json:
            print_json(listing)
        else:
            for unit, entry in listing.items():
                params = " ".join(f"--{n.replace('_', '-')} {v}" for n, v in entry["params"].items())
                print(f"{unit:16s} {entry['top']:20s} {entry['description']}  [{params}]")
        return 0

    from hdl.emit.verilog import to_verilog

    if args.all:
        if args.unit or _given(args):
            raise FredError("--all emits every design with its defaults; drop --unit and design options")
        if args.output is None:
            raise FredError("--all needs -o FOLDER")
        output_path(args.output, "-o", folder=True)
        written = []
        for design in DESIGNS.values():
            path = args.output / f"{args.name}{design.top}.v"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(to_verilog(design.build(), name=args.name + design.top, flat=args.flat,
                                       prefix=args.name))
            written.append({"unit": design.unit, "top": design.top, "path": str(path)})
        if args.json:
            print_json({"written": written})
        else:
            for entry in written:
                print(f"wrote {entry['path']} ({entry['unit']})")
        return 0

    design = get_design(args.unit or DEFAULT_UNIT)   # names the available units if unknown
    unit = design.unit
    params = design.resolve(_given(args))
    output_path(args.output, "-o")
    top = args.name + design.top
    text = to_verilog(design.build(**params), name=top, flat=args.flat, prefix=args.name)
    if args.output is None or str(args.output) == "-":
        sys.stdout.write(text)
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    if args.json:
        print_json({"unit": unit, "top": top, "params": params, "path": str(args.output)})
    else:
        print(f"wrote {args.output} (top {top}, {unit} {params})")
    return 0
