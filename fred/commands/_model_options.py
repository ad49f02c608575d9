"""Options shared by the system-model commands (``fred eval``, ``fred sweep``): the platform
file, the compute what-if and the overlap policy."""

from __future__ import annotations

import argparse


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", default=None, help="platform TOML (default: shipped paper platform)")
    parser.add_argument("--compute-scale", type=float, default=1.0, metavar="K",
                        help="NPU compute K times faster (peak FLOPS and HBM bandwidth x K; the "
                             "diagnostic of docs/sysmodel.md; default 1)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="serialised mode: communication never overlaps compute (brackets the "
                             "paper's unstated overlap policy; docs/sysmodel.md)")


def model_platform(args):
    """The platform the options describe (errors name the option)."""
    from hdl.base.errors import FredError
    from sysmodel.platform import default_platform, load_platform
    platform = load_platform(args.platform) if args.platform else default_platform()
    if not args.compute_scale > 0:
        raise FredError(f"--compute-scale must be > 0, got {args.compute_scale}")
    return platform.with_compute_scale(args.compute_scale)
