"""Workloads as data (docs/sysmodel.md, Fidelity): workload files, the shipped presets, errors that name the file."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hdl.contracts.errors import FredError
from sysmodel.workload_file import load_workload_file, parse_workload, workload_to_dict
from sysmodel.workloads import WORKLOADS, resnet152, transformer
from sysmodel.workload_file import get_workload
from studies.workload_presets import resnet152_toml

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
[workload]
name = "tiny"
mode = "weight-stationary"
strategy = "MP2-DP2-PP1"
microbatches = 1
samples_per_dp = 4

[transformer]
layers = 2
hidden = 64
heads = 4
seq = 32
vocab = 100
"""


def test_presets_ship_as_files_and_resnet_matches_its_architecture():
    for name in WORKLOADS:
        path = ROOT / "configs" / "workloads" / f"{name}.toml"
        assert path.is_file(), path
        assert get_workload(name).source.endswith(f"{name}.toml")
    assert (ROOT / "configs/workloads/resnet-152.toml").read_text() == resnet152_toml()
    assert get_workload("resnet-152").layers == resnet152().layers


def test_transformer_17b_preset_is_the_papers_strategy_on_18_npus():
    w = get_workload("transformer-17b")
    assert str(w.strategy) == "MP3-DP3-PP2" and w.strategy.npus == 18 and w.microbatches == 8
    assert str(get_workload("transformer-17b-mp5").strategy) == "MP5-DP2-PP2"


def test_toml_and_json_describe_the_same_workload(tmp_path):
    import tomllib
    doc = tomllib.loads(SMALL)
    (tmp_path / "a.toml").write_text(SMALL)
    (tmp_path / "a.json").write_text(json.dumps(doc))
    a, b = load_workload_file(tmp_path / "a.toml"), get_workload(str(tmp_path / "a.json"))
    assert a.layers == b.layers and a.strategy == b.strategy
    ref = transformer(name="tiny", layers=2, hidden=64, heads=4, seq=32, vocab=100,
                      mode="weight-stationary", strategy="MP2-DP2-PP1", microbatches=1)
    assert a.layers == ref.layers and a.samples_per_dp == 4
    assert len(a.layers) == 4 and a.params == pytest.approx(ref.params)


def test_layer_table_round_trip(tmp_path):
    doc = workload_to_dict(resnet152().with_(samples_per_dp=8, recompute="none"))
    w = parse_workload(doc, source="mem")
    assert w.layers == resnet152().layers and w.samples_per_dp == 8 and w.recompute == "none"
    from sysmodel.workload_file import dump_toml
    (tmp_path / "r.toml").write_text(dump_toml(doc))
    assert load_workload_file(tmp_path / "r.toml").layers == resnet152().layers


def test_layer_flops_default_to_the_gemms():
    doc = {"workload": {"name": "t", "mode": "weight-stationary", "strategy": "MP1-DP1-PP1",
                        "microbatches": 1, "samples_per_dp": 1},
           "layer": [{"name": "fc", "params": 6.0, "in_bytes": 4.0, "out_bytes": 6.0,
                      "gemms": [{"m": 1, "n": 3, "k": 2}, {"m": 2, "n": 8, "k": 16, "count": 2}]}]}
    layer = parse_workload(doc).layers[0]
    assert layer.fwd_flops == 2 * 1 * 3 * 2 + 2 * 2 * 8 * 16 * 2


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["workload"].pop("mode"), r"\[workload\] mode: missing"),
    (lambda d: d["workload"].update(colour="red"), r"\[workload\] colour: unknown key \(expected one of: description, "),
    (lambda d: d["workload"].update(microbatches="8"), r"\[workload\] microbatches: expected an integer >= 1, got '8'"),
    (lambda d: d["workload"].update(strategy="MP2xDP2"), r"workload\.strategy: .*not of the form"),
    (lambda d: d["workload"].update(recompute="some"), r"recompute must be one of"),
    (lambda d: d["transformer"].update(hidden=0), r"\[transformer\] hidden: expected an integer >= 1, got 0"),
    (lambda d: d.update(layer=[{"name": "x"}]), r"exactly one of \[transformer\]"),
    (lambda d: d.update(extra={}), r"extra: unknown table or key \(expected one of: layer, transformer, workload\)"),
])
def test_malformed_workloads_name_file_and_key(edit, message):
    import tomllib
    doc = tomllib.loads(SMALL)
    edit(doc)
    with pytest.raises(FredError, match=r"^my\.toml: .*" + message):
        parse_workload(doc, source="my.toml")


@pytest.mark.parametrize("layer, message", [
    ({"name": "a", "params": 1, "in_bytes": 1}, r"^t\.toml: \[layer\[0\] \(a\)\] out_bytes: missing"),
    ({"name": "a", "params": -1, "in_bytes": 1, "out_bytes": 1}, r"^t\.toml: \[layer\[0\] \(a\)\] params: expected a number >= 0, got -1"),
    ({"name": "a", "params": 1, "in_bytes": 1, "out_bytes": 1, "gemms": [{"m": 1, "n": 2}]},
     r"^t\.toml: \[layer\[0\] \(a\)\.gemms\[0\]\] k: missing"),
    ({"name": "a", "params": 1, "in_bytes": 1, "out_bytes": 1, "gemms": [{"m": 1, "n": 2, "k": 0}]},
     r"^t\.toml: \[layer\[0\] \(a\)\.gemms\[0\]\] k: expected a number > 0, got 0"),
    ({"name": "a", "params": 1, "in_bytes": 1, "out_bytes": 1, "vectors": [{"bytes": 1, "shard": "x"}]},
     r"layer 0 \(a\): vectors\[0\]: element-wise shard must be"),
])
def test_malformed_layers_name_the_layer(layer, message):
    doc = {"workload": {"name": "t", "mode": "weight-stationary", "strategy": "MP1-DP1-PP1",
                        "microbatches": 1, "samples_per_dp": 1}, "layer": [layer]}
    with pytest.raises(FredError, match=message):
        parse_workload(doc, source="t.toml")


def test_syntax_errors_give_the_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[workload]\nname = \n")
    with pytest.raises(FredError, match=r"bad\.toml: invalid TOML .*line 2"):
        load_workload_file(bad)
    bad = tmp_path / "bad.json"
    bad.write_text('{"workload": {\n "name": }')
    with pytest.raises(FredError, match=r"bad\.json: invalid JSON at line 2"):
        load_workload_file(bad)
    with pytest.raises(FredError, match="does not exist"):
        load_workload_file(tmp_path / "missing.toml")
    with pytest.raises(FredError, match="unknown workload 'bert'"):
        get_workload("bert")


def test_sweep_takes_a_workload_path(tmp_path):
    (tmp_path / "tiny.toml").write_text(SMALL.replace("MP2-DP2-PP1", "MP2-DP10-PP1"))
    proc = subprocess.run([sys.executable, "-m", "fred", "sweep", "--workload", str(tmp_path / "tiny.toml"),
                           "--fabric", "fred-d", "--strategy", "MP2-DP10-PP1", "--samples-per-dp", "4",
                           "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["strategy"] == "MP2-DP10-PP1"
