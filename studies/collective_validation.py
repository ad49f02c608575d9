"""The model's collectives on their own against measured NCCL collectives: ``fred validate --collectives``.

The end-to-end validation (:mod:`studies.validation`) checks whole training iterations, where
an error in a collective can hide behind compute. This one checks the collectives alone: each
case of ``data/validation/nccl_collectives.toml`` (an nccl-tests measurement or an NCCL
maintainer's figure, with its GitHub thread) runs on its platform's shipped configuration
(``configs/<platform>.toml``, ``npu.count`` set to the case's GPUs):

* ``ring``: the model's ring (:func:`sysmodel.collectives.evaluate` with ``algorithm="ring"``)
  on the platform's switch-tree variant without in-switch collectives;
* ``nvls``: NVLink SHARP's GPU-driven multimem protocol (:mod:`sysmodel.multimem`) on the
  variant with in-switch collectives, whose ``in_switch_efficiency`` is the mechanism's one
  parameter.

One parameter set for every case; the points that set a parameter say so (``fits``) and are
listed as fitted; every other point is a prediction. The file's ``[[statement]]`` entries are
qualitative claims the model must reproduce (NVLS no faster than the ring for all-gather and
reduce-scatter), checked at every GPU count from 3 to the platform's node size (NCCL runs NVLS
from 3 GPUs, https://github.com/NVIDIA/nccl src/transport/nvls.cc).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import InputModel, PositiveInt, PositiveNumber, validate_input
from sysmodel.collectives import Collective, evaluate
from sysmodel.multimem import MULTIMEM_OPS, multimem_time_s
from sysmodel.platform import Platform, load_platform
from sysmodel.toml_file import parse_toml
from hdl.contracts.text_file import read_text_file

__all__ = ["DEFAULT_COLLECTIVE_CASES", "CollectiveCase", "Statement", "load_collective_cases",
           "shipped_platform", "bus_factor", "model_time_s", "run_collective_validation",
           "CollectiveRow", "StatementRow", "CollectiveValidation", "ALGORITHMS", "TARGET"]

ALGORITHMS = ("ring", "nvls")
#: The issue's targets: mean |error| and worst |error| over every point.
TARGET = {"mean_abs_error": 0.05, "worst_abs_error": 0.10}


def DEFAULT_COLLECTIVE_CASES() -> Path:
    """``data/validation/nccl_collectives.toml`` at the repository root."""
    return Path(__file__).resolve().parent.parent / "data" / "validation" / "nccl_collectives.toml"


# -- the case file's schema (pydantic) ----------------------------------------------------------
class _Case(InputModel):
    name: str
    platform: str
    collective: Literal[MULTIMEM_OPS]
    algorithm: Literal[ALGORITHMS]
    gpus: Annotated[int, Field(strict=True, ge=2)]
    size_bytes: PositiveInt
    busbw_gbps: PositiveNumber | None = None
    algbw_gbps: PositiveNumber | None = None
    thread: str
    who: str
    size_note: str = ""
    fits: str = ""

    @model_validator(mode="after")
    def _one_bandwidth(self):
        if (self.busbw_gbps is None) == (self.algbw_gbps is None):
            raise ValueError("give exactly one of busbw_gbps and algbw_gbps")
        if not self.thread.startswith("https://"):
            raise ValueError(f"thread must be the source's https:// address, got {self.thread!r}")
        return self


class _Statement(InputModel):
    name: str
    platform: str
    collectives: Annotated[list[Literal["all-gather", "reduce-scatter"]], Field(min_length=1)]
    claim: str
    paraphrase: str
    thread: str
    who: str


class _CaseFile(InputModel):
    source: str
    retrieved: str
    case: Annotated[list[_Case], Field(min_length=1)]
    statement: list[_Statement] = []


@dataclass(frozen=True)
class CollectiveCase:
    """One measured collective: ``measured_algbw_gbps`` = size / measured time (derived from
    the file's busbw where it gives that)."""

    name: str
    platform: str
    collective: str
    algorithm: str
    gpus: int
    size_bytes: int
    measured_algbw_gbps: float
    thread: str
    who: str
    fits: str

    @property
    def measured_s(self) -> float:
        return self.size_bytes / (self.measured_algbw_gbps * 1e9)


@dataclass(frozen=True)
class Statement:
    name: str
    platform: str
    collectives: tuple
    claim: str
    thread: str


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and
    all-gather (nccl-tests doc/PERFORMANCE.md)."""
    return (2 if collective == "all-reduce" else 1) * (n - 1) / n


def load_collective_cases(path: str | Path | None = None) -> tuple[list[CollectiveCase], list[Statement], dict]:
    """(cases, statements, header) of a collective-validation file (errors name the file and key)."""
    path = Path(path) if path else DEFAULT_COLLECTIVE_CASES()
    if not path.is_file():
        raise FredError(f"collective validation file {path} does not exist")
    doc = validate_input(_CaseFile, parse_toml(read_text_file(path, "collective validation file"), str(path)), str(path))
    names = [c.name for c in doc.case]
    if len(set(names)) != len(names):
        raise FredError(f"{path}: case names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    cases = [CollectiveCase(
        name=c.name, platform=c.platform, collective=c.collective, algorithm=c.algorithm, gpus=c.gpus,
        size_bytes=c.size_bytes,
        measured_algbw_gbps=c.algbw_gbps if c.algbw_gbps is not None else c.busbw_gbps / bus_factor(c.collective, c.gpus),
        thread=c.thread, who=c.who, fits=c.fits) for c in doc.case]
    statements = [Statement(name=s.name, platform=s.platform, collectives=tuple(s.collectives),
                            claim=s.claim, thread=s.thread) for s in doc.statement]
    return cases, statements, {"source": doc.source, "retrieved": doc.retrieved}


def shipped_platform(name: str, characterization: str | Path | None = None) -> Platform:
    """The shipped ``configs/<name>.toml`` (an error names the missing file)."""
    entry = resources.files("sysmodel").joinpath("configs", f"{name}.toml")
    if not entry.is_file():
        raise FredError(f"no shipped platform configs/{name}.toml for the validation's platform {name!r}")
    with resources.as_file(entry) as p:
        return load_platform(p, characterization=characterization)


def _fabric(platform: Platform, algorithm: str) -> str:
    """The platform's switch-tree variant that runs ``algorithm``: with in-switch collectives
    for ``nvls``, without for ``ring`` (the first by name)."""
    want = algorithm == "nvls"
    for name in sorted(platform.variants):
        if platform.variants[name].in_switch == want:
            return name
    raise FredError(f"platform {platform.name!r} has no switch-tree variant "
                    f"{'with' if want else 'without'} in-switch collectives for {algorithm!r}")


def model_time_s(platform: Platform, collective: str, algorithm: str, gpus: int, size: float) -> float:
    """The model's seconds for ``collective`` of ``size`` bytes on GPUs 0..gpus-1 of
    ``platform`` (``npu.count`` = ``gpus``) with ``algorithm`` (``ring`` or ``nvls``)."""
    p = platform.scaled(npus=gpus)
    c = Collective(collective, tuple(range(gpus)), size)
    fabric = _fabric(p, algorithm)
    if algorithm == "nvls":
        return multimem_time_s(p, fabric, c)
    return evaluate(p, fabric, [c], algorithm="ring").time_s


# -- the result --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CollectiveRow:
    """One case: ``error`` = model time / measured time - 1 (bandwidths: nccl-tests' algbw and
    busbw, GB/s); ``fitted``: the parameter the point sets, empty for a prediction."""

    case: str
    platform: str
    collective: str
    algorithm: str
    gpus: int
    size_bytes: int
    measured_busbw_gbps: float
    model_busbw_gbps: float
    measured_algbw_gbps: float
    model_algbw_gbps: float
    error: float
    fitted: str
    thread: str


@dataclass(frozen=True)
class StatementRow:
    """A statement checked at every GPU count: ``holds`` when NVLS is no faster than the ring
    at each; ``nvls_over_ring`` the smallest model NVLS time / ring time seen (>= 1: holds)."""

    statement: str
    claim: str
    holds: bool
    nvls_over_ring: float
    worst_at: str
    thread: str


@dataclass(frozen=True)
class CollectiveValidation:
    cases: list              # [CollectiveRow]
    statements: list         # [StatementRow]
    mean_abs_error: float
    worst_abs_error: float
    worst_case: str
    mean_abs_error_predicted: float
    worst_abs_error_predicted: float
    fitted: list             # names of the fitted cases
    parameters: dict         # {platform: {"link_efficiency", "in_switch_efficiency"}}
    source: str
    target: dict
    meets_target: bool


def _check_statement(platform: Platform, statement: Statement, size: float = 2 ** 33) -> StatementRow:
    worst, where = float("inf"), ""
    for op in statement.collectives:
        for n in range(3, platform.npus_per_l1 + 1):
            ratio = (model_time_s(platform, op, "nvls", n, size)
                     / model_time_s(platform, op, "ring", n, size))
            if ratio < worst:
                worst, where = ratio, f"{op}, {n} GPUs"
    return StatementRow(statement=statement.name, claim=statement.claim, holds=worst >= 1.0,
                        nvls_over_ring=worst, worst_at=where, thread=statement.thread)


def run_collective_validation(cases_path=None, *, characterization=None) -> CollectiveValidation:
    """Every case and statement of the file against the model (see the module docstring)."""
    cases, statements, header = load_collective_cases(cases_path)
    platforms: dict[str, Platform] = {}

    def platform(name: str) -> Platform:
        if name not in platforms:
            platforms[name] = shipped_platform(name, characterization)
        return platforms[name]

    rows = []
    for case in cases:
        p = platform(case.platform)
        if case.gpus > p.npus_per_l1:
            raise FredError(f"case {case.name}: {case.gpus} GPUs do not fit under one "
                            f"{p.npus_per_l1}-GPU switch of {p.name}")
        t = model_time_s(p, case.collective, case.algorithm, case.gpus, case.size_bytes)
        algbw = case.size_bytes / t / 1e9
        k = bus_factor(case.collective, case.gpus)
        rows.append(CollectiveRow(
            case=case.name, platform=case.platform, collective=case.collective,
            algorithm=case.algorithm, gpus=case.gpus, size_bytes=case.size_bytes,
            measured_busbw_gbps=case.measured_algbw_gbps * k, model_busbw_gbps=algbw * k,
            measured_algbw_gbps=case.measured_algbw_gbps, model_algbw_gbps=algbw,
            error=t / case.measured_s - 1, fitted=case.fits, thread=case.thread))
    checked = [_check_statement(platform(s.platform), s) for s in statements]
    errors = [abs(r.error) for r in rows]
    predicted = [abs(r.error) for r in rows if not r.fitted] or [0.0]
    worst = max(rows, key=lambda r: abs(r.error))
    mean = sum(errors) / len(errors)
    parameters = {name: {"link_efficiency": p.link_efficiency,
                         "in_switch_efficiency": {v: p.variants[v].in_switch_efficiency
                                                  for v in sorted(p.variants) if p.variants[v].in_switch}}
                  for name, p in sorted(platforms.items())}
    return CollectiveValidation(
        cases=rows, statements=checked, mean_abs_error=mean, worst_abs_error=abs(worst.error),
        worst_case=worst.case, mean_abs_error_predicted=sum(predicted) / len(predicted),
        worst_abs_error_predicted=max(predicted), fitted=[r.case for r in rows if r.fitted],
        parameters=parameters, source=header["source"], target=dict(TARGET),
        meets_target=(mean <= TARGET["mean_abs_error"] and abs(worst.error) <= TARGET["worst_abs_error"]
                      and all(s.holds for s in checked)))
