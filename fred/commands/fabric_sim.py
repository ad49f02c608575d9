"""``fred fabric-sim``: one collective on the RTL fabric under Verilator and on the system model
of the same fabric, side by side (docs/fabric_rtl.md; docs/fabric_validation.md)."""

from __future__ import annotations

import argparse

from fred.cli import print_json
from fred.commands._option_types import RANGES

HELP = "run a collective on the RTL fabric (Verilator) and on the system model; print both"


def add_fabric_arguments(parser: argparse.ArgumentParser) -> None:
    """Fabric options shared with ``fred fabric-validate``."""
    parser.add_argument("--npu-latency", type=RANGES["cycles"], default=None, metavar="CYCLES",
                        help="NPU-L1 link latency in cycles (default: hdl.contracts.fabric's)")
    parser.add_argument("--uplink-latency", type=RANGES["cycles"], default=None, metavar="CYCLES",
                        help="L1-L2 link latency in cycles (default: hdl.contracts.fabric's)")
    parser.add_argument("--dtype", default=None, help="element format (default: hdl.contracts.fabric's, int32)")
    parser.add_argument("--backpressure", type=RANGES["probability"], default=0.0, metavar="P",
                        help="probability an NPU sink refuses a flit in a cycle (default 0)")
    parser.add_argument("--seed", type=RANGES["seed"], default=0, help="seed of the data and the backpressure")
    parser.add_argument("--watchdog", type=RANGES["watchdog"], default=None, metavar="CYCLES",
                        help="end a run that makes no progress for this many cycles "
                             "(default: the harness's)")
    parser.add_argument("--characterization", default=None, metavar="PATH",
                        help="measured switch timings the model uses (default: the shipped "
                             "data/characterization.json)")
    parser.add_argument("--simulator", choices=("lockstep", "cocotb"), default=None,
                        help="lockstep: the fabric in two Verilated parts, one per core, in lock "
                             "step (the circuit fabric's default); cocotb: one Verilated model "
                             "under the cocotb bench (the packet fabric's default; the same "
                             "cycles, slower with both cores free)")


def spec_overrides(args) -> dict:
    out = {}
    for option, field in (("npu_latency", "npu_link_latency"), ("uplink_latency", "uplink_latency"),
                          ("dtype", "dtype")):
        value = getattr(args, option)
        if value is not None:
            out[field] = value
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from hdl.contracts.fabric import FABRIC_OPS, FABRICS, IO_OPS
    parser.add_argument("--fabric", required=True, type=str.lower, choices=(*FABRICS, "mesh"),
                        help="a FRED variant, or mesh: the 2D-mesh baseline (docs/mesh_rtl.md)")
    # io-load: the mesh's weight streaming from its edge I/O controllers (docs/mesh_rtl.md);
    # io-broadcast / io-reduce: the FRED packet fabric's I/O controllers (docs/fabric_rtl.md)
    parser.add_argument("--op", default=None,
                        choices=(*FABRIC_OPS, *IO_OPS,
                                 *(op for op in ("io-load", "io-store", "io-write", "io-read")
                                   if op not in FABRIC_OPS + IO_OPS)),
                        help="a collective, or an I/O op: on FRED io-broadcast (weight streaming: "
                             "a controller multicasts to its group) and io-reduce (gradient "
                             "reduce-out: the group reduced into its controller), one controller "
                             "per group on the L1s, on the packet fabric, and io-load / io-store "
                             "with --group wafer: the mesh's striped request, all 18 controllers at "
                             "once on the packet fabric (Fred-A/C's chains, Fred-B's trees on shared "
                             "stored flows); on the mesh io-load, "
                             "io-store (gradient reduce-out to the edge controllers), io-write "
                             "and io-read (a checkpoint spill: every NPU's own stripe to / from "
                             "each controller, unicasts); required "
                             "unless --concurrent")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--group", help="'wafer': one collective over every NPU")
    where.add_argument("--strategy", help="e.g. MP2-DP5-PP2: every group of --dim at once")
    from studies.concurrent_case import SCENARIOS
    where.add_argument("--concurrent", choices=tuple(SCENARIOS), type=str.lower,
                       help="concurrent traffic classes on the packet fabric, each on its VC "
                            "(Fred-B/D: in-switch collectives; Fred-A/C: rings and chains as online unicasts, "
                            "each NPU's packets on its class's VC; I/O on DP's VC): "
                            + "; ".join(f"{k}: {v}" for k, v in SCENARIOS.items())
                            + "; each class's completion and latency, together and alone, RTL "
                              "and model (MP > PP > DP priority)")
    parser.add_argument("--load-size", type=RANGES["flits"], default=None, metavar="FLITS",
                        help="--concurrent: the load's flits per NPU (the DP all-reduce; in "
                             "dp-under-io the I/O stream) (default: --size)")
    parser.add_argument("--delay", type=RANGES["cycles"], default=0, metavar="CYCLES",
                        help="--concurrent mp-under-dp / dp-under-io: cycles after the start "
                             "before the MP / DP class sends (default 0)")
    parser.add_argument("--dim", choices=("mp", "dp", "pp"), type=str.lower,
                        help="the dimension of --strategy whose groups communicate")
    parser.add_argument("--size", required=True, type=RANGES["flits"], metavar="FLITS",
                        help="flits: all-reduce, per NPU; reduce, from every member; multicast, "
                             "to every destination")
    parser.add_argument("--algorithm", default=None,
                        choices=("in-switch", "ring", "hierarchical", "chain", "tree-xy", "tree-yx", "tree-split"),
                        help="the algorithm both sides run (default: the model's own choice; "
                             "tree-*: the mesh io-load's broadcast trees)")
    parser.add_argument("--switch", choices=("circuit", "packet"), default=None,
                        help="the RTL fabric's switches: circuit (default, packet for I/O ops: fred_switch with phase "
                             "sequencers) or packet (fred_packet_switch selecting phases from "
                             "packet headers; in-switch collectives, and rings and chains as "
                             "online-routed unicasts; one Verilated model)")
    parser.add_argument("--model-only", action="store_true",
                        help="print the model's side without building the RTL")
    add_fabric_arguments(parser)


