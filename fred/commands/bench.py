"""``fred bench BENCH [options]``: the speed figures (:mod:`studies.benchmarks`; ``make
bench-*``). ``fred bench BENCH --help`` lists a benchmark's own options:

* ``sysmodel``: collective evaluations, the whole ``fred eval`` and the sweep's rate;
* ``router``: the router's time per flow set at P = 64 (``--write-doc``: docs/routability.md);
* ``verilog``: Verilog generation, lint and Verilator build of Fred_3(P) (docs/switch.md);
* ``fabric``: fabric RTL simulation speed under Verilator, cycles/s (docs/fabric_rtl.md).

The benchmark's options come after its name; the figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fred.cli import print_json
from fred.commands._option_types import OneLineArgumentParser
from fred.commands._option_types import RANGES

HELP = "speed figures: sysmodel, router, verilog or fabric (fred bench BENCH --help)"
BENCHES = ("sysmodel", "router", "verilog", "fabric")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0].replace("``", "") + "."
    parser.epilog = ("benchmarks: sysmodel (model speed), router (routing time; --write-doc), "
                     "verilog (generation/lint/build figures), fabric (fabric RTL cycles/s); "
                     "`fred bench BENCH --help` lists each one's options")
    parser.add_argument("bench", metavar="BENCH", help=" | ".join(BENCHES))
    parser.add_argument("options", nargs=argparse.REMAINDER, metavar="...",
                        help="the benchmark's options")


def _parser(bench: str) -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog=f"fred bench {bench}")
    if bench == "sysmodel":
        parser.description = "system-model speed: collective evaluations, fred eval, sweep rate"
        parser.add_argument("--repeat", type=RANGES["repeat"], default=50,
                            help="evaluations timed per fabric (default 50)")
        parser.add_argument("--no-eval", action="store_true",
                            help="skip the in-process fred eval and sweep figures")
        parser.add_argument("--no-iterations", action="store_true",
                            help="skip the iteration rates (presets, 1,024 and 10,240 GPUs, "
                                 "fast and reference)")
        parser.add_argument("--no-clusters", action="store_true",
                            help="skip the cluster iterations (1,000 and 10,000 NPUs, cold and warm CPU time)")
        parser.add_argument("--no-commands", action="store_true",
                            help="skip the whole commands' times (make eval, fred sweep, fred dse "
                                 "--jobs 2, fred validate, fred --help)")
        parser.add_argument("--min-seconds", type=float, default=1.0,
                            help="CPU seconds each iteration rate is timed for (default 1)")
        parser.add_argument("--reference", action="store_true",
                            help="also time the sweep on the unoptimised reference path")
    elif bench == "router":
        parser.description = ("routing time per flow set on Fred_m(64); with --write-doc also the "
                              "routability tables, written as Markdown")
        parser.add_argument("--count", type=RANGES["count"], default=50,
                            help="flow sets per kind for timing (default 50)")
        parser.add_argument("--samples", type=RANGES["samples"], default=1000,
                            help="random partitions per (P, m) for the table (default 1000)")
        parser.add_argument("--seed", type=RANGES["seed"], default=1)
        parser.add_argument("--write-doc", type=Path, metavar="FILE",
                            help="write the routability report here (docs/routability.md)")
    elif bench == "verilog":
        from studies.benchmarks.verilog_speed import DEFAULT_PORTS, FLAT_PORTS
        parser.description = ("generation time/size/memory of Fred_3(P) fp16 x 4, lint of the "
                              "largest, Verilator build of Fred_3(16) hierarchical vs flat")
        parser.add_argument("--ports", type=RANGES["verilog_port_list"], default=",".join(map(str, DEFAULT_PORTS)),
                            help="P of the hierarchical generations, comma-separated")
        parser.add_argument("--flat-ports", type=RANGES["verilog_port_list_or_none"], default=",".join(map(str, FLAT_PORTS)),
                            help="P of the flat generations for comparison ('' for none)")
        parser.add_argument("--whole-lint", action="store_true",
                            help="also lint the largest P as one file (elaborates every instance)")
        parser.add_argument("--no-flat", action="store_true", help="skip the flat Verilator build")
        parser.add_argument("--no-build", action="store_true", help="skip the Verilator builds")
        parser.add_argument("--json", type=Path, metavar="FILE",
                            help="also write the figures to this file")
    else:
        from cocotb_tests.fabric.run import DEFAULT_SIMULATOR, SIMULATORS
        parser.description = ("fabric RTL simulation speed under Verilator: wafer all-reduce, "
                              "cycles per wall-clock second, and the build time")
        from studies.benchmarks.fabric_speed import MESH_SIZE
        parser.add_argument("--fabric", nargs="*", default=["fred-b", "fred-d"],
                            help="circuit-switch FRED fabrics (default fred-b fred-d; none: "
                                 "--fabric with no name)")
        parser.add_argument("--packet", nargs="*", default=["fred-d"], metavar="FABRIC",
                            help="packet-switch FRED fabrics, one Verilated model under cocotb "
                                 "and, with --simulator lockstep, also cut in two on the lock-step "
                                 "simulator (default fred-d; none: --packet with no name)")
        parser.add_argument("--no-mesh", action="store_true",
                            help="skip the 5x4 mesh fabric (on --simulator's simulator)")
        parser.add_argument("--mesh-size", type=RANGES["flits"], default=MESH_SIZE,
                            help=f"flits per NPU of the mesh's wafer all-reduce (default {MESH_SIZE}, "
                                 f"its largest)")
        parser.add_argument("--size", type=RANGES["flits"], default=20000,
                            help="flits per NPU of the FRED fabrics (default 20000)")
        parser.add_argument("--cflags", default=None,
                            help="C++ optimisation of the model (default: the fabric's, "
                                 "cocotb_tests.fabric.run.default_cflags: -O2 with PGO, else -O1 "
                                 "or -Os); give it as --cflags=-O1")
        parser.add_argument("--verilator-args", default=None,
                            help="further Verilator options, one string (default: the fabric "
                                 "build's, cocotb_tests.fabric.run.VERILATOR_ARGS); give it with "
                                 "'=' since it starts with '-', e.g. --verilator-args=\"--threads 2\"")
        parser.add_argument("--no-pgo", action="store_true",
                            help="compile without profile-guided optimization")
        parser.add_argument("--mesh-pgo", action="store_true",
                            help="the mesh's profile-guided build too (off by default: its "
                                 "instrumented lock-step halves take over 9 minutes each to "
                                 "compile, and its plain lock-step build already runs above "
                                 "100,000 cycles/s on an idle machine, docs/fabric_rtl.md)")
        parser.add_argument("--packet-lockstep-pgo", action=argparse.BooleanOptionalAction,
                            default=True,
                            help="the packet fabrics' lock-step build profile-guided (the default: "
                                 "122,076 cycles/s against 94,571 without on packet Fred-D, an "
                                 "idle machine, docs/fabric_rtl.md; its training runs on the "
                                 "instrumented two-part build, about 9 minutes more when cold); "
                                 "--no-packet-lockstep-pgo builds it plain (-O1); --no-pgo turns "
                                 "off every profile-guided build")
        parser.add_argument("--simulator", choices=SIMULATORS, default=DEFAULT_SIMULATOR,
                            help="lockstep: the fabric in two parts on two cores (the default); "
                                 "cocotb: one model under the cocotb bench (circuit fabrics and "
                                 "the mesh; the packet fabric runs as one model under cocotb "
                                 "either way, and with lockstep on the lock-step simulator too)")
        parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    return parser


def run(args) -> int:
    from hdl.contracts.errors import FredError
    if args.bench not in BENCHES:
        raise FredError(f"unknown benchmark {args.bench!r}; available: {', '.join(BENCHES)}")
    options = _parser(args.bench).parse_args(args.options)   # usage errors exit 2, as argparse does
    command = " ".join(["fred bench", args.bench, *args.options])
    if args.json and args.bench in ("sysmodel", "router", "verilog"):
        raise FredError(f"--json: the {args.bench} benchmark prints its figures"
                        + (" (--json FILE after its name writes them)" if args.bench == "verilog" else ""))
    if args.bench == "sysmodel":
        from studies.benchmarks.sysmodel_speed import run as bench
        bench(options.repeat, end_to_end=not options.no_eval, reference=options.reference,
              iterations=not options.no_iterations, commands=not options.no_commands,
              min_seconds=options.min_seconds, clusters=not options.no_clusters)
    elif args.bench == "router":
        from studies.benchmarks.router_speed import run as bench
        bench(options.count, options.samples, options.seed, options.write_doc)
    elif args.bench == "verilog":
        from studies.benchmarks.verilog_speed import run as bench
        ports = list(options.ports)
        if not ports:
            raise FredError("--ports names no switch size")
        bench(ports, list(options.flat_ports), whole_lint=options.whole_lint,
              flat_build=not options.no_flat, verilator_build=not options.no_build,
              json_path=options.json, command=command)
    else:
        return _fabric(options, command, args.json or options.json)
    return 0


def _fabric(options, command: str, as_json: bool) -> int:
    from studies.benchmarks.fabric_speed import machine_load, measure, measure_mesh, measure_packet
    extra = None if options.verilator_args is None else tuple(options.verilator_args.split())
    figures = measure(options.fabric, options.size, cflags=options.cflags, verilator_args=extra,
                      pgo=False if options.no_pgo else None, simulator=options.simulator,
                      command=command)
    # the one-model fabrics beside the circuit ones (the same options but the simulator's)
    # the packet fabrics as one model and, with the lock-step simulator, cut in two: both rows
    # in one run, under the same load
    packet_simulators = ["cocotb"] + (["lockstep"] if options.simulator == "lockstep" else [])
    figures["rows"] += [measure_packet(name, options.size, cflags=options.cflags, simulator=simulator,
                                       pgo=not options.no_pgo and (simulator == "cocotb"
                                                                   or options.packet_lockstep_pgo))
                        for name in options.packet for simulator in packet_simulators]
    if not options.no_mesh:
        figures["rows"].append(measure_mesh(options.mesh_size, pgo=options.mesh_pgo and not options.no_pgo,
                                            cflags=options.cflags,
                                            simulator=options.simulator))
    if as_json:
        print_json(figures)
        return 0
    print(f"{'fabric':12} {'simulator':>9} {'C++':>4} {'PGO':>3} {'size':>7} {'cycles':>9} "
          f"{'sim s':>8} {'cycles/s':>10} {'build s':>8}  parts waited s")
    for r in figures["rows"]:
        waits = " / ".join(f"{w:.2f}" for w in r["part_wait_s"]) or "-"
        print(f"{r['fabric']:12} {r['simulator']:>9} {r['cflags']:>4} {'yes' if r['pgo'] else 'no':>3} "
              f"{r['size_flits']:>7} {r['cycles']:>9} {r['sim_s']:>8.2f} "
              f"{r['cycles_per_s']:>10.0f} {r['build_s']:>8.1f}  {waits}")
    load = " / ".join(f"{x:.2f}" for x in figures["meta"]["load_average"])
    print(f"({figures['meta']['date']}, {figures['meta']['command']}; load average before the runs "
          f"{load}, after {' / '.join(f'{x:.2f}' for x in machine_load())} (1 / 5 / 15 min; the "
          f"lock-step rows need both cores free))")
    return 0
