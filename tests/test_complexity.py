"""Function complexity: no function in the project's packages has a cyclomatic complexity above
:data:`LIMIT`, except the functions of :data:`ALLOWED`.

Measured with lizard (the ``lizard`` package, the ``test`` extra; the same numbers as
``lizard -C 30 -w hdl eda cocotb_tests sysmodel studies fred``): a function's CCN is 1 plus
its decision points (``if``/``elif``, ``for``, ``while``, ``except``, ``and``/``or``,
conditional expressions, ``if`` clauses of comprehensions). A nested function counts on its
own, not in its parent's number. A function above the limit is split into named steps (see
the parsers of ``sysmodel/astrasim.py`` or the ``_Links`` of ``cocotb_tests/packet_sim.py``).
"""

from __future__ import annotations

from pathlib import Path

import lizard

ROOT = Path(__file__).resolve().parents[1]
#: The packages measured (``tests``, ``scripts`` and ``benchmarks`` are not).
PACKAGES = ("hdl", "eda", "cocotb_tests", "sysmodel", "studies", "fred")
#: The source files lizard reads in them (the Python, and the lock-step simulator's C++).
SUFFIXES = (".py", ".cpp")
LIMIT = 30

#: ``(path, function name as lizard names it) -> why it may stay above the limit``. Lizard
#: names a method by its own name (``Engine.run`` is ``run``).
ALLOWED: dict = {}   # (none at present)


def source_files() -> list[Path]:
    """Every source file of :data:`PACKAGES` lizard reads, sorted (caches skipped)."""
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*")
                  if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts)


def over_limit(info, path: str, allowed=ALLOWED, limit: int = LIMIT) -> list[str]:
    """One line per function of ``info`` (a lizard ``FileInformation`` of the file ``path``,
    relative to the repository) above ``limit`` that ``allowed`` does not list."""
    return [f"{path}:{f.start_line}: {f.name} has cyclomatic complexity {f.cyclomatic_complexity} "
            f"(limit {limit})"
            for f in info.function_list
            if f.cyclomatic_complexity > limit and (path, f.name) not in allowed]


def measure() -> dict[str, object]:
    """``{relative path: lizard FileInformation}`` of every source file."""
    return {path.relative_to(ROOT).as_posix(): lizard.analyze_file(str(path))
            for path in source_files()}


def test_no_function_above_the_complexity_limit():
    measured = measure()
    assert len(measured) > 100       # the packages were found (the check is not vacuous)
    bad = [line for path, info in measured.items() for line in over_limit(info, path)]
    assert not bad, "split these into named steps:\n" + "\n".join(bad)


def test_every_allowed_function_is_still_above_the_limit():
    """An entry of :data:`ALLOWED` whose function was split (or renamed) goes: the list only
    names what is still over the limit."""
    ccn = {(path, f.name): f.cyclomatic_complexity
           for path, info in measure().items() for f in info.function_list}
    stale = [f"{path} {name}" for path, name in ALLOWED if ccn.get((path, name), 0) <= LIMIT]
    assert not stale, "no longer above the limit, remove from ALLOWED: " + ", ".join(stale)


def _branches(count: int) -> str:
    """Python source of a function ``f`` with ``count`` ``if`` statements: CCN ``count`` + 1."""
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(count))
    return f"def f(x):\n{body}    return -1\n"


def test_a_function_with_31_branches_is_flagged_and_30_is_not():
    over = lizard.analyze_file.analyze_source_code("synthetic.py", _branches(30))
    at = lizard.analyze_file.analyze_source_code("synthetic.py", _branches(29))
    assert [f.cyclomatic_complexity for f in over.function_list] == [31]
    assert over_limit(over, "synthetic.py") == [
        "synthetic.py:1: f has cyclomatic complexity 31 (limit 30)"]
    assert over_limit(at, "synthetic.py") == []
    # the allow-list is by (path, name): the same function elsewhere is still flagged
    assert over_limit(over, "synthetic.py", allowed={("synthetic.py", "f"): "test"}) == []
    assert over_limit(over, "other.py", allowed={("synthetic.py", "f"): "test"}) != []
