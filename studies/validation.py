"""The training model against measured training runs (docs/sysmodel.md, Fidelity): ``fred validate``.

The cases are Megatron-LM iterations measured on DGX A100 80 GB nodes by Korthikanti et al.
2022 (``data/validation/korthikanti2022.toml``: Table 5 times, Table 3 configurations, each
value's source in the file). Each case runs through the same :func:`simulate_iteration` as the
wafer evaluation -- or, for a long 1F1B pipeline,
:func:`~sysmodel.pipeline_collapse.collapsed_iteration`: its figures carried from two short
runs whose steady periods are checked to repeat, equal to the whole run to 1e-9 of the
iteration (``--whole`` runs every case whole) -- on the GPU-cluster platform
``configs/a100-cluster.toml`` (GPUs under an NVSwitch L1, nodes under an InfiniBand L2: the
two-level tree, no in-switch reduction) with ``npu.count`` set to the case's GPUs. One
platform file, one set of efficiency parameters,
for every case; nothing is fitted per case.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from typing import Annotated, Literal

from pydantic import Field, model_validator

from hdl.contracts.errors import FredError
from hdl.contracts.input_schema import InputModel, PositiveInt, PositiveNumber, validate_input
from sysmodel.platform import Platform, load_platform
from sysmodel.toml_file import parse_toml
from sysmodel.pipeline_collapse import collapsed_iteration
from sysmodel.training import simulate_iteration
from sysmodel.workloads import Workload, transformer
from hdl.contracts.text_file import read_text_file

__all__ = ["ValidationCase", "load_cases", "case_workload", "run_validation", "DEFAULT_CASES",
           "cluster_platform", "MODES", "ValidationRow", "ValidationResult"]

#: Execution modes of the measured table: full recomputation (tensor parallel all-reduces),
#: selective recomputation with sequence parallelism.
MODES = {"full": dict(recompute="full", sequence_parallel=False),
         "seqsel": dict(recompute="selective", sequence_parallel=True)}
FABRIC = "cluster"


def DEFAULT_CASES() -> Path:
    """``data/validation/korthikanti2022.toml`` at the repository root."""
    return Path(__file__).resolve().parent.parent / "data" / "validation" / "korthikanti2022.toml"


@dataclass(frozen=True)
class ValidationCase:
    model: str
    mode: str
    hyper: dict
    tensor_parallel: int
    pipeline_parallel: int
    gpus: int
    global_batch: int
    micro_batch: int
    interleave: int
    measured_s: float

    @property
    def name(self) -> str:
        return f"{self.model}/{self.mode}"

    @property
    def data_parallel(self) -> int:
        return self.gpus // (self.tensor_parallel * self.pipeline_parallel)


@dataclass(frozen=True)
class ValidationRow:
    """One case: the model's seconds per iteration against the measured, ``error`` = model /
    measured - 1, with the model's breakdown, memory and notes."""

    case: str
    model: str
    mode: str
    gpus: int
    strategy: str
    interleave: int
    microbatches: int
    measured_s: float
    model_s: float
    error: float
    breakdown: dict
    memory_gb: float
    recompute: str
    notes: list
    eval_s: float
    #: (m_a, m_b): the case's figures carried from two runs of m_a and m_b microbatches whose
    #: steady periods repeat (:mod:`sysmodel.pipeline_collapse`); None: the whole iteration ran
    collapsed: tuple | None = None


@dataclass(frozen=True)
class ValidationResult:
    """Every case run, the mean absolute and the worst relative error, and whether they meet
    ``target`` (``fred validate --json`` is this, with the switch timing). ``startup_s``: the
    one-time start-up that no case is charged with (importing numba and loading the compiled
    event loop from its cache, or compiling it on a fresh clone: ``startup_compiled``); each
    row's ``eval_s`` is that case's own wall time."""

    cases: list            # [ValidationRow]
    mean_abs_error: float
    worst_abs_error: float
    worst_case: str
    platform: str
    compute: dict | None
    link_efficiency: object
    source: str
    target: dict
    meets_target: bool
    startup_s: float = 0.0   # wall seconds of the one-time start-up before the first case
    startup_compiled: bool = False   # whether that start-up compiled the loop (no cached copy)


