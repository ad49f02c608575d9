"""The store of finished iteration-table rows (``fred fabric-iteration --table --rows FILE``;
docs/fabric_iteration.md, "The table in pieces").

A JSON-lines file, one record a line, appended (and synced to disk) as soon as a case is done,
so a run that is killed or crashes keeps every row it finished. A record: ``kind`` (``row``: a
measured row, reused by a later run whose fingerprint is equal; ``failed``: a stall or wrong
data, kept for the log and run again; ``refused``: a packet case the iteration refuses before
any build, kept for the log), ``case`` (:attr:`studies.iteration_select.TableCase.name`),
``unit`` (its fields), ``fingerprint`` and its ``parts``, ``tools``, ``measured`` (UTC),
``load`` (the 1-minute load average when it finished), ``seed`` (the flits' data seed), ``row`` (:func:`studies.iteration_table.
iteration_row`), ``error``, ``verilog_sha256`` (the RTL top the row ran).

The fingerprint covers everything a row depends on (:func:`fingerprint_parts`): the case; the
platform files given (``--platform``, ``--characterization``) by content; the exported traces,
the requests and the programs the NPUs, switches and controllers are loaded with, and the
model's figures, each by SHA-256 of their canonical JSON; the code that generates the RTL top's
Verilog, builds it, loads it, makes the case's programs and judges the run -- every file of
``hdl``, ``eda``, ``cocotb_tests``, ``studies`` and ``fred``, by content
(:func:`code_fingerprint`); and the tools' versions (Python, Amaranth, cocotb, Verilator,
NumPy). The model (``sysmodel``) is not in the code part: everything it hands the RTL run --
the traces, the requests, the programs made from them -- and every figure of it the row holds
are hashed by content, and the RTL side (``hdl``, ``eda``, ``cocotb_tests``) imports nothing
from it (tests/test_layering.py), so a model change that moves a row changes one of those
parts, and one that moves nothing (a faster engine) keeps the rows. The RTL top's Verilog is a
function of the code, the programs' sizes and Amaranth, all in the fingerprint, so it is not
generated before a run only to be hashed: its SHA-256 is recorded with the row it ran
(``verilog_sha256``, from the build folder) for the record. A change to any part re-runs the
row; a row is never reused across one.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import importlib
import json
import os
import platform as host
from functools import lru_cache
from pathlib import Path

from hdl.contracts.errors import FredError

__all__ = ["DEFAULT_ROWS", "CODE_PACKAGES", "RowStore", "code_fingerprint", "tool_versions", "plain",
           "fingerprint_parts", "fingerprint_of", "verilog_sha256", "new_record"]

#: The default store (``results/`` is not in git).
DEFAULT_ROWS = Path("results/fabric-iteration-rows.jsonl")
#: The packages whose every file a row depends on (the RTL, its build and harness, the studies
#: and the command that run them); the model reaches a row only through parts hashed by content
#: (module docstring).
CODE_PACKAGES = ("hdl", "eda", "cocotb_tests", "studies", "fred")
#: A record's keys that must be there (the rest depend on its kind).
_REQUIRED = ("kind", "case", "fingerprint", "parts", "measured")
_KINDS = ("row", "failed", "refused")


# Once per process: it names the code loaded in this process (as model_fingerprint).
@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 (16 hex digits) of every file (path and content; caches skipped) of
    :data:`CODE_PACKAGES`, as imported in this process."""
    from studies.points import _digest_folder
    digest = hashlib.sha256()
    for name in CODE_PACKAGES:
        digest.update(name.encode())
        _digest_folder(digest, Path(importlib.import_module(name).__file__).resolve().parent, suffixes=None)
    return digest.hexdigest()[:16]


