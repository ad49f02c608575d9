"""Input files validated by pydantic (README.md, Layout): one error line naming the file, the table and
the key, for each of the five readers (platform, workload, validation cases, cost,
characterization)."""

import json
from importlib import resources

import pytest

from hdl.contracts.characterization import read_characterization
from hdl.contracts.errors import FredError
from studies.cost import load_cost_model
from sysmodel.platform import load_platform
from studies.validation import DEFAULT_CASES, load_cases
from sysmodel.workload_file import load_workload_file

PAPER = resources.files("sysmodel").joinpath("configs", "paper.toml").read_text()
COST = resources.files("sysmodel").joinpath("configs", "cost.toml").read_text()
WORKLOAD = resources.files("sysmodel").joinpath("configs", "workloads", "gpt-3.toml").read_text()
CASES = DEFAULT_CASES().read_text()
CHARACTERIZATION = DEFAULT_CASES().parents[1] / "characterization.json"


def _file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _raises(message, load, path):
    with pytest.raises(FredError) as info:
        load(path)
    text = str(info.value)
    assert text == message.format(path=path), text
    assert "\n" not in text


# -- an unknown key: the file, the table and the key, and what the table allows --------------
def test_unknown_key_names_file_table_and_key(tmp_path):
    _raises("{path}: [npu] cuont: unknown key (expected one of: compute_efficiency, count, "
            "forward_latency_ns, memory_bandwidth_gbps, memory_capacity_gb, network_recv_gbps, "
            "network_send_gbps, peak_tflops)",
            load_platform, _file(tmp_path, "p.toml", PAPER.replace("count = 20", "cuont = 20")))
    _raises("{path}: colour: unknown key (expected one of: area, description, io, "
            "logic, name, network, power, reference)",
            load_cost_model, _file(tmp_path, "c.toml", 'colour = "red"\n' + COST))


# -- a bool is never a number, a float never an integer ------------------------------------------
@pytest.mark.parametrize("old, new, message", [
    ("count = 20", "count = true", "[npu] count: expected an integer >= 1, got true"),
    ("count = 20", "count = 20.0", "[npu] count: expected an integer >= 1, got 20.0"),
    ("latency_ns = 20.0", "latency_ns = false", "[link] latency_ns: expected a number >= 0, got false"),
    ("l1_l2_gbps = 1500.0 ", "l1_l2_gbps = true ",
     "[fred.variants.fred-a] l1_l2_gbps: expected a number > 0, got true"),
])
def test_a_bool_or_float_is_not_taken_for_a_number_or_integer(tmp_path, old, new, message):
    assert old in PAPER
    _raises("{path}: " + message, load_platform, _file(tmp_path, "p.toml", PAPER.replace(old, new, 1)))


def test_a_wrong_type_names_the_table_and_key(tmp_path):
    _raises("{path}: [io] controller_gbps: expected a number > 0, got 'fast'", load_platform,
            _file(tmp_path, "p.toml", PAPER.replace("controller_gbps = 128.0", 'controller_gbps = "fast"')))
    _raises("{path}: [training] iterations: expected an integer >= 1, got '2'", load_platform,
            _file(tmp_path, "p.toml", PAPER.replace("iterations = 2", 'iterations = "2"')))


# -- each reader's message ------------------------------------------------------------------------
def test_platform_message(tmp_path):
    _raises("{path}: [mesh] link_gbps: expected a number >= 0, got -750.0", load_platform,
            _file(tmp_path, "p.toml", PAPER.replace("link_gbps = 750.0", "link_gbps = -750.0")))
    _raises("{path}: [npu] compute_efficiency: expected a number in (0, 1], got 1.5", load_platform,
            _file(tmp_path, "p.toml", PAPER.replace("compute_efficiency = 0.5", "compute_efficiency = 1.5")))


def test_workload_message(tmp_path):
    _raises("{path}: [transformer] heads: expected an integer >= 1, got 96.5", load_workload_file,
            _file(tmp_path, "w.toml", WORKLOAD.replace("heads = 96", "heads = 96.5")))
    doc = {"workload": {"name": "t", "mode": "weight-stationary", "strategy": "MP1-DP1-PP1",
                        "microbatches": 1, "samples_per_dp": 1},
           "layer": [{"name": "fc", "params": 1, "in_bytes": 1, "out_bytes": 1,
                      "gemms": [{"m": 1, "n": 2, "k": True}]}]}
    _raises("{path}: layer[0] (fc).gemms[0].k: expected a number > 0, got true".replace(
        "layer[0] (fc).gemms[0].k", "[layer[0] (fc).gemms[0]] k"), load_workload_file,
        _file(tmp_path, "w.json", json.dumps(doc)))


def test_validation_case_message(tmp_path):
    _raises("{path}: [model.gpt3-175b] gpus: expected an integer >= 1, got true", load_cases,
            _file(tmp_path, "v.toml", CASES.replace("gpus = 64", "gpus = true", 1)))
    _raises("{path}: [model.megatron-22b.measured_s] fast: expected one of 'full', 'seqsel', got 'fast'",
            load_cases, _file(tmp_path, "v.toml", CASES.replace("seqsel = 1.10", "fast = 1.10", 1)))


def test_cost_message(tmp_path):
    _raises("{path}: [logic] utilization: expected a number in (0, 1], got 1.7", load_cost_model,
            _file(tmp_path, "c.toml", COST.replace("utilization = 0.7", "utilization = 1.7")))
    _raises("{path}: [reference] in_switch: expected true or false, got 1", load_cost_model,
            _file(tmp_path, "c.toml", COST.replace("in_switch = true", "in_switch = 1")))


def test_characterization_message(tmp_path):
    doc = json.loads(CHARACTERIZATION.read_text())
    doc["switch"]["flit_bytes"] = 512.5
    _raises("{path}: switch.flit_bytes: expected an integer >= 1, got 512.5", read_characterization,
            _file(tmp_path, "c.json", json.dumps(doc)))
    doc = json.loads(CHARACTERIZATION.read_text())
    doc["switches"]["P12m3fp16"]["switch"]["clock"] = 1.0
    _raises("{path}: switches.P12m3fp16.switch.clock: unknown key (expected one of: clock_mhz, "
            "config_load_cycles, first_flit_latency_cycles, flit_bytes, phase_switch_cycles, "
            "select_copy_cycles, throughput_flits_per_cycle_per_port)", read_characterization,
            _file(tmp_path, "c.json", json.dumps(doc)))
    doc = json.loads(CHARACTERIZATION.read_text())
    doc["schema"] = "fred-characterization/0"
    _raises("{path}: schema: expected 'fred-characterization/1', got 'fred-characterization/0'",
            read_characterization, _file(tmp_path, "c.json", json.dumps(doc)))


def test_a_platform_built_in_code_is_held_to_the_file_schema():
    from sysmodel.platform import default_platform
    with pytest.raises(FredError, match=r"^platform fred-paper: \[training\] dp_overlap: "
                                        r"expected true or false, got 1$"):
        default_platform().scaled(dp_overlap=1)
