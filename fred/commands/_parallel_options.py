"""Options of the commands whose points can run elsewhere (``fred sweep``, ``fred dse``):
``--jobs``, ``--scheduler`` and ``--cache`` (see :mod:`fred.parallel`)."""

from __future__ import annotations

import argparse
from fred.commands._option_types import RANGES


def add_parallel_arguments(parser: argparse.ArgumentParser, *, cache_default: str | None = None) -> None:
    parser.add_argument("--jobs", type=RANGES["jobs"], default=1, metavar="N",
                        help="run the points in a local pool of N processes (0: one per CPU; default 1: "
                             "in this process)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run the points on the Dask distributed cluster whose scheduler is at "
                             "ADDRESS (e.g. tcp://10.0.0.1:8786; README: 'Distributed runs')")
    parser.add_argument("--cache", default=cache_default, metavar="FILE",
                        help="JSON-lines file of computed points: read before the run (points already "
                             "in it are not recomputed), appended as points finish"
                             + (f" (default: {cache_default})" if cache_default else " (default: none)"))


def parallel_settings(args) -> dict:
    """``run_points`` keyword arguments from the options (errors name the option)."""
    from fred.parallel import parse_jobs
    from hdl.contracts.errors import FredError
    if args.scheduler is not None and not args.scheduler.strip():
        raise FredError("--scheduler needs an address, e.g. tcp://host:8786")
    return {"jobs": parse_jobs(args.jobs), "scheduler": args.scheduler, "cache": args.cache}
