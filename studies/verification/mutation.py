"""Mutation testing of the switch benches: would they catch a real bug in the switch?

``fred mutation`` (``make mutation``; :func:`campaign`) makes ``--count`` mutants of the
generated Verilog of a small switch (default Fred_2(4) int32, 3 phases), each one a single-line
change, runs the default switch benches on each (directed collectives, random flow sets,
throughput/latency, configuration protocol, illegal modes, permuted middles, non-interference:
one simulator run per mutant) and reports the
mutation score, killed / all, and every survivor with its diff.

Why the generated Verilog and not the Amaranth source: the Verilog is what the benches test, so a
mutant there is a bug the benches must see whatever Python produced it; every line of every
module is a candidate (the stream plumbing Amaranth's library generates too, which a source-level
mutator would have to reach through the library); a mutant is one line of text that a report can
show; and generation is deterministic (same Amaranth, same Verilog), so a (seed, count) pair names
the same mutants on every machine. The price: a mutant is a netlist-level change (``&`` for
``|``, a negated ``if``, a shifted bit of the mode vector), not a named design decision; the
report names the module and the line, which says which component it hits.

Mutation operators (:data:`OPERATORS`), each on one line of a design module:

* ``and-or`` / ``or-and``: the first binary ``&`` becomes ``|`` or the reverse (a ready or valid
  term of the wrong polarity of combination);
* ``drop-not``: ``~ x`` becomes ``x`` (an inverted ready/valid/enable term);
* ``add-xor``: ``a + b`` becomes ``a ^ b`` (every carry broken: the adder, a counter);
  ``add-sub`` / ``sub-add``: ``+`` and ``-`` swapped (a counter counting the wrong way);
* ``cmp``: ``==`` / ``!=`` swapped, ``<`` becomes ``<=``, ``>=`` becomes ``>`` (an off-by-one
  bound: word counts, phase ranges, wire-index checks);
* ``ternary-swap``: ``c ? a : b`` becomes ``c ? b : a`` (a swapped select);
* ``if-negate``: ``if (c)`` becomes ``if (!(c))`` in a process (a swapped select or an inverted
  enable; reset conditions are left alone: a switch stuck in reset is not an interesting bug);
* ``const-flip``: a 1-bit constant assigned in a process flips (a state machine's next state, a
  default of a handshake);
* ``slice-shift``: a slice of ``mode``/``modes``/``write__payload`` moves by one bit (a
  mis-mapped configuration bit).

Selection: the candidate sites (:func:`sites`) are grouped by module and drawn round-robin over
the modules in a seeded random order (:func:`choose`), so every component gets mutants whatever its
size; the same ``--seed`` and ``--count`` give the same mutants.

Each mutant builds in its own folder under ``--out`` (removed afterwards) and, on a shared
machine, takes ``flock /tmp/fred-heavy.lock`` for its own build and run only (``--lock``), so a
campaign never starves other jobs for longer than one mutant. A mutant is *killed* when a bench
test fails (a scoreboard mismatch, a watchdog timeout, an assertion), the simulator crashes or the
run exceeds ``--timeout``; it *survives* when every test passes; a mutant Verilator refuses to
build is *invalid* (reported, not counted).

Each mutant runs in a child process, ``python -m studies.verification.mutation run-one ...``
(:func:`main`, the module's only entry: an internal worker, not a user command), so a mutant that
crashes or hangs the simulator takes only that process (and its process group) down.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from hdl.contracts.errors import FredError
from studies.report import Column, check_writable, table_text, write_json

__all__ = ["DESIGN", "OPERATORS", "Mutant", "sites", "choose", "design_verilog", "campaign", "main"]

#: The design the mutants are made of: small enough for a mutant to build and run in tens of
#: seconds, large enough to have every microswitch kind but the odd-P demux/mux (input, output,
#: RD with its adder, the configuration memory and checker).
DESIGN = {"ports": 4, "middle": 2, "dtype": "int32", "lanes": 1, "phases": 3, "tag_width": 16}
#: The bench tests every mutant runs (one simulator run), and their parameters.
TESTCASES = ["configuration_protocol", "illegal_modes", "throughput_and_latency",
             "directed_collectives", "random_flow_sets", "permuted_middles", "non_interference"]
BENCH_PARAMS = {"rounds": 20, "max_length": 32, "idle": 0.3, "backpressure": 0.3, "length": 32}
DEFAULT_SEED = 18
DEFAULT_COUNT = 60
LOCK = "/tmp/fred-heavy.lock"
#: Per-mutant timeout unless ``--timeout`` is given: TIMEOUT_FACTOR x the unmutated design's
#: build and run (about 15-25 s for Fred_2(4)), at least MIN_TIMEOUT; DEFAULT_TIMEOUT when the
#: original is not run (``--skip-original``); the original itself gets ORIGINAL_TIMEOUT.
TIMEOUT_FACTOR = 3
MIN_TIMEOUT = 60
DEFAULT_TIMEOUT = 120
ORIGINAL_TIMEOUT = 900

OPERATORS = ("and-or", "or-and", "drop-not", "add-xor", "add-sub", "sub-add", "cmp",
             "ternary-swap", "if-negate", "const-flip", "slice-shift")


@dataclass(frozen=True)
class Mutant:
    """One single-line change of the Verilog: line ``line`` (1-based) of module ``module``
    reads ``before`` and becomes ``after``."""

    module: str
    line: int
    operator: str
    before: str
    after: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line}:{self.operator}"

    def apply(self, verilog: str) -> str:
        lines = verilog.split("\n")
        if lines[self.line - 1] != self.before:
            raise ValueError(f"mutant {self.key}: line {self.line} is not {self.before!r} "
                             f"(was the Verilog generated by another version?)")
        lines[self.line - 1] = self.after
        return "\n".join(lines)


_MODULE = re.compile(r"^module\s+(\\\S+|\w+)")
_DECL = re.compile(r"^\s*(?:input|output|wire|reg)\s+(?:\[(\d+):0\]\s+)?(\\\S+|\w+)")
_SLICE = re.compile(r"\b(mode|modes|write__payload)\[(\d+)(?::(\d+))?\]")
_TOKEN = re.compile(r"\\\S+|[A-Za-z_][A-Za-z0-9_$]*")
#: The port name of a named port connection ``.name(expr)`` (a port of the instantiated module,
#: not a read of the local wire ``name``; only ``expr`` is read).
_PORT_NAME = re.compile(r"^\s*\.(?:\\\S+\s|[A-Za-z_][A-Za-z0-9_$]*)\s*\(")
_CMP = [(" == ", " != "), (" != ", " == "), (" < ", " <= "), (" >= ", " > ")]


def _line_mutations(line: str, widths: dict, in_process: bool, after_rst: bool):
    """(operator, new line) for every mutation of ``line`` (at most one per operator)."""
    stripped = line.strip()
    out = []
    if stripped.startswith("assign "):
        lhs, _, rhs = stripped[len("assign "):].partition(" = ")
        if not rhs:
            return out
        head = line[:line.index(" = ") + 3]
        if " & " in rhs:
            out.append(("and-or", head + rhs.replace(" & ", " | ", 1)))
        if " | " in rhs:
            out.append(("or-and", head + rhs.replace(" | ", " & ", 1)))
        if rhs.startswith("~ "):
            out.append(("drop-not", head + rhs[2:]))
        if " + " in rhs:
            out.append(("add-xor", head + rhs.replace(" + ", " ^ ", 1)))
            out.append(("add-sub", head + rhs.replace(" + ", " - ", 1)))
        if " - " in rhs:
            out.append(("sub-add", head + rhs.replace(" - ", " + ", 1)))
        for a, b in _CMP:
            if a in rhs:
                out.append(("cmp", head + rhs.replace(a, b, 1)))
                break
        m = re.match(r"^(.*?) \? (.*?) : (.*?);$", rhs)
        if m:
            out.append(("ternary-swap", head + f"{m.group(1)} ? {m.group(3)} : {m.group(2)};"))
        s = _SLICE.search(rhs)
        if s:
            name, hi, lo = s.group(1), int(s.group(2)), s.group(3)
            width = widths.get(name, 1)
            lo = hi if lo is None else int(lo)
            shift = 1 if hi + 1 < width else -1
            if lo + shift >= 0:
                new = (f"{name}[{hi + shift}]" if s.group(3) is None
                       else f"{name}[{hi + shift}:{lo + shift}]")
                out.append(("slice-shift", head + rhs[:s.start()] + new + rhs[s.end():]))
    elif in_process:
        m = re.match(r"^(\s*)if \((.*)\) begin$", line)
        if m and not m.group(2).startswith("\\$auto") and m.group(2) != "rst":
            out.append(("if-negate", f"{m.group(1)}if (!({m.group(2)})) begin"))
        m = re.match(r"^(\s*)(\S.*) = 1'h([01]);$", line)
        if m and not after_rst and not stripped.startswith("reg "):
            out.append(("const-flip", f"{m.group(1)}{m.group(2)} = 1'h{1 - int(m.group(3))};"))
    return out


def _token_uses(lines: list[str]) -> dict[str, int]:
    """How often each identifier is used in a module's lines outside declarations (escaped
    identifiers ``\\a.b`` included) and outside the port names of named port connections
    (``.select__1(mode[3])`` reads ``mode``, not the local wire ``select__1``)."""
    uses: dict[str, int] = defaultdict(int)
    for line in lines:
        if _DECL.match(line) or _MODULE.match(line):
            continue
        for token in _TOKEN.findall(_PORT_NAME.sub("(", line, count=1)):
            uses[token] += 1
    return uses


def sites(verilog: str, *, skip_modules: tuple[str, ...] = ()) -> list[Mutant]:
    """Every candidate mutant of ``verilog``, in file order. Assignments to a wire nothing reads
    (the field views Amaranth writes for readability, e.g. ``\\mode.in0_en``) are skipped: a
    mutant there is equivalent by construction."""
    result = []
    lines = verilog.split("\n")
    module, widths, in_process, after_rst, uses = None, {}, False, False, {}
    for number, line in enumerate(lines, start=1):
        m = _MODULE.match(line)
        if m:
            module, widths, in_process = m.group(1).lstrip("\\"), {}, False
            end = next(i for i in range(number, len(lines)) if lines[i].startswith("endmodule"))
            uses = _token_uses(lines[number - 1:end])
            continue
        if line.startswith("endmodule"):
            module = None
            continue
        if module is None or module in skip_modules:
            continue
        d = _DECL.match(line)
        if d:
            widths[d.group(2)] = int(d.group(1)) + 1 if d.group(1) else 1
        if line.strip().startswith("always"):
            in_process = True
        elif line.startswith("  assign") or line == "  end":
            in_process = False
        a = re.match(r"^  assign (\\\S+ |\w+) = ", line)
        if a and uses.get(a.group(1).strip(), 0) <= 1:
            continue   # nothing reads this wire (its one use is this assignment)
        for operator, after in _line_mutations(line, widths, in_process, after_rst):
            if after != line:
                result.append(Mutant(module, number, operator, line, after))
        after_rst = bool(re.match(r"^\s*if \(rst\) begin$", line))
    return result


def choose(candidates: list[Mutant], count: int, seed: int = DEFAULT_SEED) -> list[Mutant]:
    """``count`` mutants drawn reproducibly: modules in a seeded random order, round-robin,
    each module's sites in a seeded random order (so small modules get their share)."""
    rng = random.Random(seed)
    by_module: dict[str, list[Mutant]] = {}
    for mutant in candidates:
        by_module.setdefault(mutant.module, []).append(mutant)
    modules = sorted(by_module)
    rng.shuffle(modules)
    for name in modules:
        rng.shuffle(by_module[name])
    chosen = []
    while len(chosen) < count and any(by_module.values()):
        for name in modules:
            if by_module[name] and len(chosen) < count:
                chosen.append(by_module[name].pop())
    return chosen


