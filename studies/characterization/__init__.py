"""Characterization of the FRED switch RTL (docs/characterization.md): measured timings and cost as data.

* :mod:`.timing`: one Verilator build per (P, m, dtype), the ``bench_characterize`` cocotb bench
  over every traffic class with and without backpressure, figures computed from the VCD and
  cross-checked against the bench's monitors;
* :mod:`.cost`: yosys ``synth_ecp5`` + nextpnr-ecp5 and generic ``synth`` cell counts;
* :mod:`.report`: ``data/characterization.json`` (schema ``docs/characterization-schema.md``)
  and ``docs/characterization.md`` with its plot; composed cost and Fmax of sizes place and
  route cannot do;
* :mod:`.pipeline`: the ``fred characterize`` run as named steps (plan, measure and cache,
  assemble, write);
* :mod:`.merge` and :mod:`.provenance`: ``fred characterize --merge`` (a run's records added to
  an existing file) and the run every record carries.
"""
