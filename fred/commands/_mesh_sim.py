"""``fred fabric-sim --fabric mesh``: an all-reduce or multicast on the RTL mesh fabric (Verilator) and on
the system model of the same mesh (docs/mesh_rtl.md, "The mesh fabric"). Not a subcommand of
its own: ``fabric_sim.run`` hands the mesh here."""

from __future__ import annotations

from fred.cli import print_json
from hdl.contracts.errors import FredError

__all__ = ["run_mesh"]


def run_mesh(args) -> int:
    from studies.mesh_case import build_mesh_case, run_mesh_case
    if args.npu_latency is not None or args.uplink_latency is not None:
        raise FredError("--npu-latency and --uplink-latency are FRED fabric options; the mesh's "
                        "link latency is MeshFabricSpec.link_latency")
    case = build_mesh_case(op=args.op, size=args.size, group=args.group, strategy=args.strategy,
                           dim=args.dim, characterization=args.characterization, algorithm=args.algorithm,
                           dtype=args.dtype or "int32")
    if not args.model_only:
        case = run_mesh_case(case, seed=args.seed, sink_backpressure=args.backpressure,
                             watchdog_cycles=args.watchdog)
    if args.json:
        print_json(case.to_dict())
        return 0
    spec, est = case.spec, case.estimate
    a, b = spec.link_rate
    print(f"mesh: {spec.rows} x {spec.cols} NPUs, X-Y / Y-X routers, links {a}/{b} flit/cycle "
          f"(the NPU port 1), wire latency {spec.link_latency} cycle(s), {spec.dtype}")
    if case.io is not None:
        _print_io(case)
    else:
        split = f", rows-first chunk {case.split:.3f} of the buffer" if est.algorithm == "hierarchical-2d" else ""
        print(f"request: {args.op} {case.label}, {case.size_flits} flits per NPU, {len(case.groups)} "
              f"group(s), algorithm {est.algorithm} (the model's choice, for both sides{split})")
    print(f"model: {est.cycles:.1f} cycles = busiest link {est.bandwidth_cycles:.1f} "
          f"({est.busiest_link_flits:g} flits) + latency {est.cycles - est.bandwidth_cycles:.1f}")
    if case.rtl is not None:
        rtl = case.rtl
        print(f"RTL:   {rtl.cycles} cycles, every flit checked, 0 errors; {rtl.cycles_per_s:,.0f} "
              f"fabric cycles/s (cocotb, simulation {rtl.sim_s:.2f} s)")
        print(f"RTL / model = {case.ratio:.3f}")
    return 0


def _print_io(case) -> None:
    """The io-load request and the per-controller streaming rate it implies (1 flit/cycle is the
    NPU's port, 3 TBps on the paper's platform: docs/mesh_rtl.md)."""
    io, est = case.io, case.estimate
    stripe = case.size_flits // io.controllers
    a, b = io.io_rate
    sending = case.io_op in ("io-store", "io-write")
    route = "unicasts" if case.io_op in ("io-write", "io-read") else f"trees {est.algorithm}"
    print(f"request: {case.io_op} wafer, {case.size_flits} flits {'from' if sending else 'to'} "
          f"every NPU = {io.controllers} controllers x "
          f"{stripe}-flit stripes, controller links {a}/{b} flit/cycle, {route}")
    rates = [("model", est.cycles)] + ([("RTL", case.rtl.cycles)] if case.rtl is not None else [])
    # a spill's controller moves one stripe per NPU; a tree's controller its one stripe
    moved = stripe * (io.mesh.npus if case.io_op in ("io-write", "io-read") else 1)
    print("per-controller rate: " + ", ".join(f"{name} {moved / cycles:.4f} flit/cycle" for name, cycles in rates)
          + f" (busiest link alone: {moved / est.bandwidth_cycles:.4f}); x 3000 GBps, the paper's NPU port: "
          + ", ".join(f"{name} {3000 * moved / cycles:.1f} GBps" for name, cycles in rates))
