"""The wafer-scale system model of FRED (shared spec FRED.md Sec. 3-4).

Layers, bottom up:

* :mod:`sysmodel.platform` -- the wafer description (TOML, default ``configs/paper.toml``);
* :mod:`sysmodel.switch_timing` -- FRED switch timing (defaults or ``data/characterization.json``);
* :mod:`sysmodel.network` -- nodes, directed links, per-link byte accounting;
* :mod:`sysmodel.mesh` and :mod:`sysmodel.fred_tree` -- the two fabrics with their routing;
* :mod:`sysmodel.collectives` -- collective algorithms and their timing on a fabric;
* :mod:`sysmodel.strategy`, :mod:`sysmodel.workloads`, :mod:`sysmodel.engine`,
  :mod:`sysmodel.training` -- 3D-parallel training iterations (issue 8);
* :mod:`sysmodel.evaluation` -- ``fred eval`` / ``fred sweep``.
"""