def design_verilog(design: dict | None = None) -> tuple[str, str]:
    from hdl.designs.registry import get_design
    from hdl.emit.verilog import to_verilog
    d = get_design("switch")
    return to_verilog(d.build(**(design or DESIGN)), name=d.top), d.top


def bench_params(design: dict) -> dict:
    from hdl.contracts.config_port import config_words
    from hdl.contracts.timing import switch_latency
    latency = switch_latency(ports=design["ports"], middle=design["middle"], dtype=design["dtype"])
    return dict(design, latency=latency,
                config_words=config_words(design["ports"], design["middle"]), **BENCH_PARAMS)


def run_one(verilog: str, top: str, design: dict, build_root: Path) -> dict:
    """Build and run the benches on one Verilog text (in this process); the outcome."""
    os.environ["FRED_SIM_BUILD"] = str(build_root)
    from cocotb_tests import runner
    runner.SIM_BUILD = build_root
    started = time.monotonic()
    try:
        result = runner.run_bench(verilog=(verilog, top), test_module="cocotb_tests.bench_switch",
                                  testcase=TESTCASES, bench_params=bench_params(design),
                                  run_name="mutant")
        return {"status": "survived", "tests": result.tests,
                "seconds": round(time.monotonic() - started, 1)}
    except AssertionError as exc:
        text = str(exc)
        failed = _failed_tests(build_root)
        return {"status": "killed", "by": failed or text.splitlines()[0][:200],
                "seconds": round(time.monotonic() - started, 1)}
    except Exception as exc:   # noqa: BLE001 -- a build failure: the mutant is invalid
        return {"status": "invalid", "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                "seconds": round(time.monotonic() - started, 1)}


def _failed_tests(build_root: Path) -> list[str]:
    from xml.etree import ElementTree
    failed = []
    for xml in build_root.glob("*/runs/mutant*/results.xml"):
        for case in ElementTree.parse(xml).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(case.get("name"))
    return failed


def _child(args) -> int:
    """``run-one``: one mutant (or the original with ``--index -1``), result as JSON on stdout."""
    design = json.loads(args.design) if args.design else DESIGN
    verilog, top = design_verilog(design)
    if args.index >= 0:
        mutants = choose(sites(verilog), args.count, args.seed)
        verilog = mutants[args.index].apply(verilog)
    build_root = Path(args.build_root)
    outcome = run_one(verilog, top, design, build_root)
    print("MUTATION-RESULT " + json.dumps(outcome))
    return 0


def _run_child(index: int, args, out: Path, *, locked: bool = False) -> dict:
    """Run one mutant in a child process (its own process group) under the lock; the outcome.

    The lock is taken here, before the clock starts, so ``--timeout`` bounds the mutant's own
    build and simulation, not the wait for other jobs. A child still running at the timeout is
    ended with its whole process group (the Python child, Verilator's make and compilers, the
    simulator): SIGTERM, then SIGKILL 10 s later. A mutant that hangs the simulation (a
    deadlock the watchdog does not see, or a combinational loop that never settles) counts as
    killed, with ``"timeout": true`` in its outcome."""
    build_root = (out / "sim_build" / (f"m{index:03d}" if index >= 0 else "original")).resolve()
    cmd = [sys.executable, "-m", "studies.verification.mutation", "run-one", "--index", str(index),
           "--seed", str(args.seed), "--count", str(args.count), "--build-root", str(build_root)]
    if args.design:
        cmd += ["--design", args.design]
    env = dict(os.environ, COCOTB_LOG_LEVEL="WARNING")
    with _heavy_lock(None if locked else args.lock):
        started = time.monotonic()
        finished = run_limited(cmd, env=env, timeout=args.timeout)
        if finished is None:
            outcome = {"status": "killed", "by": f"timeout after {args.timeout} s", "timeout": True}
        else:
            returncode, stdout, stderr = finished
            line = next((l for l in stdout.splitlines() if l.startswith("MUTATION-RESULT ")), None)
            if line is None:   # the simulator died without a result: a crash kills the mutant
                outcome = {"status": "killed", "by": f"crash (exit {returncode}): "
                           + (stderr.strip().splitlines() or [""])[-1][:200]}
            else:
                outcome = json.loads(line[len("MUTATION-RESULT "):])
        outcome["wall_seconds"] = round(time.monotonic() - started, 1)
    if not args.keep and index >= 0:
        shutil.rmtree(build_root, ignore_errors=True)
    return outcome


class _heavy_lock:
    """``flock`` on the shared lock file (the same lock ``flock(1)`` takes), or nothing."""

    def __init__(self, path: str | None):
        self.path = path
        self.file = None

    def __enter__(self):
        if self.path:
            import fcntl
            self.file = open(self.path, "a")
            fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.file is not None:
            self.file.close()   # closing the descriptor releases the lock


def run_limited(cmd: list[str], *, env=None, timeout: float) -> tuple[int, str, str] | None:
    """Run ``cmd`` as the leader of a new process group; ``(returncode, stdout, stderr)``, or
    None when it ran longer than ``timeout`` seconds, in which case the whole group (the command
    and every process it started: make, compilers, the simulator) has been ended."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None
    except BaseException:   # the campaign itself interrupted: leave no simulator behind
        _kill_group(proc, grace=2.0)
        raise
    return proc.returncode, stdout, stderr


def _kill_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """End ``proc`` and every process of its group (it leads its own session): SIGTERM, up to
    ``grace`` seconds to exit, then SIGKILL for whatever of the group is left."""
    import signal
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=grace)   # returns once every holder of the pipes is gone
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _select(indices: str | None, count: int) -> list[int]:
    if not indices:
        return list(range(count))
    chosen = set()
    for part in indices.split(","):
        a, _, b = part.partition("-")
        chosen.update(range(int(a), int(b or a) + 1))
    return sorted(i for i in chosen if 0 <= i < count)


def campaign(args) -> int:
    """The campaign ``fred mutation`` runs; 0 when it completed (2: the unmutated design fails).

    ``args`` holds the options of ``fred mutation`` (see its ``--help``): ``seed``, ``count``,
    ``design`` (JSON text or None), ``only``, ``jobs``, ``batch``, ``timeout`` (None: from the
    original's time), ``lock``, ``out``, ``keep``, ``list``, ``skip_original``, ``table``,
    ``summary``, ``rerun``, ``resume``. ``args.timeout`` is set to the timeout used.
    """
    from concurrent.futures import ThreadPoolExecutor
    out = check_writable(args.out, folder=True)   # before the Verilog is generated
    out.mkdir(parents=True, exist_ok=True)
    design = json.loads(args.design) if args.design else DESIGN
    verilog, _ = design_verilog(design)
    candidates = sites(verilog)
    mutants = choose(candidates, args.count, args.seed)
    indices = _select(args.only, len(mutants))
    print(f"Fred_{design['middle']}({design['ports']}) {design['dtype']}: {len(candidates)} "
          f"candidate sites in {len({c.module for c in candidates})} modules; {len(mutants)} "
          f"mutants (seed {args.seed}); running {len(indices)}", flush=True)
    if args.list:
        for i, m in enumerate(mutants):
            print(f"{i:3d} {m.operator:13s} {m.module}:{m.line}\n      - {m.before.strip()}\n"
                  f"      + {m.after.strip()}")
        return 0
    if args.summary or args.table:   # the outcomes saved so far (partial.json)
        if not (out / "partial.json").is_file():
            raise FredError(f"{out / 'partial.json'} not found: no outcomes saved in {out} yet")
        saved = json.loads((out / "partial.json").read_text())["results"]
        saved = {int(i): o for i, o in saved.items()}
        if args.table:
            print(markdown_table(mutants, saved))
            return 0
        return _summarize(mutants, saved, out, design, args, write=False)
    if not args.skip_original:
        timeout, args.timeout = args.timeout, args.timeout or ORIGINAL_TIMEOUT
        # built afresh, as every mutant is: its time is the yardstick of the timeout
        shutil.rmtree(out / "sim_build" / "original", ignore_errors=True)
        original = _run_child(-1, args, out)
        print(f"original design: {original['status']} ({original.get('wall_seconds')} s)", flush=True)
        if original["status"] != "survived":
            print(f"the unmutated design fails the benches: {original}", file=sys.stderr)
            return 2
        # a mutant may take longer than the original (a flow slowed down, a watchdog to run
        # out) but a mutant that takes several times as long has hung the simulation
        args.timeout = timeout or max(MIN_TIMEOUT, round(TIMEOUT_FACTOR * original["wall_seconds"]))
    args.timeout = args.timeout or DEFAULT_TIMEOUT
    print(f"timeout per mutant: {args.timeout} s", flush=True)
    partial = out / "partial.json"
    results = {}
    if (args.resume or args.rerun) and partial.exists():   # outcomes saved before (same mutants)
        saved = json.loads(partial.read_text())
        if (saved["seed"], saved["count"], saved["design"]) == (args.seed, args.count, design):
            results = {int(i): o for i, o in saved["results"].items()}
            print(f"resuming: {len(results)} outcomes from {partial}", flush=True)
    lock = threading.Lock()
    bench = bench_version()

    def one(i, locked=False):
        outcome = _run_child(i, args, out, locked=locked)
        outcome["bench"] = bench
        if i in results:   # --rerun: keep the history (e.g. survived, then killed by a new check)
            outcome["previous"] = results[i].get("previous", []) + [
                {k: v for k, v in results[i].items() if k != "previous"}]
        m = mutants[i]
        print(f"[{i:3d}] {outcome['status']:8s} {m.operator:13s} {m.module}:{m.line} "
              f"({outcome['wall_seconds']} s) {outcome.get('by', '')}", flush=True)
        with lock:   # saved after every mutant: a campaign cut short resumes (--resume)
            results[i] = outcome
            # atomic: a campaign killed mid-write leaves the previous complete file to resume from
            write_json(partial, {"seed": args.seed, "count": args.count, "design": design,
                                 "results": results}, indent=1, sort_keys=False)
        return i, outcome

    todo = indices if args.rerun else [i for i in indices if i not in results]
    if args.jobs > 1:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(one, todo))
    else:   # --batch mutants per hold of the lock (on a busy machine the wait dominates)
        for start in range(0, len(todo), max(1, args.batch)):
            with _heavy_lock(args.lock):
                for i in todo[start:start + max(1, args.batch)]:
                    one(i, locked=True)
    return _summarize(mutants, results, out, design, args)


def bench_version() -> str:
    """Short hash of the bench code the mutants run (bench_switch.py and its library), so a
    saved outcome says which version of the checks produced it."""
    import hashlib

    import cocotb_tests
    benches = Path(cocotb_tests.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in [benches / "bench_switch.py"] + sorted((benches / "lib").glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def _code_change(m: Mutant) -> str:
    def code(text):
        return "`" + text.strip().replace("|", "\\|") + "`"
    return f"{code(m.before)} -> {code(m.after)}"


def _killed_by(outcome: dict | None) -> str:
    """What killed the mutant (the failing bench tests, a crash, the timeout), then what each
    earlier run of it (``--rerun``) ended in; a ``|`` becomes ``/`` (a Markdown cell)."""
    by = outcome.get("by", "") if outcome else ""
    by = ", ".join(by) if isinstance(by, list) else str(by)
    for earlier in (outcome or {}).get("previous", []):
        bench = f", bench {earlier['bench']}" if earlier.get("bench") else ""
        by += (f" (earlier run: {earlier['status']}"
               f"{' by the timeout' if earlier.get('timeout') else ''}{bench})")
    return by.replace("|", "/")


#: the table's columns; a row is (index, :class:`Mutant`, outcome or None when not run)
TABLE_COLUMNS = [Column("#", 0), Column("operator", lambda r: r[1].operator),
                 Column("module", lambda r: f"`{r[1].module}`"), Column("change", 1, _code_change),
                 Column("outcome", 2, lambda o: o["status"] if o else "not run"),
                 Column("killed by", 2, _killed_by)]


def markdown_table(mutants: list[Mutant], results: dict[int, dict]) -> str:
    """One Markdown row per mutant: index, operator, module, the change, the outcome and what
    killed it (the failing bench tests, a crash, or the timeout); no final newline (printed)."""
    rows = [(i, m, results.get(i)) for i, m in enumerate(mutants)]
    return table_text(TABLE_COLUMNS, rows)


def _summarize(mutants, results, out: Path, design, args, *, write: bool = True) -> int:
    killed = sum(1 for o in results.values() if o["status"] == "killed")
    timeouts = sum(1 for o in results.values() if o.get("timeout"))
    survived = [i for i, o in results.items() if o["status"] == "survived"]
    invalid = [i for i, o in results.items() if o["status"] == "invalid"]
    valid = len(results) - len(invalid)
    score = killed / valid if valid else 0.0
    print(f"\nmutation score: {killed} killed / {valid} mutants = {100 * score:.1f} %"
          + (f" ({len(invalid)} invalid, not counted)" if invalid else "")
          + (f"; {timeouts} of the killed by the timeout (hung simulation)" if timeouts else ""))
    for i in survived:
        m = mutants[i]
        print(f"survivor {i}: {m.operator} in {m.module} line {m.line}\n  - {m.before.strip()}\n"
              f"  + {m.after.strip()}")
    record = {"design": design, "seed": args.seed, "count": args.count,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "score": score, "killed": killed, "valid": valid, "timeouts": timeouts,
              "timeout_seconds": getattr(args, "timeout", None),
              "mutants": [dict(asdict(mutants[i]), index=i, **results[i]) for i in sorted(results)]}
    if write:
        write_json(out / "results.json", record, sort_keys=False)
        print(f"results: {out / 'results.json'}")
    return 0


def main(argv=None) -> int:
    """The worker entry ``python -m studies.verification.mutation run-one --index I --seed S
    --count N --build-root DIR [--design JSON]`` that :func:`_run_child` starts for each mutant
    (``--index -1``: the unmutated design); prints ``MUTATION-RESULT <json>``. The campaign
    itself is ``fred mutation``."""
    parser = argparse.ArgumentParser(prog="python -m studies.verification.mutation",
                                     description=main.__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run-one")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--count", type=int, default=DEFAULT_COUNT, help="mutants to make")
    p.add_argument("--design", help="JSON of the switch parameters (default Fred_2(4) int32)")
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--build-root", required=True)
    return _child(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
