# FRED in silicon and in numbers. `make test` and `make eval` must work on a fresh machine: the
# .venv target below installs everything they need from PyPI. Every target calls `fred` (or
# pytest); `make help` lists them.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
FRED   := $(VENV)/bin/fred
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# Test processes (pytest-xdist), one per core by default; each test file runs whole in one of
# them (--dist loadfile: a file's module fixtures and Verilator builds are made once). The builds
# two processes both want are made once: eda.toolchain.build_lock. TEST_JOBS=0: one process.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
XDIST  := $(if $(filter 0,$(TEST_JOBS)),-p no:xdist,-n $(TEST_JOBS) --dist loadfile)

.PHONY: all venv test test-quick test-full verilog lint synth clean help eval bench-sysmodel bench-router bench-verilog bench-fabric characterize fabric-validate fabric-iteration coverage mutation formal examples load-curve asic asic-install

all: test

help:
	@echo "make test       install into .venv if needed, run the whole default suite (TEST_JOBS processes, default one per core)"
	@echo "make test-quick the fast lane while editing: no Verilator (no cocotb bench, no lint or build)"
	@echo "make test-full  also the exhaustive/long runs (pytest -m full)"
	@echo "make verilog    write Verilog of every design to build/"
	@echo "make lint       Verilator --lint-only on build/*.v (waivers: eda/lint_waivers.vlt)"
	@echo "make examples   build and run the RTL user's testbenches (C++ and cocotb) on a generated switch (examples/)"
	@echo "make eval       the main job: system-model evaluation of the paper (writes results/)"
	@echo "make bench-sysmodel  system-model speed figures (BENCH_SYSMODEL_ARGS)"
	@echo "make synth      ECP5 synthesis report of the reduction unit (installs the synth extra; SYNTH_ARGS)"
	@echo "make clean      remove build/, sim_build/ and caches (keeps .venv)"
	@echo "make bench-router  print the router's P=64 routing time per flow set (BENCH_ROUTER_ARGS)"
	@echo "make bench-verilog Verilog generation/lint/Verilator build figures (BENCH_VERILOG_ARGS)"
	@echo "make fabric-validate  Fig. 9 collectives on the RTL fabrics Fred-A..D and the mesh vs the model (docs/fabric_validation.md)"
	@echo "make fabric-iteration  whole serialised training iterations on the RTL mesh and Fred-A..D vs the model (docs/fabric_validation.md); rows kept in results/fabric-iteration-rows.jsonl and reused; FABRIC_ITERATION_ARGS='--only fred-b --only circuit' runs some cases, '--list-cases' lists them"
	@echo "make load-curve latency vs offered load on the packet switch RTL, Fred_3(8), uniform/transpose/hotspot (~5 min; LOAD_CURVE_ARGS; docs/load_curve.md)"
	@echo "make bench-fabric  fabric RTL simulation speed under Verilator, cycles/s (BENCH_FABRIC_ARGS)"
	@echo "make coverage   functional (cocotb-coverage) and code (Verilator) coverage of the switch benches (COVERAGE_ARGS)"
	@echo "make formal     every formal proof (SymbiYosys + Yices) and its mutants (FORMAL_ARGS; docs/verification.md)"
	@echo "make asic       OSU 0.35 um standard-cell area (kGE) and OpenSTA timing (needs make asic-install; ASIC_ARGS; docs/asic.md)"
	@echo "make asic-install  apt-get install the Debian packages make asic needs (yosys, berkeley-abc, opensta, qflow-tech-osu035)"
	@echo "make mutation   mutation score of the switch benches (MUTATION_ARGS, e.g. --count 60 --jobs 1)"
	@echo "each target above that runs a tool is a fred subcommand (fred --help, fred COMMAND --help), but make examples: the user's own testbenches, python -m examples.build"

# Re-installs when pyproject.toml changes; the editable install picks up code changes.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-quick: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not full and not cocotb and not verilator" $(PYTEST_ARGS)

test-full: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "full or not full" $(PYTEST_ARGS)

verilog: $(STAMP)
	$(FRED) verilog --all -o build

