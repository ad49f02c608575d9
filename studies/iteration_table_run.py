"""The iteration table made in pieces: the cases ``--only`` selects run on the RTL unless the row
store holds their row with today's fingerprint, each finished row (or stall, or refusal) stored
as soon as it is done, and the table's rows gathered from this run and the store
(``fred fabric-iteration --table [--only ...] [--rows FILE]``, ``--list-cases``;
docs/fabric_iteration.md, "The table in pieces").

The RTL is reached only through ``run`` (:func:`studies.iteration_case.run_iteration_case` in the
command), the cases only through ``build`` (``build(unit) -> IterationCase``), so a test gives
both without Verilator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hdl.contracts.errors import FredError
from studies.iteration_rows import fingerprint_of, fingerprint_parts, new_record
from studies.iteration_table import iteration_row

__all__ = ["TableRun", "run_table", "list_cases"]


@dataclass
class TableRun:
    """What :func:`run_table` gathered: ``rows`` (the table's order; each with ``measured`` and
    ``stored``: True for a row taken from the store), ``failed`` and ``refused`` (dicts of
    workload, fabric, switch, error), ``missing`` (the cases with no row: not selected and not
    in the store with today's fingerprint; why), and how many rows ``ran`` and were ``reused``."""

    rows: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    missing: list = field(default_factory=list)
    ran: int = 0
    reused: int = 0


def _label(unit) -> str:
    return f"{unit.workload} {unit.strategy}, K = {unit.scale:g}"


def _build(unit, build):
    """(the case, None) or, for a packet case its iteration refuses before any build (a
    :class:`FredError`, or ``rtl_missing``), (None, why); a circuit case's error is the caller's."""
    if unit.switch != "packet":
        return build(unit), None
    try:
        case = build(unit)
    except FredError as exc:
        return None, str(exc)
    return (None, case.rtl_missing) if case.rtl_missing else (case, None)


def _prepared(units, wanted, build, platform_files, code, tools, pgo=False) -> list:
    """(unit, case or None, refusal or None, fingerprint parts) of each unit in ``wanted``:
    every one built and fingerprinted before the first RTL run."""
    out = []
    for unit in units:
        if unit in wanted:
            case, refusal = _build(unit, build)
            out.append((unit, case, refusal, fingerprint_parts(unit, case, platform_files=platform_files,
                                                               code=code, tools=tools, pgo=pgo)))
    return out


def _refusal(store, result, unit, parts, why, tools) -> None:
    record = new_record("refused", unit, parts, error=why, tools=tools)
    if not store.has(record):
        store.append(record)
    result.refused.append({"workload": _label(unit), "fabric": unit.fabric, "switch": unit.switch, "error": why})


def _measure(store, result, unit, case, parts, run, tools, report) -> None:
    """Run ``case`` on the RTL and store what it gave, a row or a failure, at once."""
    try:
        run(case)
    except FredError as exc:     # a stalled or wrong run is a line of the block, not the end
        store.append(new_record("failed", unit, parts, error=str(exc), tools=tools))
        result.failed.append({"workload": _label(unit), "fabric": unit.fabric, "switch": unit.switch,
                              "error": str(exc)})
        report(f"{unit.name}: FAILED: {exc}")
        return
    row = iteration_row(case)
    record = new_record("row", unit, parts, row=row, build_dir=case.rtl.build_dir, tools=tools)
    store.append(record)
    result.rows.append({**row, "measured": record["measured"], "stored": False})
    result.ran += 1
    report(f"{unit.name}: model {row['model_iteration']:.1f}, RTL {row['rtl_iteration']} cycles "
           f"({row['iteration_ratio']:.4f}); stored in {store.path}")


def run_table(units, chosen, build, run, store, *, platform_files=(), code=None, tools=None,
              report=lambda line: None, pgo: bool = False) -> TableRun:
    """The rows of ``units`` (:func:`studies.iteration_select.table_units`): each of ``chosen``
    built, then taken from ``store`` (a :class:`studies.iteration_rows.RowStore`) where it holds
    a row of the same fingerprint, else run with ``run(case)`` and stored; each other unit with
    a record in the store is built to check its fingerprint and its stored row taken if it
    matches; the rest are ``missing``. ``report(line)``: a line per case as it finishes.
    ``pgo``: ``run`` builds profile-guided (the rows' fingerprints say so)."""
    chosen = set(chosen)
    recorded = {r["case"] for r in store.records}
    wanted = {u for u in units if u in chosen or u.name in recorded}
    result = TableRun()
    for unit, case, refusal, parts in _prepared(units, wanted, build, platform_files, code, tools, pgo):
        if refusal is not None:
            _refusal(store, result, unit, parts, refusal, tools)
            continue
        stored = store.reusable(fingerprint_of(parts))
        if stored is not None:
            result.rows.append({**stored["row"], "measured": stored["measured"], "stored": True})
            result.reused += 1
            report(f"{unit.name}: from {store.path} (measured {stored['measured']})")
        elif unit in chosen:
            _measure(store, result, unit, case, parts, run, tools, report)
        else:
            changed = store.changed(unit.name, parts)
            result.missing.append(f"{unit.name} ({'stored row out of date: ' + ', '.join(changed) + ' changed' if changed else 'not measured'})")
    result.missing = [f"{u.name} (not measured)" for u in units if u not in wanted] + result.missing
    return result


def list_cases(units, build, store, *, platform_files=(), code=None, tools=None, pgo: bool = False) -> list[dict]:
    """Per unit of ``units``: its name, the model's iteration cycles and collectives per NPU
    (what a run costs), and whether ``store`` holds its row with today's fingerprint (when it was
    measured; ``pgo``: its profile-guided row) or why the packet fabric refuses it."""
    out = []
    for unit, case, refusal, parts in _prepared(units, set(units), build, platform_files, code, tools, pgo):
        stored = None if case is None else store.reusable(fingerprint_of(parts))
        out.append({"case": unit.name, **unit.to_dict(),
                    "model_cycles": None if case is None else case.model["iteration_cycles"],
                    "collectives": None if case is None else (len(case.request) if isinstance(case.request, list)
                                                             else int(case.request is not None)),
                    "stored": None if stored is None else stored["measured"], "refused": refusal})
    return out
