"""Options and output shared by the system-model commands (``fred collective``, ``fred eval``,
``fred sweep``): the platform file, the switch characterization, the compute what-if, the
overlap policy, and the statement of where the switch timing came from."""

from __future__ import annotations

import argparse
from fred.commands._option_types import RANGES


def add_platform_arguments(parser: argparse.ArgumentParser) -> None:
    """``--platform`` and ``--characterization`` (every model command)."""
    parser.add_argument("--platform", default=None, help="platform TOML (default: shipped paper platform)")
    parser.add_argument("--characterization", default=None, metavar="PATH",
                        help="measured switch timing, a JSON file in the format of "
                             "docs/characterization-schema.md (default: the characterization "
                             "shipped with the package, data/characterization.json)")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The platform options plus ``--compute-scale`` and ``--no-overlap`` (``eval``, ``sweep``)."""
    add_platform_arguments(parser)
    parser.add_argument("--compute-scale", type=RANGES["compute_scale"], default=1.0, metavar="K",
                        help="NPU compute K times faster (peak FLOPS and HBM bandwidth x K; the "
                             "diagnostic of docs/sysmodel.md; default 1)")
    parser.add_argument("--no-overlap", action="store_true",
                        help="serialised mode: communication never overlaps compute (brackets the "
                             "paper's unstated overlap policy; docs/sysmodel.md)")


def model_platform(args):
    """The platform the options describe (errors name the option)."""
    from hdl.contracts.errors import FredError
    from sysmodel.platform import default_platform, load_platform
    if args.platform is None and args.characterization is None:
        platform = default_platform()
    else:
        platform = load_platform(args.platform, characterization=args.characterization)
    scale = getattr(args, "compute_scale", 1.0)
    if not scale > 0:
        raise FredError(f"--compute-scale must be > 0, got {scale}")
    return platform.with_compute_scale(scale)


def switch_timing_json(platform) -> dict:
    """``{"l1": ..., "l2": ...}``: each level's switch timing as JSON (its chiplet's)."""
    return {level: platform.switch_at(level).to_dict() for level in ("l1", "l2")}


def switch_timing_text(platform_or_switch) -> str:
    """Lines for the console: where the switch timing came from, and the figures used (one
    line per level when the platform times L1 and L2 by their own chiplets)."""
    levels = (("L1", platform_or_switch.switch_at("l1")), ("L2", platform_or_switch.switch_at("l2"))) \
        if hasattr(platform_or_switch, "switch_at") else (("", platform_or_switch),)
    switch = levels[0][1]
    origin = "shipped with the package" if switch.shipped else "named explicitly, not the shipped one"
    measured = f", measured by {switch.generated_by}" if switch.generated_by else ""
    lines = [f"switch timing: {switch.source} ({origin}{measured})"]
    if len(levels) == 2 and levels[0][1] == levels[1][1]:
        levels = (("L1 and L2", switch),)
    for level, s in levels:
        name = f"{level} {s.design}: " if s.design else (f"{level}: " if level else "")
        lines.append(f"  {name}first-flit latency {s.first_flit_latency_cycles:g} cycles, phase switch "
                     f"{s.phase_switch_cycles:g} cycles, configuration load {s.config_load_cycles:g} "
                     f"cycles per phase, {s.throughput_flits_per_cycle_per_port:g} flit/cycle/port, "
                     f"{s.flit_bytes} B flits, {s.clock_mhz:g} MHz")
    return "\n".join(lines)
