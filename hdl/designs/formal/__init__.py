"""Formal properties of the designs: one harness module per design, proven by ``fred formal``.

Each harness instantiates a design through its public interface, drives every input with free
values (``AnySeq``) constrained only by the interface contract the design's docstring states
(``Assume``), and checks the promised behaviour (``Assert``) with reference models kept in the
harness (shadow queues, golden sums). ``Cover`` statements show every mode is reachable. Every
property comes with mutants (:func:`~hdl.designs.formal.proof.mutated`): the same design with one
behaviour broken, for which the proof must fail, so no property is vacuous.

* :mod:`.checks` -- the reusable pieces: stream-rule assumptions and assertions, shadow queues;
* :mod:`.proof` -- :class:`Proof` (a harness, its engine and depth, its mutants) and RTLIL export;
* :mod:`.catalog` -- every proof ``fred formal`` runs (docs/verification.md lists them).

The harnesses live in ``hdl.designs`` (not ``eda``) because they are Amaranth designs built
around the designs; the runner :mod:`eda.formal` only sees RTLIL text and SymbiYosys.
"""
