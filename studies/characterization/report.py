"""Assemble ``data/characterization.json`` and ``docs/characterization.md`` (+ PNG) from measured points.

:func:`build_document` turns the timing points (:func:`studies.characterization.timing.measure_point`)
and cost records (:func:`studies.characterization.cost.measure_cost`) into the JSON document of
``docs/characterization-schema.md``: the ``switch`` summary the system model reads, plus the
per-point detail. :func:`write_report` renders the Markdown report and its plot. Points of the
requested grid that were not measured are listed with the reason, never filled in.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from hdl.contracts.characterization import SCHEMA_ID, parse_characterization, point_name
from hdl.contracts.errors import FredError
from studies.report import Column, check_writable, figure, fmt_number, save_png, table_lines, write_text

__all__ = ["summary_point", "summarize_point", "build_document", "write_report", "composed_cost",
           "composed_fmax", "microswitch_counts", "switch_block", "switch_blocks", "chiplet_cost"]

#: The system model's clock and flit size are not properties of this RTL (an ECP5 Fmax is not
#: a 15 nm ASIC clock; the RTL flit is lanes x dtype bits, the paper's 512 B): kept at the
#: documented defaults of sysmodel/switch_timing.py and marked as such in the JSON.
MODEL_CLOCK_MHZ = 1000.0
MODEL_FLIT_BYTES = 512


def summarize_point(point: dict) -> dict:
    """Per-point summary: figures over every traffic class, without and with backpressure."""
    rows = point["segments"]
    free = [r for r in rows if r["backpressure"] == 0]
    loaded = [r for r in rows if r["backpressure"] > 0]
    # phase switches that drained a previous phase (not the first select of the run)
    switches = [r for i, r in enumerate(rows) if i > 0 and r["drain_backpressure"] == 0]
    by_class = {}
    for r in rows:
        key = (r["traffic"], r["backpressure"] > 0)
        c = by_class.setdefault(key, {"phases": r["phases"], "latency": [], "throughput": [],
                                      "input_throughput": []})
        c["latency"] += [r["first_flit_latency_min"], r["first_flit_latency_max"]]
        c["throughput"].append(r["throughput_min"])
        c["input_throughput"].append(r["input_throughput_min"])
    classes = {}
    for (traffic, bp), c in by_class.items():
        entry = classes.setdefault(traffic, {"phases": c["phases"]})
        tag = "backpressure" if bp else "free"
        entry[f"latency_min_{tag}"] = min(c["latency"])
        entry[f"latency_max_{tag}"] = max(c["latency"])
        entry[f"throughput_min_{tag}"] = round(min(c["throughput"]), 4)
        entry[f"input_throughput_min_{tag}"] = round(min(c["input_throughput"]), 4)
    return {
        "ports": point["ports"], "middle": point["middle"], "dtype": point["dtype"],
        "latency_property": point["latency_property"],
        "first_flit_latency_cycles": max(r["first_flit_latency_max"] for r in free),
        "first_flit_latency_min_cycles": min(r["first_flit_latency_min"] for r in free),
        "throughput_flits_per_cycle_per_port": min(r["throughput_min"] for r in free),
        "throughput_with_backpressure_min": round(min(r["throughput_min"] for r in loaded), 4) if loaded else None,
        "phase_switch_cycles": max(r["phase_switch"] for r in switches) if switches else None,
        "phase_switch_drain_cycles": max(r["drain"] for r in switches) if switches else None,
        "select_copy_cycles": max(r["select_copy"] for r in switches) if switches else None,
        "config_load_cycles": max(r["config_load"] for r in rows),
        "config_words": point["config_words"],
        "classes": classes,
    }


def summary_point(points: list[dict]) -> dict:
    """The point the system model's ``switch`` block comes from: the paper builds its switches
    from Fred_3 chiplets and reduces FP16 gradients, so the largest measured P with m = 3 and
    fp16 (falling back to any m, then any dtype)."""
    for keep in (lambda p: p["middle"] == 3 and p["dtype"] == "fp16",
                 lambda p: p["dtype"] == "fp16", lambda p: True):
        chosen = [p for p in points if keep(p)]
        if chosen:
            return max(chosen, key=lambda p: (p["ports"], p["middle"]))
    raise FredError("no timing point was measured: nothing to summarize")


def microswitch_counts(ports: int, middle: int) -> dict[str, int]:
    """Microswitches of Fred_m(P) by kind: r = floor(P/2) input and r output microswitches, and
    for odd P a demux and a mux, per level, m Fred_m(ceil(P/2)) middles; Fred_m(2) = one RD."""
    if ports == 2:
        return {"rd": 1, "input": 0, "output": 0, "demux": 0, "mux": 0}
    r, odd = ports // 2, ports % 2
    sub = microswitch_counts(r + odd, middle)
    return {"rd": middle * sub["rd"], "input": r + middle * sub["input"],
            "output": r + middle * sub["output"], "demux": odd + middle * sub["demux"],
            "mux": odd + middle * sub["mux"]}


#: cost record of each microswitch kind (``{m}``: the number of middles)
_PART_NAMES = {"rd": "rd_microswitch", "input": "input_microswitch_m{m}",
               "output": "output_microswitch_m{m}", "demux": "demux_m{m}", "mux": "mux_m{m}"}


def composed_cost(costs: dict[str, dict], ports: int, middle: int) -> dict | None:
    """Fred_m(P) cost composed from the measured microswitches (an estimate, labelled as such):
    :func:`microswitch_counts` times each part's LUT/FF/cells (Fmax: :func:`composed_fmax`).
    Excludes the configuration memory and the top-level glue. None if a needed part was not
    measured."""
    n = microswitch_counts(ports, middle)
    parts = {}
    for kind, count in n.items():
        if count:
            record = costs.get(_PART_NAMES[kind].format(m=middle))
            if record is None:
                return None
            parts[kind] = record
    total = {key: sum(n[kind] * part[key] for kind, part in parts.items())
             for key in ("lut_equivalent", "ff", "generic_cells")}
    total["microswitches"] = n
    return total


_KIND_NAMES = {"rd": "RD microswitch", "input": "input microswitch", "output": "output microswitch",
               "demux": "last-port demux", "mux": "last-port mux"}


def composed_fmax(costs: list[dict], ports: int, middle: int) -> dict | None:
    """Fmax of Fred_m(P) composed from measured parts, for sizes place and route cannot do.

    Every microswitch registers its outputs and the serial-scan harness of its own
    measurement registers its inputs, so the register-to-register paths of a part placed alone
    are the paths it has inside the switch: the lowest Fmax over the parts the switch contains
    is an upper bound (``upper_bound_mhz``). The whole switch places lower (longer wires across
    a fuller device, the configuration memory's fan-out to every mode register), by a ratio
    measured where both exist: ``derate`` = measured Fmax / upper bound of the placed-and-routed
    Fred_m'(P') (``reference``; the same m when there is one, else the largest). ``fmax_mhz`` =
    upper bound x derate. None when a part's Fmax or every reference is missing. The agreement
    of this rule is checked on the placed sizes themselves (:func:`fmax_agreement`)."""
    by_name = {c["name"]: c for c in costs}
    upper = _parts_fmax(by_name, ports, middle)
    if upper is None:
        return None
    refs = [c for c in costs if c["kind"] == "switch" and c.get("fmax_mhz") is not None
            and _parts_fmax(by_name, c["ports"], c["middle"]) is not None
            and (c["ports"], c["middle"]) != (ports, middle)]
    if not refs:
        return None
    same_m = [c for c in refs if c["middle"] == middle]
    ref = max(same_m or refs, key=lambda c: (c["ports"], c["name"]))
    derate = ref["fmax_mhz"] / _parts_fmax(by_name, ref["ports"], ref["middle"])[0]
    bound, kind = upper
    return {"fmax_mhz": round(bound * derate, 1), "upper_bound_mhz": bound, "limited_by": kind,
            "derate": round(derate, 4), "reference": ref["name"],
            "source": (f"composed: {bound:g} MHz of its slowest part ({_KIND_NAMES[kind]}) x "
                       f"{derate:.3f}, the measured / composed ratio of {ref['name']} (placed and routed)")}


def _parts_fmax(by_name: dict, ports: int, middle: int) -> tuple[float, str] | None:
    """(lowest Fmax, its kind) over the parts Fred_m(P) contains; None if one is unmeasured."""
    worst = None
    for kind, count in microswitch_counts(ports, middle).items():
        if not count:
            continue
        part = by_name.get(_PART_NAMES[kind].format(m=middle))
        if part is None or part.get("fmax_mhz") is None:
            return None
        if worst is None or part["fmax_mhz"] < worst[0]:
            worst = (part["fmax_mhz"], kind)
    return worst


def fmax_agreement(costs: list[dict]) -> list[dict]:
    """The composition rule checked where place and route did finish: for every placed
    Fred_m(P), :func:`composed_fmax` computed from the *other* placed switches (never from
    itself) against its measured Fmax."""
    out = []
    for c in costs:
        if c["kind"] != "switch" or c.get("fmax_mhz") is None:
            continue
        estimate = composed_fmax(costs, c["ports"], c["middle"])
        if estimate is None:
            continue
        out.append({"name": c["name"], "measured_mhz": c["fmax_mhz"], "composed_mhz": estimate["fmax_mhz"],
                    "upper_bound_mhz": estimate["upper_bound_mhz"], "reference": estimate["reference"],
                    "error": round(estimate["fmax_mhz"] / c["fmax_mhz"] - 1, 4)})
    return out


def switch_block(summary: dict) -> dict:
    """The ``switch`` fields (the system model's timing of one switch) of one measured point's
    summary: its measured figures, with the model's documented clock and flit size."""
    return {"clock_mhz": MODEL_CLOCK_MHZ, "flit_bytes": MODEL_FLIT_BYTES,
            "first_flit_latency_cycles": float(summary["first_flit_latency_cycles"]),
            "throughput_flits_per_cycle_per_port": float(summary["throughput_flits_per_cycle_per_port"]),
            # a point whose run switched phases only once has no drained switch to measure
            "phase_switch_cycles": float(summary["phase_switch_cycles"] if summary["phase_switch_cycles"] is not None else 0),
            "config_load_cycles": float(summary["config_load_cycles"]),
            # a select on an idle switch: the copy alone (the system model's cost of a phase;
            # the drain is the previous phase's own latency)
            **({"select_copy_cycles": float(summary["select_copy_cycles"])}
               if summary.get("select_copy_cycles") is not None else {})}


def switch_blocks(summaries: list[dict]) -> dict:
    """``{point name: {"point", "switch"}}`` for every measured point: the system model looks
    up the chiplet that builds each wafer level here (``docs/characterization-schema.md``)."""
    out = {}
    for s in sorted(summaries, key=lambda s: (s["ports"], s["middle"], s["dtype"])):
        point = {"ports": s["ports"], "middle": s["middle"], "dtype": s["dtype"]}
        out[point_name(**point)] = {"point": point, "switch": switch_block(s)}
    return out


def chiplet_cost(costs: list[dict], ports: int, middle: int = 3) -> dict:
    """Cost of one chiplet Fred_m(P): LUT/FF as synthesized (flat if measured flat, else the
    per-module synthesis), the composition from its parts, and its Fmax: measured by place and
    route when that ran, else composed (:func:`composed_fmax`), with the source named."""
    by_name = {c["name"]: c for c in costs}
    flat = by_name.get(f"fred_switch_P{ports}m{middle}")
    hier = by_name.get(f"fred_switch_P{ports}m{middle}_hier")
    synthesized = flat or hier
    composed = composed_cost(by_name, ports, middle)
    out = {"lut_equivalent": synthesized["lut_equivalent"] if synthesized else None,
           "ff": synthesized["ff"] if synthesized else None,
           "synthesis": synthesized.get("synthesis", "flat") if synthesized else None,
           "lut_equivalent_composed": composed["lut_equivalent"] if composed else None}
    if flat and flat.get("fmax_mhz") is not None:
        out.update(fmax_mhz=flat["fmax_mhz"], fmax_source="measured (nextpnr-ecp5)")
    else:
        estimate = composed_fmax(costs, ports, middle)
        out.update(fmax_mhz=estimate["fmax_mhz"] if estimate else None,
                   fmax_upper_bound_mhz=estimate["upper_bound_mhz"] if estimate else None,
                   fmax_source=estimate["source"] if estimate else "not measured")
    return out


def record_runs(records: list[dict]) -> list[dict]:
    """The distinct runs (``record["run"]``: command, date, commit, tools, seed) that measured
    ``records``, oldest first, each with the names of the records it measured. A file merged
    from several runs (``fred characterize --merge``) lists each of them here."""
    runs = {}
    for r in records:
        run = r.get("run")
        if run is None:
            raise FredError(f"record {_record_name(r)} carries no 'run' (which command measured it)")
        entry = runs.setdefault((run["date"], run["command"]), dict(run, measured=[]))
        entry["measured"].append(_record_name(r))
    return [runs[k] for k in sorted(runs)]


def _record_name(record: dict) -> str:
    if "name" in record:   # a cost record
        return f"cost {record['name']}"
    return f"timing {point_name(record['ports'], record['middle'], record['dtype'])}"


def build_document(points: list[dict], costs: list[dict], *, command: str, grid: dict,
                   not_measured: list[dict], tools: dict, seconds: float | None,
                   jobs: int | None = None, seed: int | None = None) -> dict:
    if not points:
        raise FredError("no timing point was measured; refusing to write a characterization")
    summaries = [summarize_point(p) for p in points]
    ref = summary_point(summaries)
    switch = switch_block(ref)
    return {
        "schema": SCHEMA_ID,
        "switch": switch,
        "switch_source": {
            "point": {k: ref[k] for k in ("ports", "middle", "dtype")},
            "measured": ["first_flit_latency_cycles", "throughput_flits_per_cycle_per_port",
                         "phase_switch_cycles", "config_load_cycles"],
            "not_measured": {"clock_mhz": "documented model default (15 nm ASIC clock); the ECP5 "
                                          "Fmax under 'cost' is an FPGA figure, not this clock",
                             "flit_bytes": "the paper's 512 B flit; the RTL flit is lanes x dtype bits"},
        },
        "generated_by": {"command": command, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                         "tools": tools, "seconds": seconds, "jobs": jobs, "seed": seed,
                         "runs": record_runs(points + costs)},
        "grid": grid,
        "summaries": summaries,
        "measurements": points,
        "cost": costs,
        "cost_composed": {f"P{p}m{m}": composed_cost({c["name"]: c for c in costs}, p, m)
                          for p, m in sorted({(p, m) for p in grid.get("ports", []) for m in grid.get("middle", [])}
                                             | {(p, 3) for p in grid.get("chiplets", [])})},
        "switches": switch_blocks(summaries),
        "chiplet_cost": {f"P{p}m3": chiplet_cost(costs, p) for p in sorted(grid.get("chiplets", []))},
        "fmax_agreement": fmax_agreement(costs),
        "not_measured": not_measured,
    }


# -- report ---------------------------------------------------------------------------------
_fmt = fmt_number


def _plot(doc: dict, png: Path) -> None:
    """``png``: measured latency and phase switch against P (left), cost against P (right)."""
    fig, (ax1, ax2) = figure(1, 2, figsize=(11, 4.2))
    _plot_latency(ax1, doc["summaries"])
    _plot_cost(ax2, doc)
    save_png(fig, png, dpi=110, metadata={"Software": None})


def _plot_latency(ax, summaries: list[dict]) -> None:
    series = {}
    for s in summaries:
        series.setdefault((s["dtype"], s["middle"]), []).append((s["ports"], s["first_flit_latency_cycles"]))
    for (dtype, m), pts in sorted(series.items()):
        pts.sort()
        ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o" if m == 3 else "x",
                linestyle="-" if m == 3 else "--", label=f"{dtype} m={m}")
    for dtype, m in sorted(k for k in series if k[0] == "fp16"):
        sw = sorted((s["ports"], s["phase_switch_cycles"]) for s in summaries
                    if s["dtype"] == dtype and s["middle"] == m and s["phase_switch_cycles"] is not None)
        ax.plot([p for p, _ in sw], [v for _, v in sw], linestyle=":", marker="s", markersize=4,
                label=f"phase switch {dtype} m={m}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ports P")
    ax.set_ylabel("cycles")
    ax.set_title("Measured first-flit latency and phase switch (no backpressure)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)


def _plot_cost(ax, doc: dict) -> None:
    costs = [c for c in doc["cost"] if c["kind"] == "switch"]
    for m in (2, 3):
        for mode, marker in (("flat", "o"), ("hierarchical", "^")):
            meas = sorted((c["ports"], c["lut_equivalent"]) for c in costs
                          if c["middle"] == m and c.get("synthesis", "flat") == mode)
            if meas:
                ax.plot([p for p, _ in meas], [v for _, v in meas], marker=marker,
                        label=f"synthesized {mode} m={m}")
        comp = sorted((int(k[1:].split("m")[0]), v["lut_equivalent"]) for k, v in doc["cost_composed"].items()
                      if v and int(k.split("m")[1]) == m)
        if comp:
            ax.plot([p for p, _ in comp], [v for _, v in comp], linestyle=":", marker=".",
                    label=f"composed from microswitches m={m}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ports P")
    ax.set_ylabel("ECP5 LUT4 equivalents (fp16 x 4 lanes)")
    ax.set_title("Cost against P")
    if ax.get_lines():
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no cost measured", ha="center", transform=ax.transAxes)
    ax.grid(True, alpha=0.3, which="both")


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _growth(comp) -> str:
    parts = []
    for m in (2, 3):
        pts = sorted((int(k[1:].split("m")[0]), v["lut_equivalent"]) for k, v in comp
                     if int(k.split("m")[1]) == m and _power_of_two(int(k[1:].split("m")[0])))
        steps = [f"x{b / a:.1f} from P={p} to {q}" for (p, a), (q, b) in zip(pts, pts[1:])]
        if steps:
            parts.append(f"m = {m}: " + ", ".join(steps))
    return ("Per doubling of P the composed LUT count grows " + "; ".join(parts) + ".") if parts else ""


def _record_list(names: list[str], limit: int = 8) -> str:
    names = sorted(names)
    return ", ".join(names[:limit]) + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _by_point(summaries: list[dict]) -> list[dict]:
    return sorted(summaries, key=lambda s: (s["ports"], s["middle"], s["dtype"]))


def write_report(doc: dict, markdown: Path, png: Path) -> None:
    """``markdown`` (the report) and ``png`` (its plot) from a characterization document; the
    sections below render in this order, each from the document alone."""
    check_writable(markdown)
    check_writable(png)
    _plot(doc, png)
    lines = []
    for section in (_report_head, _report_model_reads, _report_findings, _report_timing,
                    _report_classes, _report_cost, _report_composed, _report_run_time,
                    _report_not_measured):
        lines += section(doc)
    write_text(markdown, "\n".join(lines) + "\n")


def _report_head(doc: dict) -> list[str]:
    """Title, the run that generated the file (and every run its records come from), method."""
    g = doc["generated_by"]
    L = ["# Switch characterization (generated)", "",
         f"Generated by `{g['command']}` on {g['date']}"
         + (f" in {g['seconds'] / 60:.1f} min" if g.get("seconds") else "")
         + (f" with FRED_SEED={g['seed']} (the random backpressure; set it to reproduce every "
            "figure)" if g.get("seed") is not None else "") + ". "
         "Do not edit: `make characterize` rewrites this file and `data/characterization.json` "
         "(schema: `docs/characterization-schema.md`). Tools: "
         + ", ".join(f"{k} {v}" for k, v in sorted(g["tools"].items())) + ".", ""]
    runs = g.get("runs") or []
    if len(runs) > 1:
        L += [f"The records come from {len(runs)} runs (`fred characterize --merge` adds a run's records "
              "to an existing file; every timing point and cost record names the run that measured "
              "it, `run` in the JSON, and `generated_by.runs` lists them):", ""]
        L += table_lines(["date", "command", "commit", "FRED_SEED", "records"],
                         [(r["date"], f"`{r['command']}`", r["commit"], r.get("seed"),
                           f"{len(r['measured'])}: {_record_list(r['measured'])}") for r in runs])
        L.append("")
    return L + [
        "Method: one Verilator build per (P, m, dtype) of `fred_switch` (lanes 1, 3 phases); "
        "`cocotb_tests/bench_characterize.py` runs every traffic class without and then with "
        f"random backpressure (probability {doc['grid'].get('backpressure')} per output per cycle), "
        f"inputs never idle, {doc['grid'].get('length')} flits per packet, every flit checked bit for "
        "bit against the functional model. All cycle figures are computed from the VCD "
        "(vcdvcd); every transfer of every stream was cross-checked against the bench's "
        "monitors (a mismatch fails the run).", "",
        "Definitions: *first-flit latency* = first output transfer - first input transfer of a "
        "phase; *throughput* = (flits - 1) / (last - first transfer cycle) per output, min over "
        "outputs; *phase switch* = cycles from raising the select (right after the last flit of "
        "the previous phase entered) until the new phase's inputs open = drain + select copy; "
        "*config load* = first configuration word accepted until the slot's `loaded` bit is high.", ""]


def _report_model_reads(doc: dict) -> list[str]:
    """The ``switch`` block the system model reads, and each wafer chiplet's figures."""
    sw, src = doc["switch"], doc["switch_source"]
    L = ["## What the system model reads", "",
         f"`switch` block from P={src['point']['ports']}, m={src['point']['middle']}, "
         f"{src['point']['dtype']} (the largest measured Fred_3 fp16 point):", ""]
    L += table_lines(["field", "value", "source"],
                     [(f"`{k}`", _fmt(v), "measured" if k in src["measured"] else src["not_measured"].get(k, ""))
                      for k, v in sw.items()])
    if not doc.get("switches"):
        return L
    L += ["", "`switches`: the same fields for every measured point. A platform that names the "
          "chiplets its levels are built from (`configs/paper.toml`, `[fred.chiplets]`: L1 = "
          "Fred_3(12), L2 = Fred_3(10), fp16) takes each level's timing from its chiplet's "
          "entry (`docs/sysmodel.md`); the `switch` block above serves platforms that do not. "
          "The wafer's chiplets:", ""]
    chiplets = sorted((doc.get("chiplet_cost") or {}).items(), key=lambda kv: -int(kv[0][1:].split("m")[0]))
    return L + table_lines(
        ["chiplet", "first-flit latency", "throughput (free)", "throughput (backpressure, min)",
         "phase switch", "config load", "LUT eq.", "FF", "synthesis", "Fmax (MHz)"],
        [_chiplet_cells(doc, key, c) for key, c in chiplets])


def _chiplet_cells(doc: dict, key: str, c: dict) -> tuple:
    ports, middle = (int(x) for x in key[1:].split("m"))
    b = doc["switches"].get(point_name(ports, middle, "fp16"))
    t = b["switch"] if b else {}
    by_point = {(x["ports"], x["middle"], x["dtype"]): x for x in doc["summaries"]}
    loaded = (by_point.get((ports, middle, "fp16")) or {}).get("throughput_with_backpressure_min")
    fmax = (f"{_fmt(c['fmax_mhz'], 1)} ({c['fmax_source']})" if c.get("fmax_mhz") is not None
            else c.get("fmax_source", "-"))
    return (f"Fred_{middle}({ports}) fp16", _fmt(t.get("first_flit_latency_cycles")),
            _fmt(t.get("throughput_flits_per_cycle_per_port")), _fmt(loaded, 4),
            _fmt(t.get("phase_switch_cycles")), _fmt(t.get("config_load_cycles")),
            _fmt(c["lut_equivalent"]), _fmt(c["ff"]), c.get("synthesis") or "-", fmax)


def _report_findings(doc: dict) -> list[str]:
    """The latency, phase-switch and configuration-load rules checked at every point."""
    sums = doc["summaries"]
    lat_ok = all(x["first_flit_latency_min_cycles"] == x["first_flit_latency_cycles"] == x["latency_property"]
                 for x in sums)
    copy_ok = all(x["select_copy_cycles"] == x["config_words"] + 2 for x in sums if x["select_copy_cycles"] is not None)
    load_ok = all(x["config_load_cycles"] == x["config_words"] + 1 for x in sums)
    return ["", "## Findings", "",
            f"* First-flit latency equals the RTL's latency property (`hdl.contracts.timing.switch_latency`: "
            f"L (L_add + 1) + L - 1 with L = ceil(log2 P)) at every measured point and for every "
            f"traffic class: "
            f"{'yes' if lat_ok else 'NO (see the tables)'}. It does not depend on the class or on m, "
            "because pass paths are delayed to match the adder.",
            f"* Phase switch = drain of the old phase (at most the latency) + select copy of N + 2 cycles "
            f"(N = configuration words): copy = N + 2 at every point: {'yes' if copy_ok else 'NO'}. "
            f"Configuration load = N words + 1 check cycle: {'yes' if load_ok else 'NO'}.",
            "* Throughput: see below; with random backpressure the inputs run slightly faster than the "
            "outputs over one packet because the switch's buffers absorb the first flits.",
            ""]


_TIMING_COLUMNS = (
    Column("P", "ports"), Column("m", "middle"), Column("dtype", "dtype"),
    Column("latency property", "latency_property"),
    Column("first-flit latency (free)",
           lambda s: f"{s['first_flit_latency_min_cycles']}..{s['first_flit_latency_cycles']}"),
    Column("throughput min (free)", "throughput_flits_per_cycle_per_port", lambda v: _fmt(v, 4)),
    Column("throughput min (backpressure)", "throughput_with_backpressure_min", lambda v: _fmt(v, 4)),
    Column("phase switch (drain + copy)",
           lambda s: f"{s['phase_switch_cycles']} ({s['phase_switch_drain_cycles']} + {s['select_copy_cycles']})"),
    Column("config words", "config_words"), Column("config load", "config_load_cycles"),
)


def _report_timing(doc: dict) -> list[str]:
    """The plot and the timing of every measured point."""
    return (["", "![latency and cost against P](characterization.png)", "",
             "## Timing per point (all traffic classes)", ""]
            + table_lines(_TIMING_COLUMNS, _by_point(doc["summaries"])))


_CLASS_COLUMNS = (
    Column("P", 0), Column("m", 1), Column("dtype", 2), Column("class", 3),
    Column("phases", lambda r: r[4]["phases"]),
    Column("latency free", lambda r: f"{r[4].get('latency_min_free')}..{r[4].get('latency_max_free')}"),
    Column("throughput free", lambda r: _fmt(r[4].get("throughput_min_free"), 4)),
    Column("latency bp",
           lambda r: f"{r[4].get('latency_min_backpressure')}..{r[4].get('latency_max_backpressure')}"),
    Column("throughput bp", lambda r: _fmt(r[4].get("throughput_min_backpressure"), 4)),
)


def _report_classes(doc: dict) -> list[str]:
    """Every traffic class at every point, and any class below one flit per cycle."""
    rows = [(s["ports"], s["middle"], s["dtype"], name, c)
            for s in _by_point(doc["summaries"]) for name, c in s["classes"].items()]
    L = ["", "## Per traffic class", "",
         "Throughput and latency per class (free = no backpressure; bp = random backpressure). "
         "`phases` > 1 means the compiler split the class into several phases; each phase is "
         "measured on its own.", ""]
    L += table_lines(_CLASS_COLUMNS, rows)
    shortfalls = [f"P={p} m={m} {dtype} {name}: output {c.get('throughput_min_free')}, "
                  f"input {c.get('input_throughput_min_free')}" for p, m, dtype, name, c in rows
                  if min(c.get("throughput_min_free", 1.0), c.get("input_throughput_min_free", 1.0)) < 1.0]
    L += ["", "### Throughput without backpressure", ""]
    if shortfalls:
        return L + ["Shortfalls below 1.0 flit/cycle/port (each needs an explanation):", ""] + \
            [f"* {x}" for x in shortfalls]
    return L + ["Every traffic class at every measured point sustains exactly 1.0 flit/cycle on every "
                "output (and every input) without backpressure: no shortfall. With random backpressure "
                "the rate is set by the sinks (a sink at 30 % backpressure accepts ~0.7; a reduction or "
                "a broadcast waits for the slowest of its ports, so those classes see less)."]


def _report_cost(doc: dict) -> list[str]:
    """Every cost record, and what limits the Fmax of each placed design."""
    L = ["", "## Cost (ECP5 LFE5U-85F, fp16 x 4 lanes)", "",
         "yosys `synth_ecp5` of each design alone (LUT eq. = LUT4 + 2 x CCU2C), generic `synth -flatten` "
         "cell count, nextpnr-ecp5 Fmax of the design inside a serial-scan harness (one seed).", ""]
    L += table_lines(["design", "P", "m", "LUT4", "CCU2C", "LUT eq.", "FF", "generic cells", "Fmax (MHz)"],
                     [(c["name"], c["ports"], c["middle"] or "-", c["lut4"], c["ccu2c"], c["lut_equivalent"],
                       c["ff"], c["generic_cells"], _fmt(c["fmax_mhz"], 1)) for c in doc["cost"]])
    paths = [c for c in doc["cost"] if c.get("critical_path")]
    if paths:
        L += ["", "What limits Fmax: the worst clocked path of each placed design (median seed; Fmax "
              "per seed in brackets where several were placed):", ""]
        L += table_lines(["design", "Fmax (MHz)", "path (ns)", "logic / routing (ns)", "from", "to"],
                         [_path_cells(c) for c in paths])
    return L


def _path_cells(c: dict) -> tuple:
    cp = c["critical_path"]
    seeds = c.get("fmax_seeds") or {}
    per_seed = f" ({', '.join(f'{v:g}' for v in seeds.values())})" if len(seeds) > 1 else ""
    return (c["name"], f"{_fmt(c['fmax_mhz'], 1)}{per_seed}", f"{cp['ns']:.2f}",
            f"{cp['logic_ns']:.2f} / {cp['routing_ns']:.2f}", f"`{cp['from']}`", f"`{cp['to']}`")


def _report_composed(doc: dict) -> list[str]:
    """Cost composed from the microswitches against the synthesized, the composed-Fmax rule
    checked, and hierarchical against flat synthesis."""
    comp = [(k, v) for k, v in doc["cost_composed"].items() if v]
    if not comp:
        return []
    measured = {c["name"]: c for c in doc["cost"]}
    L = ["", "Growth with P and m, composed from the measured microswitch costs (an estimate: "
         "r input + r output microswitches per level, m sub-networks, one RD per Fred_m(2); "
         "no configuration memory; compare with the synthesized Fred_m(P) in the "
         "last column). Fred_m(P) has m^(log2 P - 1) RD microswitches and "
         "I(P) = P/2 + m I(P/2) input (and as many output) microswitches; the adders (one per RD "
         "and per input microswitch) dominate. " + _growth(comp), ""]
    L += table_lines(["Fred_m(P)", "RD", "input", "output", "demux/mux", "LUT eq. (composed)",
                      "FF (composed)", "LUT eq. measured", "measured / composed",
                      "Fmax composed (MHz)", "Fmax measured (MHz)"],
                     [_composed_cells(doc, measured, k, v) for k, v in comp])
    L += ["", "Composed Fmax (`composed_fmax` in `studies/characterization/report.py`), for sizes "
          "place and route cannot do (a chiplet's ~100k LUTs exceed the 83,640 of the LFE5U-85F, so "
          "no ECP5 placement exists): every microswitch registers its outputs, and its own "
          "measurement registers its inputs, so the lowest Fmax over the parts a switch contains "
          "is an upper bound; the whole switch places lower (longer wires across a fuller device, "
          "the configuration memory fanning out to every mode register), by the measured / upper "
          "bound ratio of a placed-and-routed switch of the same m. The rule checked where place "
          "and route did finish, each switch predicted from the *other* placed switches:", ""]
    agreement = doc.get("fmax_agreement") or []
    if agreement:
        L += table_lines(["switch", "measured (MHz)", "upper bound from parts (MHz)", "composed (MHz)",
                          "derate from", "error"],
                         [(a["name"], _fmt(a["measured_mhz"], 1), _fmt(a["upper_bound_mhz"], 1),
                           _fmt(a["composed_mhz"], 1), a["reference"], f"{a['error'] * 100:+.1f} %")
                          for a in agreement])
    else:
        L += ["(no two placed switches with measured parts: not checked)"]
    return L + _report_hierarchical(doc, measured)


def _composed_cells(doc: dict, measured: dict, k: str, v: dict) -> tuple:
    n = v["microswitches"]
    meas = measured.get(f"fred_switch_{k}") or measured.get(f"fred_switch_{k}_hier")
    ratio = meas["lut_equivalent"] / v["lut_equivalent"] if meas else None
    ports, middle = (int(x) for x in k[1:].split("m"))
    fmax = composed_fmax(doc["cost"], ports, middle)
    tag = " (hier.)" if meas and meas.get("synthesis") == "hierarchical" else ""
    return (k, n["rd"], n["input"], n["output"], n.get("demux", 0), v["lut_equivalent"], v["ff"],
            str(meas["lut_equivalent"]) + tag if meas else "not measured", _fmt(ratio, 3),
            _fmt(fmax["fmax_mhz"] if fmax else None, 1), _fmt(meas.get("fmax_mhz") if meas else None, 1))


def _report_hierarchical(doc: dict, measured: dict) -> list[str]:
    hier = [(c, measured.get(c["name"][:-len("_hier")])) for c in doc["cost"] if c["name"].endswith("_hier")]
    if not hier:
        return []
    L = ["", "Hierarchical synthesis (`--synthesis hierarchical`: `synth_ecp5 -noflatten`, each "
         "module once, cells totalled over the hierarchy; no optimisation across module "
         "boundaries) against flat synthesis of the same design:", ""]
    L += table_lines(["design", "LUT eq. hierarchical", "FF hierarchical", "LUT eq. flat", "FF flat",
                      "LUT ratio", "FF ratio", "synthesis time hier / flat (s)", "flat measured"],
                     [_hierarchical_cells(h, f)
                      for h, f in sorted(hier, key=lambda hf: (hf[0]["ports"], hf[0]["middle"]))])
    if not any(f is not None for _, f in hier):
        L += ["", "(no design synthesized both ways: the agreement is not shown)"]
    return L


def _hierarchical_cells(h: dict, f: dict | None) -> tuple:
    if f is None:
        return (h["name"], h["lut_equivalent"], h["ff"], "-", "-", "-", "-",
                f"{h['seconds']['synth']} / -", "-")
    run = f.get("run")
    return (h["name"], h["lut_equivalent"], h["ff"], f["lut_equivalent"], f["ff"],
            _fmt(h["lut_equivalent"] / f["lut_equivalent"], 3), _fmt(h["ff"] / f["ff"], 3),
            f"{h['seconds']['synth']} / {f['seconds']['synth']}",
            f"{run['date'][:10]} (commit {run['commit'].split()[0][:12]})" if run else "-")


def _report_run_time(doc: dict) -> list[str]:
    """The wall-clock seconds of every point and of the run."""
    L = ["", "## Run time", "",
         "Measured wall-clock seconds of each point on the machine that produced this file "
         "(shared 2-core machine; Verilog generation, Verilator -O0 build + simulation, VCD parse; "
         "a build found in `sim_build/` from an earlier run, e.g. by the test suite, is reused and "
         "shows only the simulation):", ""]
    points = _by_point(doc["measurements"])
    L += table_lines(["point", "Verilog", "build + run", "VCD", "flits checked",
                      "transfers checked against the VCD"],
                     [(f"P={p['ports']} m={p['middle']} {p['dtype']}", p["seconds"]["verilog"],
                       p["seconds"]["build_and_run"], p["seconds"]["vcd"], p["flits_checked"],
                       p["vcd_checked_transfers"]) for p in points])
    total = sum(sum(p["seconds"].values()) for p in points)
    cost_total = sum(c["seconds"]["total"] for c in doc["cost"])
    slowest = max(doc["cost"], key=lambda c: c["seconds"]["total"], default=None)
    text = (f"Sum over points: {total / 60:.1f} min of timing points and {cost_total / 60:.1f} min of "
            "synthesis and place and route"
            + (f" (the longest, {slowest['name']}, {slowest['seconds']['total'] / 60:.1f} min)"
               if slowest else "") + ".")
    g = doc["generated_by"]
    if g.get("seconds"):
        text += (f" This file's run took {g['seconds'] / 60:.1f} min of wall-clock time from an empty "
                 f"cache with {g.get('jobs') or 1} point(s) measured at once (`--jobs`, default: "
                 "the CPU count).")
    else:
        text += (" This file was assembled from cached points (`--report-only`), so no single run's "
                 "wall-clock time applies.")
    text += (" Every point is cached in `build/characterize/` as it completes, so an interrupted "
             "run resumes where it stopped (without `--fresh`).")
    return L + ["", text]


def _report_not_measured(doc: dict) -> list[str]:
    if not doc["not_measured"]:
        return []
    return (["", "## Not measured", ""]
            + table_lines(["what", "reason", "command that measures it"],
                          [(n["what"], n["reason"], f"`{n['command']}`") for n in doc["not_measured"]]))


def write_json(doc: dict, path: Path) -> None:
    """Write ``doc`` after checking it against the schema its readers use."""
    parse_characterization(doc, source=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
