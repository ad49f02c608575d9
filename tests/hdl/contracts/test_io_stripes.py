"""The striped I/O NPU's paged program port (hdl/contracts/io_stripes.py): page writes and the
"only what changes" rule of an iteration's loader, by hand."""

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.io_stripes import (NPU_OWN_REGS, NPU_PAGE_REG, NPU_PAGE_SIZE, paged_writes, stripe_npu_words,
                                      stripe_npu_writes)


def test_a_page_write_goes_before_the_first_write_and_each_change_of_page():
    words = [(5, 1), (62, 2), (63, 3), (130, 4), (64, 5)]
    assert paged_writes(words) == [(NPU_PAGE_REG, 0), (5, 1), (62, 2), (NPU_PAGE_REG, 1), (0, 3),
                                   (NPU_PAGE_REG, 2), (130 - 2 * NPU_PAGE_SIZE, 4), (NPU_PAGE_REG, 1), (1, 5)]


def test_with_the_registers_state_only_changes_are_written_and_remembered():
    """Registers start at 0; a value equal to the register's is left out with its page write;
    register 5 of page 0 and of page 1 (address 68) are different registers."""
    state = {}
    assert paged_writes([(5, 0), (5, 7), (68, 7)], state) == [(NPU_PAGE_REG, 0), (5, 7), (NPU_PAGE_REG, 1), (5, 7)]
    assert paged_writes([(5, 7), (68, 8)], state) == [(NPU_PAGE_REG, 1), (5, 8)]
    assert state == {5: 7, 68: 8}


def test_the_own_part_is_written_after_the_header_and_checked_by_name():
    words = stripe_npu_words([], {}, 2, phase=1, vc=2, own={"start": 2, "start_flits": 9})
    assert words[-len(NPU_OWN_REGS):] == [(a, {"start": 2, "start_flits": 9}.get(n, 0)) for n, a in NPU_OWN_REGS.items()]
    assert stripe_npu_writes([], {}, 2, phase=1, vc=2) == paged_writes(stripe_npu_words([], {}, 2, phase=1, vc=2))
    with pytest.raises(FredError, match="no own registers"):
        stripe_npu_words([], {}, 2, phase=1, vc=2, own={"weights": 1})