def run(args) -> int:
    if args.fabric == "mesh":
        from fred.commands._mesh_sim import run_mesh
        return run_mesh(args)
    if args.concurrent:
        from fred.commands._concurrent_sim import run_concurrent
        return run_concurrent(args, spec_overrides(args))
    from hdl.contracts.errors import FredError
    if args.op is None:
        raise FredError("--op is required (or --concurrent SCENARIO)")
    if args.op in STRIPED_OPS:
        return run_striped(args)
    from hdl.contracts.fabric import IO_OPS
    from studies.fabric_case import build_case, run_case
    if args.switch is None:
        args.switch = "packet" if args.op in IO_OPS else "circuit"
    request = dict(fabric=args.fabric, op=args.op, size=args.size, group=args.group,
                   strategy=args.strategy, dim=args.dim, characterization=args.characterization,
                   algorithm=args.algorithm, **spec_overrides(args))
    if args.switch == "packet":
        # the model's algorithm, or the ring where it chose one the packet fabric does not run
        from studies.packet_fabric_case import build_packet_case
        case = build_packet_case(**request)
    else:
        case = build_case(switch=args.switch, **request)
    if not args.model_only and args.switch == "packet":
        from studies.packet_fabric_case import run_packet_case
        case = run_packet_case(case, seed=args.seed, sink_backpressure=args.backpressure,
                               watchdog_cycles=args.watchdog, simulator=args.simulator or "cocotb")
    elif not args.model_only:
        case = run_case(case, seed=args.seed, sink_backpressure=args.backpressure,
                        watchdog_cycles=args.watchdog, simulator=args.simulator or "lockstep")
    if args.json:
        print_json(case.to_dict())
        return 0
    spec, est = case.spec, case.estimate
    print(f"{spec.name}: {spec.npus} NPUs, {spec.l1_count} x L1 Fred_{spec.middle}({spec.l1_ports}), "
          f"L2 {spec.l2_description}, uplink {spec.uplink_bandwidth} flit/cycle per L1, "
          f"links {spec.npu_link_latency}/{spec.uplink_latency} cycles, {spec.dtype} x {spec.lanes}"
          + (f", {spec.io_controllers} I/O controller(s) at {spec.io_rate} flit/cycle"
             if spec.io_controllers else ""))
    chosen = "the model's own choice" if case.algorithm is None else "as asked"
    print(f"request: {case.request.label}, {case.request.size_flits} flits, "
          f"{len(case.request.collectives)} concurrent collective(s), algorithm {est.algorithm} "
          f"({chosen}, for both sides)")
    turns = (f" (of which {est.ring_turn_cycles:.1f}: configured rings taking turns on an uplink's ports, "
             f"one after another)" if est.ring_turn_cycles else "")
    print(f"model: {est.cycles:.1f} cycles = busiest link {est.bandwidth_cycles:.1f} "
          f"({est.busiest_link}, {est.busiest_link_flits:g} flits) + hop latency "
          f"{est.latency_cycles:.1f}{turns} + phases {est.phase_cycles:.1f} ({est.phases} phase(s) in turn: "
          f"the first's selects overlap the first hops, each later one a select and the wait for the previous phase)")
    if case.rtl is not None:
        rtl = case.rtl
        print(f"RTL ({args.switch} switches): {rtl.cycles} cycles; {rtl.flits_checked} flits received and checked, "
              f"0 errors; {rtl.cycles_per_s:,.0f} fabric cycles/s on the {rtl.simulator} simulator "
              f"(build {rtl.build_s:.1f} s, simulation {rtl.sim_s:.2f} s)")
        print(f"RTL / model = {case.ratio:.3f}")
    return 0


