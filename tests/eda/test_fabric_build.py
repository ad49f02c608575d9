"""``eda.fabric.build``'s rules, without building: the C++ flags of a fabric build and the
profile-guided build of a runner (``build_trained``: trained by the runner's own workload,
whose names key the cache; a plain build is exactly ``build_top_public_only``'s)."""

import pytest

import eda.fabric.build as build
from hdl.contracts.errors import FredError


def test_fast_cflags_given_else_o2_with_pgo_else_the_runners_plain_flags():
    assert build.fast_cflags("-O0", True, "-O1") == "-O0"
    assert build.fast_cflags(None, True, "-O1") == build.PGO_CFLAGS == "-O2"
    assert build.fast_cflags(None, False, "-Os") == "-Os"


def test_build_trained_trains_with_every_workload_run_and_names_them_in_the_key(monkeypatch, tmp_path):
    calls, ran = [], []

    def fake(verilog, top, ports, **kwargs):
        calls.append(kwargs)
        if kwargs["train"] is not None:
            kwargs["train"](tmp_path)
        return tmp_path
    monkeypatch.setattr(build, "build_top_public_only", fake)
    workload = {"ring x 2000": lambda d: ran.append(("ring", d)), "chain x 2000": lambda d: ran.append(("chain", d))}
    build.build_trained("v", "top", ["clk"], cflags="-O2", pgo=True, workload=workload)
    assert ran == [("ring", tmp_path), ("chain", tmp_path)]
    assert calls[0]["training"] == "ring x 2000, chain x 2000" and calls[0]["cflags"] == "-O2"
    # a plain build: no training, no training name (the key of the builds before PGO existed)
    build.build_trained("v", "top", ["clk"], cflags="-O1", pgo=False, workload=workload)
    assert calls[1]["train"] is None and calls[1]["training"] == "" and len(ran) == 2


def test_a_profile_guided_build_without_a_workload_is_refused():
    with pytest.raises(FredError, match="training workload"):
        build.build_trained("v", "top", ["clk"], cflags="-O2", pgo=True, workload={})
