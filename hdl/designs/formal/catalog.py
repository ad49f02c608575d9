"""Every proof ``fred formal`` runs, in the order docs/verification.md lists them."""

from __future__ import annotations

import fnmatch

from hdl.contracts.errors import FredError

from . import (config_memory, microswitches, packet_switch, reduction, shared_flows, stream_buffer, switch,
               vc_input_buffer)

__all__ = ["PROOFS", "select_proofs"]

PROOFS = [*stream_buffer.PROOFS, *microswitches.PROOFS, *reduction.PROOFS,
          *config_memory.PROOFS, *vc_input_buffer.PROOFS, *switch.PROOFS,
          *packet_switch.PROOFS, *shared_flows.PROOFS]


def select_proofs(patterns=(), *, quick_only: bool = False) -> list:
    """The proofs whose name matches any of the shell ``patterns`` (all if none), optionally only
    the quick ones; a pattern that matches nothing is an error naming the known proofs."""
    chosen = []
    for pattern in patterns:
        hits = [p for p in PROOFS if fnmatch.fnmatchcase(p.name, pattern)]
        if not hits:
            raise FredError(f"no proof matches {pattern!r}; proofs: {', '.join(p.name for p in PROOFS)}")
        chosen += [p for p in hits if p not in chosen]
    chosen = chosen or list(PROOFS)
    return [p for p in chosen if p.quick or not quick_only]