#: ``--op`` values run on a FRED fabric as the mesh's striped I/O request (every controller at
#: once, each a stripe to / from every NPU: ``studies.mesh_validation.StripeIoCase``).
STRIPED_OPS = ("io-load", "io-store")


def run_striped(args) -> int:
    """``--op io-load|io-store --group wafer`` on a FRED fabric: the striped request of
    ``--size`` flits per NPU (18 whole stripes) on the packet fabric with the 18 controllers under
    Verilator, against the model of the same platform (``fred_io_model_cycles``): Fred-A/C's
    chains, Fred-B/D's trees as shared stored flows. FredError, before anything is built, for
    another group, the circuit switch, a fabric option the striped request does not take, or a
    fabric whose striped request is not built (``STRIPE_IO_FABRICS``: all four are)."""
    from hdl.contracts.errors import FredError
    from studies.mesh_validation import IO_CASES, STRIPE_IO_FABRICS, StripeIoCase, fred_io_model_cycles
    label = f"wafer {args.op}"
    if args.group != "wafer":
        raise FredError(f"{args.op} on {args.fabric} is the striped request over every NPU: --group wafer, "
                        f"got {args.group or args.strategy!r}")
    if args.switch == "circuit":
        raise FredError(f"{args.op} on {args.fabric} runs on the packet fabric (--switch packet)")
    if spec_overrides(args) or args.backpressure or args.algorithm:
        raise FredError(f"{args.op} on {args.fabric}: the striped request runs the wafer as built "
                        f"(no --npu-latency, --uplink-latency, --dtype, --backpressure or --algorithm)")
    if label not in STRIPE_IO_FABRICS.get(args.fabric, ()):
        raise FredError(f"{args.op} on {args.fabric} as the striped request is not built (built: "
                        + ", ".join(f"{f} {', '.join(c.split()[1] for c in cs)}" for f, cs in STRIPE_IO_FABRICS.items())
                        + "; docs/fabric_rtl.md, \"Striped I/O: every controller at once\")")
    model = fred_io_model_cycles(args.fabric, args.size, op=IO_CASES[label],
                                 characterization=args.characterization, switch="packet")
    out = {"fabric": args.fabric, "op": args.op, "size_flits": args.size, "controllers": 18,
           "model_cycles": model}
    if not args.model_only:
        row = StripeIoCase(args.fabric, label, args.size, args.characterization).run_row()
        out.update(rtl_cycles=row.rtl_cycles, ratio=row.ratio, flits_checked=row.flits_checked,
                   algorithm=row.algorithm, cycles_per_s=row.cycles_per_s)
    if args.json:
        print_json(out)
        return 0
    print(f"{args.fabric} {args.op} striped over 18 controllers, {args.size} flits per NPU: model "
          f"{model:.1f} cycles (the packet platform)")
    if "rtl_cycles" in out:
        print(f"RTL (packet switches, {out['algorithm']}): {out['rtl_cycles']} cycles; {out['flits_checked']} "
              f"flits received and checked, 0 errors; RTL / model = {out['ratio']:.3f}")
    return 0
