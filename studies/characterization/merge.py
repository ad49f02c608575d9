"""Adding one run's measurements to an existing characterization (``fred characterize --merge``).

A full characterization takes 37-66 min on 2 cores; measuring a few new points (the wafer's
chiplets, a re-run of one design) should not redo the rest. ``--merge`` keeps every timing
point and cost record of the file at ``--output`` and adds (or replaces, by name) the records
this run assembled. Nothing is re-labelled: each record keeps the run that measured it
(``record["run"]``: command, date, commit, tools, seed; :mod:`.provenance`), and records of
a file written before runs were recorded get that file's own ``generated_by`` as their run,
with the commit marked unknown. The document lists every run (``generated_by.runs``).
"""

from __future__ import annotations

from hdl.contracts.characterization import point_name, read_characterization
from hdl.contracts.errors import FredError

__all__ = ["previous_records", "merge_records", "merge_grid", "merge_not_measured", "record_key"]

#: grid keys that must agree between the file and the run: figures measured with another
#: packet length or backpressure are not comparable point to point
_SAME = ("length", "backpressure")


def record_key(record: dict) -> str:
    """``timing P12m3fp16`` or ``cost fred_switch_P12m3``: what a record measured."""
    if "name" in record:
        return f"cost {record['name']}"
    return f"timing {point_name(record['ports'], record['middle'], record['dtype'])}"


def previous_records(path) -> tuple[list[dict], list[dict], dict, list[dict]]:
    """(timing points, cost records, grid, not-measured entries) of the characterization at
    ``path``, every record carrying its run. A missing or invalid file is an error."""
    doc = read_characterization(path).document
    made = doc.get("generated_by")
    if not made:
        raise FredError(f"{path}: no 'generated_by': cannot merge records whose run is unknown")
    legacy = {"command": made["command"], "date": made["date"],
              "commit": "unknown (recorded before runs carried their commit)",
              "tools": made.get("tools", {}), "seed": made.get("seed"), "jobs": made.get("jobs")}
    points = [dict(p, run=p.get("run") or legacy) for p in doc.get("measurements", [])]
    costs = [dict(c, run=c.get("run") or legacy) for c in doc.get("cost", [])]
    return points, costs, doc.get("grid", {}), doc.get("not_measured", [])


def merge_records(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` with every record of ``new`` added; a record of ``new`` replaces the one of
    ``old`` that measured the same thing (:func:`record_key`)."""
    merged = {record_key(r): r for r in old}
    merged.update({record_key(r): r for r in new})
    return list(merged.values())


def merge_grid(old: dict, new: dict) -> dict:
    """The union of two grids (ports, middle, dtypes, chiplets, traffic); ``length`` and
    ``backpressure`` must be equal."""
    for key in _SAME:
        if key in old and old[key] != new.get(key):
            raise FredError(f"--merge: the file was measured with {key} {old[key]}, this run with "
                            f"{new.get(key)}; their points are not comparable (use --{key} {old[key]})")
    out = dict(new)
    for key in ("ports", "middle", "dtypes", "chiplets", "traffic"):
        values = list(old.get(key, [])) + [v for v in new.get(key, []) if v not in old.get(key, [])]
        out[key] = sorted(values) if key in ("ports", "middle", "chiplets") else values
    return out


def merge_not_measured(old: list[dict], new: list[dict], points: list[dict], costs: list[dict]) -> list[dict]:
    """Entries of both lists (this run's replacing the file's of the same ``what``), minus
    whatever the merged records now measure."""
    have = {record_key(r) for r in points + costs}
    have |= {f"Fmax {c['name']}" for c in costs if c.get("fmax_mhz") is not None}
    merged = {n["what"]: n for n in old}
    merged.update({n["what"]: n for n in new})
    return [n for what, n in merged.items() if what not in have]