# -- the validation-case file's schema (pydantic; data/validation/*.toml) ------------------------
class _Model(InputModel):
    """One ``[model.<name>]``: hyper-parameters, the measured run's parallelism and batch, and
    its measured seconds per iteration by execution mode (:data:`MODES`)."""

    layers: PositiveInt
    hidden: PositiveInt
    heads: PositiveInt
    seq: PositiveInt
    vocab: PositiveInt
    tensor_parallel: PositiveInt
    pipeline_parallel: PositiveInt
    gpus: PositiveInt
    global_batch: PositiveInt
    micro_batch: PositiveInt
    interleave: PositiveInt
    measured_s: Annotated[dict[Literal[tuple(MODES)], PositiveNumber], Field(min_length=1)]

    @model_validator(mode="after")
    def _batch_splits(self):
        t, p, g = self.tensor_parallel, self.pipeline_parallel, self.gpus
        if g % (t * p):
            raise ValueError(f"gpus {g} is not a multiple of tensor x pipeline parallel {t * p}")
        dp = g // (t * p)
        if self.global_batch % (dp * self.micro_batch):
            raise ValueError(f"global_batch {self.global_batch} does not split into micro_batch "
                             f"{self.micro_batch} x data parallel {dp}")
        return self


class _CaseFile(InputModel):
    platform: str = ""
    source: str = ""
    description: str = ""
    model: Annotated[dict[str, _Model], Field(min_length=1)]


def load_cases(path: str | Path | None = None) -> tuple[list[ValidationCase], dict]:
    """(cases, header) from a validation file (errors name the file, model and key)."""
    path = Path(path) if path else DEFAULT_CASES()
    if not path.is_file():
        raise FredError(f"validation file {path} does not exist")
    data = parse_toml(read_text_file(path, "validation file"), str(path))
    doc = validate_input(_CaseFile, data, str(path))
    cases = [ValidationCase(model=name, mode=mode,
                            hyper={k: getattr(m, k) for k in ("layers", "hidden", "heads", "seq", "vocab")},
                            tensor_parallel=m.tensor_parallel, pipeline_parallel=m.pipeline_parallel,
                            gpus=m.gpus, global_batch=m.global_batch, micro_batch=m.micro_batch,
                            interleave=m.interleave, measured_s=seconds)
             for name, m in doc.model.items() for mode, seconds in m.measured_s.items()]
    header = {k: v for k, v in data.items() if k != "model"}
    return cases, header


def case_workload(case: ValidationCase) -> Workload:
    """The case as a workload: Megatron's layer split, its recomputation mode, one DP replica's
    share of the global batch in microbatches of ``micro_batch``."""
    dp = case.data_parallel
    samples = case.global_batch // dp
    return transformer(
        name=case.name, mode="weight-stationary",
        strategy=f"MP{case.tensor_parallel}-DP{dp}-PP{case.pipeline_parallel}",
        microbatches=samples // case.micro_batch, samples_per_dp=samples,
        interleave=case.interleave if case.pipeline_parallel > 1 else 1,
        pipeline_split="layers", description=f"{case.name} (Korthikanti et al. 2022)",
        **case.hyper, **MODES[case.mode])


def cluster_platform(path: str | Path | None = None, *,
                     characterization: str | Path | None = None) -> Platform:
    """The validation platform: ``path`` (default: the shipped ``a100-cluster.toml``) with the
    switch timing of ``characterization`` (default: the shipped one; the cluster's tree does
    no in-switch collectives, so only its flit size, latency and throughput fraction apply)."""
    if path is None:
        with resources.as_file(resources.files("sysmodel").joinpath("configs", "a100-cluster.toml")) as p:
            return load_platform(p, characterization=characterization)
    return load_platform(path, characterization=characterization)


