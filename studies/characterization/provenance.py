"""Provenance of one ``fred characterize`` run, stamped on every record it measures.

A characterization file may hold records from several runs (``fred characterize --merge`` adds a
run's points to an existing file), so each timing point and cost record carries the run that
produced it: the command line, the date, the source commit (``+dirty`` when a tracked file outside the outputs
``data/`` and ``docs/`` had uncommitted changes: then the commit alone does not reproduce the
sources) and the tool versions.
"""

from __future__ import annotations

import datetime as _dt
import subprocess
from pathlib import Path

__all__ = ["source_commit", "run_record", "now_iso"]

ROOT = Path(__file__).resolve().parents[2]


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def source_commit(root: Path = ROOT) -> str:
    """``git rev-parse HEAD`` of the source tree (+ ``+dirty`` if a tracked source changed), or
    ``unknown (<why>)`` outside a git checkout (an installed package)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
        # the outputs (data/, docs/) do not make the measured sources differ from the commit
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":!data", ":!docs"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    return head + ("+dirty" if dirty else "")


def run_record(command: str, *, tools: dict, seed: int | None, jobs: int | None,
               date: str | None = None, commit: str | None = None) -> dict:
    """``{command, date, commit, tools, seed, jobs}`` of one run."""
    return {"command": command, "date": date or now_iso(),
            "commit": commit if commit is not None else source_commit(),
            "tools": dict(tools), "seed": seed, "jobs": jobs}