lint: verilog
	$(FRED) lint build/*.v

# the testbenches a user copies (examples/README.md): not a fred subcommand, they are the user's code
examples: $(STAMP)
	$(PY) -m examples.build all

eval: $(STAMP)
	$(FRED) eval --output results --calibration paper

bench-sysmodel: $(STAMP)
	$(FRED) bench sysmodel $(BENCH_SYSMODEL_ARGS)

# The paper's Fig. 9 collectives on the RTL fabrics Fred-A..D (Verilator) against the system model
# at two sizes; writes docs/fabric_validation.md and .png (FABRIC_VALIDATE_ARGS: e.g. --sizes),
# then the same cases on the packet fabric (its own block, docs/fabric_validation_packet.png),
# then concurrent traffic classes on the packet fabrics Fred-A..D (their own block), then the I/O
# cases (io-broadcast, io-reduce; int32 and fp16) on the packet fabrics (their own block and plot).
fabric-validate: $(STAMP)
	$(FRED) fabric-validate $(FABRIC_VALIDATE_ARGS)
	$(FRED) fabric-validate --switch packet --fabrics fred-a,fred-b,fred-c,fred-d $(FABRIC_VALIDATE_ARGS)
	$(FRED) fabric-validate --switch packet --concurrent --fabrics fred-a,fred-b,fred-c,fred-d $(FABRIC_VALIDATE_ARGS)
	$(FRED) fabric-validate --switch packet --io --fabrics fred-a,fred-b,fred-c,fred-d $(FABRIC_VALIDATE_ARGS)

# Whole training iterations (serialised, K = 1000) on the RTL mesh and Fred-A..D (Verilator): every
# NPU runs the model's exported trace; writes the iteration table into docs/fabric_validation.md
# (docs/fabric_iteration.md; FABRIC_ITERATION_ARGS: e.g. --scale, --only TERMS to run some cases,
# --list-cases, --rows FILE). Each finished row is stored at once (default
# results/fabric-iteration-rows.jsonl) and reused while its fingerprint matches, so the table can
# be made in pieces and an interrupted run loses nothing it finished.
fabric-iteration: $(STAMP)
	$(FRED) fabric-iteration --table --no-overlap $(FABRIC_ITERATION_ARGS)

# Latency against offered load on the packet switch's RTL (Amaranth simulator): results/load_curve/
load-curve: $(STAMP)
	$(FRED) load-curve --ports 8 -o results/load_curve $(LOAD_CURVE_ARGS)

bench-router: $(STAMP)
	$(FRED) bench router $(BENCH_ROUTER_ARGS)

# Fabric cycles per second under Verilator, wafer all-reduce on Fred-B and Fred-D (circuit switches),
# the packet Fred-D (one model and lock-step, in one run) and the 5x4 mesh, with the load average
# (the lock-step rows need both cores free; docs/fabric_rtl.md)
bench-fabric: $(STAMP)
	$(FRED) bench fabric $(BENCH_FABRIC_ARGS)

# Generation time/size/memory of Fred_3(P) fp16 x 4 for P = 4..64, lint of Fred_3(64), Verilator
# build of Fred_3(16) hierarchical vs flat (the flat build alone takes several minutes; skip it
# with BENCH_VERILOG_ARGS=--no-flat).
bench-verilog: $(STAMP)
	$(FRED) bench verilog $(BENCH_VERILOG_ARGS)

# yosys synth_ecp5 + nextpnr-ecp5 --85k per format for lanes 1 and 4 (docs/synthesis.md).
synth: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,synth]'
	$(FRED) synth $(SYNTH_ARGS)

clean:
	rm -rf build sim_build .pytest_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

# Switch timings (Verilator, whole grid) and cost (yosys/nextpnr) -> data/characterization.json,
# docs/characterization.md (+ .png). Long: see docs/characterization.md for the time it takes.
characterize: $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,synth]'
	$(FRED) characterize --fresh $(CHARACTERIZE_ARGS)

# Functional coverage (cocotb-coverage) of the switch benches on Fred_3(8)/Fred_3(12), default +
# full, and Verilator line/toggle coverage per module on separate coverage builds; merged reports
# in build/coverage/ (docs/verification.md). Each pytest run takes /tmp/fred-heavy.lock itself.
coverage: $(STAMP)
	$(FRED) coverage $(COVERAGE_ARGS)

# Every formal property of hdl/designs/formal proven with SymbiYosys + Yices, and every mutant of
# each shown to fail; sby folders in build/formal (docs/verification.md lists proofs and times).
formal: $(STAMP)
	$(FRED) formal --mutants $(FORMAL_ARGS)

# Gate-level area and timing on the OSU 0.35 um standard cells (docs/asic.md). The tools are Debian
# packages, not PyPI ones: `make asic-install` installs them (root or sudo); without them `fred
# asic` fails naming the missing package. Not part of make test or make eval.
ASIC_PACKAGES := yosys berkeley-abc opensta qflow-tech-osu035
asic-install:
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get update
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y $(ASIC_PACKAGES)

asic: $(STAMP)
	$(FRED) asic $(ASIC_ARGS)

# Mutants of the generated Verilog of Fred_2(4) int32, each run through the switch benches under
# its own flock of /tmp/fred-heavy.lock; prints the score and the survivors (docs/verification.md).
mutation: $(STAMP)
	$(FRED) mutation $(MUTATION_ARGS)
