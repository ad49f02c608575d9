"""The wafer-scale system model of FRED (shared spec FRED.md Sec. 3-4).

Layers, bottom up:

* :mod:`sysmodel.platform` -- the wafer description (TOML, default ``configs/paper.toml``);
* :mod:`sysmodel.switch_timing` -- measured FRED switch timing (the shipped
  ``data/characterization.json``, or a file the caller names; never assumed);
* :mod:`sysmodel.network` -- nodes, directed links, per-link byte accounting (whole flits on FRED);
* :mod:`sysmodel.mesh` and :mod:`sysmodel.fred_tree` -- the two fabrics with their routing;
* :mod:`sysmodel.collectives` -- collective algorithms and their timing on a fabric;
* :mod:`sysmodel.workloads`, :mod:`sysmodel.engine` and one training iteration in steps:
  :mod:`sysmodel.iteration_plan` (with :mod:`sysmodel.memory`), :mod:`sysmodel.compute_timing`,
  :mod:`sysmodel.comm_timing`, :mod:`sysmodel.task_graphs`, :mod:`sysmodel.breakdown`, put
  together by :mod:`sysmodel.training`;
* :mod:`sysmodel.trace`, :mod:`sysmodel.astrasim`, :mod:`sysmodel.chakra_trace` -- workloads
  read from ASTRA-sim and Chakra traces (``fred replay``).

Imports: :mod:`hdl.contracts` and :mod:`hdl.compiler` only (never the designs, the benches or the
studies). The studies built on the model (the paper's evaluation, calibration, validation, DSE)
are in :mod:`studies`.
"""
