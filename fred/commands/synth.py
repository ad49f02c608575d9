"""``fred synth``: synthesis report of the reduction unit on a Lattice ECP5 LFE5U-85F, yosys
``synth_ecp5`` and ``nextpnr-ecp5`` per (format, lanes) (:mod:`studies.synth_report`;
``make synth``, docs/synthesis.md). Needs the ``synth`` extra."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._option_types import RANGES

HELP = "ECP5 synthesis report of the reduction unit per format and lanes (needs the synth extra)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dtypes", default="fp16,bf16,fp32,int32",
                        help="element formats, comma-separated (default fp16,bf16,fp32,int32)")
    parser.add_argument("--lanes", default="1,4", help="lane counts, comma-separated (default 1,4)")
    parser.add_argument("--freq", type=RANGES["freq_mhz"], default=250.0, help="nextpnr target, MHz (default 250)")
    parser.add_argument("--seeds", default="1,2,3",
                        help="nextpnr placement seeds, comma-separated (default 1,2,3)")
    parser.add_argument("--jobs", type=RANGES["jobs"], default=1, help="points synthesized at once (default 1)")
    parser.add_argument("--out", default="results/synth",
                        help="folder of the logs, netlists and summary.json (default results/synth)")


def _ints(option: str, text: str) -> list[int]:
    from hdl.contracts.errors import FredError
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise FredError(f"{option} takes comma-separated integers, not {text!r}") from None
    if any(v < 1 for v in values):
        raise FredError(f"{option} values must be at least 1: {text!r}")
    return values


def run(args) -> int:
    from hdl.contracts.dtypes import DTYPES
    from hdl.contracts.errors import FredError
    from studies.synth_report import markdown, synth_report
    dtypes = args.dtypes.split(",")
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise FredError(f"unknown format {', '.join(unknown)} in --dtypes; available: {', '.join(DTYPES)}")
    points = [(d, n) for d in dtypes for n in _ints("--lanes", args.lanes)]
    summary = synth_report(points, out=args.out, freq=args.freq, seeds=_ints("--seeds", args.seeds),
                           jobs=args.jobs)
    if args.json:
        print_json(summary)
    else:
        print()
        print(markdown(summary["results"]))
    return 1 if summary["failures"] else 0
