"""Campaigns over the switch benches: functional and code coverage
(:mod:`studies.verification.coverage_run`, ``make coverage``) and the mutation score
(:mod:`studies.verification.mutation`, ``make mutation``); ``docs/verification.md``."""