def select_cases(cases_path=None, only=None) -> tuple[list, dict]:
    """(the cases to run, the file's header): every case, or those ``only`` names."""
    cases, header = load_cases(cases_path)
    if only:
        cases = [c for c in cases if c.model in only or c.name in only]
        if not cases:
            raise FredError(f"no validation case matches {', '.join(only)}")
    return cases, header


def run_validation(*, cases_path=None, platform: Platform | None = None, only=None,
                   progress: bool = False, tick=None, collapse: bool = True) -> ValidationResult:
    """Every case: model vs measured; the mean absolute and the worst relative error.
    ``tick(1)`` after each case (a progress bar's ``update``). ``collapse``: a long 1F1B
    pipeline's figures are carried from two short runs where their steady periods are checked
    to repeat (:func:`sysmodel.pipeline_collapse.collapsed_iteration`, equal to the whole run
    to 1e-9 of the iteration); False: every case runs whole."""
    cases, header = select_cases(cases_path, only)
    base = platform or cluster_platform()
    if FABRIC not in base.variants:
        raise FredError(f"validation platform {base.name!r} has no switch-tree variant {FABRIC!r}")
    startup_s, startup_compiled = _start_up()
    if progress:
        print(f"  start-up (the compiled event loop {'compiled' if startup_compiled else 'loaded from its cache'}): "
              f"{startup_s:.2f} s", file=sys.stderr, flush=True)
    rows = []
    for case in cases:
        start = time.perf_counter()
        p = base.scaled(npus=case.gpus)
        wl = case_workload(case)
        found = collapsed_iteration(p, FABRIC, wl, microbatches=wl.microbatches) if collapse else None
        r, collapsed = found if found is not None else (None, None)
        if r is None:
            r = simulate_iteration(p, FABRIC, wl, microbatches=wl.microbatches)
        error = r.time_s / case.measured_s - 1
        rows.append(ValidationRow(case=case.name, model=case.model, mode=case.mode, gpus=case.gpus,
                                  strategy=str(wl.strategy), interleave=wl.interleave,
                                  microbatches=r.microbatches, measured_s=case.measured_s,
                                  model_s=r.time_s, error=error,
                                  breakdown=r.breakdown, memory_gb=r.memory.total / 1e9,
                                  recompute=r.memory.strongest_recompute, notes=r.notes,
                                  eval_s=time.perf_counter() - start, collapsed=collapsed))
        if progress:
            print(f"  {case.name:24s} model {r.time_s:8.3f} s  measured {case.measured_s:7.2f} s  "
                  f"{100 * error:+6.1f} %  ({time.perf_counter() - start:.1f} s"
                  + (f", carried from {collapsed[0]} and {collapsed[1]} microbatches)" if collapsed else ")"),
                  file=sys.stderr, flush=True)
        if tick is not None:
            tick(1)
    errors = [abs(r.error) for r in rows]
    worst = max(rows, key=lambda r: abs(r.error))
    return ValidationResult(
        cases=rows, mean_abs_error=sum(errors) / len(errors), worst_abs_error=abs(worst.error),
        worst_case=worst.case, platform=base.name,
        compute=base.compute.to_dict() if base.compute else None,
        link_efficiency=base.link_efficiency, source=header.get("source", ""),
        target={"mean_abs_error": 0.05, "worst_abs_error": 0.10},
        meets_target=sum(errors) / len(errors) <= 0.05 and max(errors) <= 0.10,
        startup_s=startup_s, startup_compiled=startup_compiled)


def _start_up() -> tuple[float, bool]:
    """(wall seconds, whether any compiled) of loading the compiled code -- numba's import and
    the cached machine code of the engine's loop, of the pipeline schedule's round-robin and of
    the breakdown's sweeps, or their compilation on a fresh clone -- done once before the cases so that the first case's
    ``eval_s`` is its own work, not the process's start-up (issue 31: a cold first run is
    stated apart)."""
    start = time.perf_counter()
    from sysmodel.compiled_code import warm_up_all
    compiled = any(compiled for _, _, compiled in warm_up_all())
    return time.perf_counter() - start, compiled
