"""Options and checks shared by ``fred sweep``, ``fred dse`` and ``fred eval`` when ``--platform``
names a cluster file (docs/cluster.md, "The other commands on a cluster"): the cross-wafer
all-reduce's chunk schedule and chunks, the strategy mapping, and the refusal of options that
mean nothing on a cluster."""

from __future__ import annotations

import argparse

from fred.commands._option_types import RANGES
from hdl.contracts.errors import FredError


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dimension-schedule``, ``--chunks``, ``--mapping`` (cluster platforms only)."""
    from sysmodel.multidim_collectives import DEFAULT_CHUNKS, SCHEDULES
    parser.add_argument("--dimension-schedule", choices=SCHEDULES, default=None,
                        help="cluster platforms: each chunk's dimension order in the cross-wafer "
                             "all-reduce, the file's (fixed) or Themis (default themis; fred eval: both)")
    parser.add_argument("--chunks", type=RANGES["chunks"], default=None,
                        help=f"cluster platforms: chunks of the cross-wafer all-reduce (default {DEFAULT_CHUNKS})")
    parser.add_argument("--mapping", default=None, metavar="DIM=dp|pp,...",
                        help="cluster platforms: what each outer dimension carries across wafers, "
                             "data (dp, the default) or pipeline (pp) parallelism, e.g. rack=pp,spine=dp")


_CLUSTER_OPTIONS = ("dimension_schedule", "chunks", "mapping")


def cluster_spec_of(args, *, fabric: str | None = None) -> dict | None:
    """The cluster the options name (:func:`studies.cluster_points.cluster_spec`), or None when
    ``--platform`` is a wafer platform (then the cluster-only options are errors)."""
    from sysmodel.cluster_training import parse_mapping
    from sysmodel.dimensions import is_cluster_file
    from sysmodel.multidim_collectives import DEFAULT_CHUNKS
    if args.platform is None or not is_cluster_file(args.platform):
        for name in _CLUSTER_OPTIONS:
            if getattr(args, name, None) is not None:
                raise FredError(f"--{name.replace('_', '-')} applies to a cluster platform (a file "
                                f"listing [[dimensions]])")
        return None
    from studies.cluster_points import cluster_spec
    if not args.compute_scale > 0:
        raise FredError(f"--compute-scale must be > 0, got {args.compute_scale}")
    return cluster_spec(args.platform, characterization=args.characterization,
                        compute_scale=args.compute_scale, fabric=fabric,
                        schedule=args.dimension_schedule or "themis",
                        chunks=DEFAULT_CHUNKS if args.chunks is None else args.chunks,
                        mapping=parse_mapping(args.mapping))


def refuse_on_cluster(args, command: str, options: dict) -> None:
    """Raise for the first option in ``options`` (attribute -> (its default, why it means
    nothing on a cluster)) that is not at its default."""
    for name, (default, why) in options.items():
        if getattr(args, name, default) != default:
            raise FredError(f"fred {command}: --{name.replace('_', '-')} has no meaning on a cluster "
                            f"platform ({args.platform}): {why}")


#: the point-runner options (``--jobs``, ``--scheduler``, ``--cache``): a cluster's strategies run here
POINT_RUNNER_OPTIONS = {"jobs": (1, "a cluster's points run in this process"),
                        "scheduler": (None, "a cluster's points run in this process")}
