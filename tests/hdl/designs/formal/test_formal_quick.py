"""The quick formal proofs (``Proof.quick``) hold on the designs, and every mutant of each breaks
its proof (so no property is vacuous). ``make formal`` runs the rest (docs/verification.md)."""

from __future__ import annotations

import pytest

from eda.formal import run_proof
from hdl.designs.formal.catalog import PROOFS, select_proofs

QUICK = select_proofs(quick_only=True)


def test_catalog_names_are_unique_and_quick_proofs_exist():
    names = [p.name for p in PROOFS]
    assert len(names) == len(set(names))
    assert QUICK


@pytest.mark.parametrize("proof", QUICK, ids=[p.name for p in QUICK])
def test_quick_proof_holds_and_its_mutants_fail(proof, tmp_path):
    outcome = run_proof(proof, workdir=tmp_path, with_mutants=True)
    assert outcome.result.status == "PASS", outcome.result.log[-2000:]
    for name, result in outcome.mutants.items():
        assert result.status == "FAIL", f"mutant {name} survived: {result.status}"
        assert result.failed, f"mutant {name}: no failing property named"


def test_every_proof_and_mutant_elaborates_and_every_property_proof_has_mutants():
    """Whole-switch harnesses take about a second each to elaborate: only the quick one (with its
    mutants) is elaborated here; ``make formal`` builds the others."""
    from hdl.designs.formal.proof import to_rtlil
    for proof in PROOFS:
        assert proof.mode == "cover" or proof.mutants, f"{proof.name}: no mutant"
        assert proof.mode != "bmc" or proof.why_bounded, f"{proof.name}: BMC without a reason"
        if proof.name.startswith("switch.") and not proof.quick:
            continue
        for mutant in (None, *proof.mutants):
            text = to_rtlil(proof.harness(mutant))
            assert "$check" in text, f"{proof.name} / {mutant}: no property"
