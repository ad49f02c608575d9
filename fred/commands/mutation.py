"""``fred mutation``: the mutation score of the switch benches (single-line mutants of the
generated Verilog of a small switch, each run through the benches;
:mod:`studies.verification.mutation`, ``make mutation``, docs/verification.md)."""

from __future__ import annotations

import argparse
from fred.commands._option_types import RANGES

HELP = "mutation score of the switch benches: mutants of the generated Verilog, survivors listed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from studies.verification.mutation import (DEFAULT_COUNT, DEFAULT_SEED, LOCK, MIN_TIMEOUT,
                                               TIMEOUT_FACTOR)
    parser.add_argument("--seed", type=RANGES["seed"], default=DEFAULT_SEED,
                        help=f"seed of the mutant choice (default {DEFAULT_SEED})")
    parser.add_argument("--count", type=RANGES["count"], default=DEFAULT_COUNT,
                        help=f"mutants to make (default {DEFAULT_COUNT})")
    parser.add_argument("--design", help="JSON of the switch parameters (default Fred_2(4) int32)")
    parser.add_argument("--only", help="mutant indices to run, e.g. 0-9,17 (default all)")
    parser.add_argument("--jobs", type=RANGES["jobs"], default=1, help="mutants run at once (default 1)")
    parser.add_argument("--batch", type=RANGES["count"], default=1,
                        help="with --jobs 1: mutants run per hold of the lock (default 1; each "
                             "mutant holds it for 10-20 s, a batch of 4 about a minute)")
    parser.add_argument("--timeout", type=RANGES["timeout_whole_s"], default=None,
                        help=f"seconds per mutant (default {TIMEOUT_FACTOR} x the original's "
                             f"build and run, at least {MIN_TIMEOUT})")
    parser.add_argument("--lock", default=LOCK, help="flock file taken per mutant ('' = none)")
    parser.add_argument("--out", default="build/mutation",
                        help="folder of the builds and results (default build/mutation)")
    parser.add_argument("--keep", action="store_true", help="keep each mutant's build")
    parser.add_argument("--list", action="store_true", help="print the mutants and stop")
    parser.add_argument("--skip-original", action="store_true",
                        help="do not run the unmutated design first")
    parser.add_argument("--table", action="store_true",
                        help="print the outcomes saved so far as a Markdown table and stop")
    parser.add_argument("--summary", action="store_true",
                        help="print the score of the outcomes saved so far and stop")
    parser.add_argument("--rerun", action="store_true",
                        help="with --only: run those mutants again even if OUT/partial.json "
                             "has their outcome (e.g. after a new check); the earlier outcome "
                             "is kept under 'previous'")
    parser.add_argument("--resume", action="store_true",
                        help="keep the outcomes saved by an interrupted campaign in OUT/partial.json")


def run(args) -> int:
    import json

    from hdl.contracts.errors import FredError
    from studies.verification.mutation import campaign
    if args.json:
        raise FredError("--json: the campaign writes its outcomes as JSON to OUT/results.json")
    if args.count < 1:
        raise FredError(f"--count must be at least 1, not {args.count}")
    if args.design is not None:
        try:
            design = json.loads(args.design)
        except json.JSONDecodeError as exc:
            raise FredError(f"--design is not JSON: {exc}") from None
        if not isinstance(design, dict):
            raise FredError("--design must be a JSON object of switch parameters")
    return campaign(args)