def tool_versions() -> dict:
    """The versions of the tools a row's figures depend on (``absent`` for one not installed)."""
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": host.python_version()}
    for name in ("amaranth", "cocotb", "verilator", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def plain(obj):
    """``obj`` as JSON-able data for hashing: dataclasses by type name and fields, objects with
    ``to_dict`` by it, mappings with keys as strings, sequences as lists, sets sorted, NumPy
    values by ``tolist``; anything else is an error (its ``repr`` may hold a memory address,
    which would make equal inputs hash apart)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__name__}.{obj.name}"
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((plain(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"type": type(obj).__name__,
                **{f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return {"type": type(obj).__name__, **plain(obj.to_dict())}
    raise FredError(f"cannot fingerprint a {type(obj).__module__}.{type(obj).__qualname__}: "
                    f"not a dataclass, mapping, sequence or value")


def _sha(data) -> str:
    return hashlib.sha256(json.dumps(plain(data), sort_keys=True).encode()).hexdigest()


def _file_sha(path) -> str | None:
    return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fingerprint_parts(unit, case, *, platform_files=(), code: str | None = None, tools: dict | None = None,
                      pgo: bool = False) -> dict:
    """The SHA-256 of each thing the row of ``unit`` (a :class:`studies.iteration_select.
    TableCase`) built as ``case`` depends on (module docstring); ``case`` None for a case refused
    before it was built (no traces, programs or model). ``platform_files``: the platform and
    characterization files given (None for the shipped ones). ``pgo``: the row's simulator is
    built profile-guided (``--pgo``): a part of its own (``build``), so that a row measured on
    one build is never taken for the other (their cycles are equal, their cycles/s are not); a
    plain row's parts are what they were before the part existed."""
    parts = {"case": _sha(unit.to_dict()), "platform": _sha([_file_sha(p) for p in platform_files]),
             "code": code or code_fingerprint(), "tools": _sha(tools or tool_versions())}
    if pgo:
        parts["build"] = "lock-step, profile-guided"
    if case is not None:
        parts.update(traces=_sha(case.traces), programs=_sha([case.request, case.program]),
                     model=_sha(case.model))
    return parts


def fingerprint_of(parts: dict) -> str:
    """The one fingerprint of ``parts`` (16 hex digits)."""
    return _sha(parts)[:16]


def verilog_sha256(build_dir) -> str | None:
    """SHA-256 of the RTL top's Verilog in a build folder of ``eda.fabric.build`` (``<top>-fast-<key>``
    holding ``<top>.v``); None when there is none."""
    if not build_dir:
        return None
    folder = Path(build_dir)
    source = folder / f"{folder.name.split('-fast-')[0]}.v"
    return _file_sha(source) if source.is_file() else None


def new_record(kind: str, unit, parts: dict, *, row=None, error=None, build_dir=None, tools=None) -> dict:
    """A record of ``kind`` for ``unit`` measured now (module docstring)."""
    return {"kind": kind, "case": unit.name, "unit": unit.to_dict(), "fingerprint": fingerprint_of(parts),
            "parts": parts, "tools": tools or tool_versions(),
            "measured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "load": round(os.getloadavg()[0], 2), "host": f"{host.node()} {host.machine()}, {os.cpu_count()} CPUs",
            "row": row, "error": error, "verilog_sha256": verilog_sha256(build_dir),
            # the flits' data seed (cocotb_tests.lib.seeds), for reproducing the run: not in the
            # fingerprint, as the engines' timing does not depend on the data they reduce
            "seed": os.environ.get("FRED_SEED")}


class RowStore:
    """The records of the JSON-lines file ``path`` (none when it does not exist yet), read when
    made: a line that is not a whole record is an error naming the file and the line (a run
    killed while writing leaves its last line cut), never skipped."""

    def __init__(self, path):
        self.path = Path(path)
        self.records: list[dict] = []
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        with self.path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                self.records.append(self._record(line, number))

    def _record(self, line: str, number: int) -> dict:
        where = f"{self.path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FredError(f"{where}: not a whole JSON record ({exc.msg} at column {exc.colno}); a run "
                            f"killed while writing cuts its last line: delete the line (its case runs "
                            f"again) or give another --rows file") from None
        if not isinstance(record, dict) or any(k not in record for k in _REQUIRED):
            raise FredError(f"{where}: not a row record (it needs {', '.join(_REQUIRED)})")
        if record["kind"] not in _KINDS or (record["kind"] == "row" and not isinstance(record.get("row"), dict)):
            raise FredError(f"{where}: a record of kind {record['kind']!r} "
                            f"{'without its row' if record['kind'] == 'row' else 'is not one of ' + ', '.join(_KINDS)}")
        return record

    def reusable(self, fingerprint: str) -> dict | None:
        """The latest measured row (kind ``row``) of ``fingerprint``, or None."""
        return next((r for r in reversed(self.records) if r["kind"] == "row" and r["fingerprint"] == fingerprint),
                    None)

    def has(self, record: dict) -> bool:
        """Whether a record of the same kind, fingerprint and error is stored (a refusal once)."""
        return any(r["kind"] == record["kind"] and r["fingerprint"] == record["fingerprint"]
                   and r.get("error") == record.get("error") for r in self.records)

    def measured_cases(self) -> set:
        """The cases (names) with a measured row of any fingerprint."""
        return {r["case"] for r in self.records if r["kind"] == "row"}

    def changed(self, case: str, parts: dict) -> list[str]:
        """The parts that differ from the latest measured row of ``case`` (empty: none stored)."""
        old = next((r for r in reversed(self.records) if r["kind"] == "row" and r["case"] == case), None)
        return [] if old is None else [k for k in sorted(set(parts) | set(old["parts"]))
                                       if parts.get(k) != old["parts"].get(k)]

    def append(self, record: dict) -> None:
        """Write ``record`` as one line at the end of the file, synced to disk before returning."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True, default=plain) + "\n")
            out.flush()
            os.fsync(out.fileno())
        self.records.append(record)
