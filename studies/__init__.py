"""The studies built on the model and on the RTL: what the project measures and reports.

* :mod:`studies.evaluation` and :mod:`studies.calibration` -- the paper's evaluation
  (``fred eval`` / ``fred sweep``) and the per-workload compute factor fitted on Fred-C;
* :mod:`studies.validation` -- the training model against measured Megatron-LM runs;
* :mod:`studies.dse`, :mod:`studies.cost`, :mod:`studies.points` -- the fabric design space,
  its cost model and points as plain data for process pools and clusters;
* :mod:`studies.characterization` -- measured switch timings and cost (``fred characterize``);
* :mod:`studies.fabric_case` -- one collective on the RTL fabric against the model of the same
  fabric (``fred fabric-sim``); :mod:`studies.fabric_validation` -- the paper's Fig. 9 cases on
  every fabric and their report (``fred fabric-validate``);
* :mod:`studies.verification` -- the coverage and mutation campaigns of the switch benches
  (``fred coverage``, ``fred mutation``);
* :mod:`studies.synth_report` -- the reduction unit's ECP5 synthesis report (``fred synth``);
* :mod:`studies.benchmarks` -- speed figures of the model, the router, the Verilog flow and the
  fabric RTL (``fred bench``);
* :mod:`studies.workload_presets` -- the generated workload preset (ResNet-152);
* :mod:`studies.report` -- the one writer of every file the studies emit (Markdown, CSV, JSON,
  PNG; atomic, errors naming the file) and :func:`~studies.report.to_json_dict`: each study
  returns frozen dataclasses, whose JSON is written from the types.

Imports: any layer below (:mod:`hdl`, :mod:`eda`, :mod:`cocotb_tests`, :mod:`sysmodel`); the
command line :mod:`fred` sits on top and only parses options and prints.
"""
