"""Model points as plain data, for process pools and clusters (docs/sysmodel.md, Speed).

A sweep or design-space exploration is a list of independent points. To run them in other
processes or on other machines (``fred sweep --jobs`` / ``--scheduler``), each point is a
JSON-able dict (its *spec*) and a top-level function computes it from the spec alone:
:func:`sweep_point` here, :func:`studies.dse.dse_point`. A spec names its platform by
:func:`platform_ref` (the platform file, characterization file and compute scale: paths the
workers must be able to read) rather than carrying the object, so the spec is also the key
under which a computed point is cached (``fred/parallel.py``). The same function computes a
point in process, in a pool or on a cluster, so the results are identical.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hdl.contracts.placement import parse_strategy
from sysmodel.model_cache import current
from sysmodel.platform import Platform, default_platform, load_platform

__all__ = ["platform_ref", "platform_from_ref", "workload_ref", "sweep_specs", "sweep_point", "prepare_model"]


# Computed once per process and not kept in the model's cache: it names the code loaded in this
# process, which files changed on disk later must not alter.
@lru_cache(maxsize=1)
def model_fingerprint() -> str:
    """Fingerprint of the code and shipped data a point's result depends on: every Python,
    TOML and JSON file of the model (``sysmodel``, with its shipped data), of the contracts and
    the configuration compiler it routes with (``hdl.contracts``, ``hdl.compiler``) and of the
    studies that compute points (``studies``), by content. A point cache (``fred dse``/``fred sweep
    --cache``) keeps it with each point and recomputes the points of another fingerprint, so a
    model change never reuses a result the old model computed."""
    import hashlib

    import hdl.compiler
    import hdl.contracts
    import sysmodel
    digest = hashlib.sha256()
    for package in (sysmodel, hdl.contracts, hdl.compiler):
        _digest_folder(digest, Path(package.__file__).resolve().parent)
    _digest_folder(digest, Path(__file__).resolve().parent)
    return digest.hexdigest()[:16]


def _digest_folder(digest, root: Path, suffixes=(".py", ".toml", ".json")) -> None:
    """Add every file under ``root`` whose suffix is one of ``suffixes`` (None: every file)
    (path and content) to ``digest``; caches skipped."""
    files = sorted(p for p in root.rglob("*") if (suffixes is None or p.suffix in suffixes) and p.is_file()
                   and "__pycache__" not in p.parts)
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())


def prepare_model() -> None:
    """Import what :func:`sweep_point` and :func:`studies.dse.dse_point` run and load the model's
    compiled code (:func:`sysmodel.compiled_code.warm_up_all`; compiled once on a fresh clone):
    ``run_points``' ``prepare`` before a local pool forks, so that its workers inherit both
    instead of each importing the model and loading (or, on a fresh clone, compiling at once
    with the others) the same machine code."""
    import studies.evaluation  # noqa: F401  (strategy_row: the model a point runs)
    from sysmodel.compiled_code import warm_up_all
    warm_up_all()


def platform_ref(platform_path=None, characterization=None, compute_scale: float = 1.0) -> dict:
    """The plain-data name of a platform: file paths made absolute (a worker may run in
    another directory) and the compute scale."""
    def absolute(p):
        return None if p is None else str(Path(p).resolve())
    return {"platform": absolute(platform_path), "characterization": absolute(characterization),
            "compute_scale": float(compute_scale)}


def workload_ref(workload: str) -> str:
    """A workload as a spec names it: a preset by name, a workload file by absolute path (a
    worker may run in another directory)."""
    path = Path(workload)
    if path.suffix in (".toml", ".json") or path.exists():
        return str(path.resolve())
    return workload


def _platform(path, characterization, compute_scale) -> Platform:
    if path is None and characterization is None:
        base = default_platform()
    else:
        base = load_platform(path, characterization=characterization)
    return base.with_compute_scale(compute_scale)


def platform_from_ref(ref: dict) -> Platform:
    """The platform a :func:`platform_ref` names (loaded once per model cache:
    :mod:`sysmodel.model_cache`, ``platforms``)."""
    key = (ref["platform"], ref["characterization"], ref["compute_scale"])
    return current().platforms.get_or_make(key, lambda: _platform(*key))


def sweep_specs(workload: str, fabric: str, ref: dict, *, samples_per_dp: int, overlap: bool) -> list[dict]:
    """One spec per MP x DP x PP strategy of the platform's NPU count (``fred sweep``); an
    unknown workload or fabric is an error here, before any point runs."""
    from hdl.contracts.placement import factorisations
    from sysmodel.workload_file import get_workload
    platform = platform_from_ref(ref)
    platform.check_fabric(fabric)
    get_workload(workload)
    workload = workload_ref(workload)
    return [{"kind": "sweep", "workload": workload, "fabric": fabric, "strategy": str(s),
             "samples_per_dp": samples_per_dp, "overlap": overlap, "platform": ref}
            for s in factorisations(platform.npus)]


def sweep_point(spec: dict) -> dict:
    """The sweep row of one spec (:func:`studies.evaluation.strategy_row`)."""
    from studies.evaluation import strategy_row
    from sysmodel.workload_file import get_workload
    platform = platform_from_ref(spec["platform"])
    return strategy_row(platform, spec["fabric"], get_workload(spec["workload"]),
                        parse_strategy(spec["strategy"]), spec["samples_per_dp"], spec["overlap"])
