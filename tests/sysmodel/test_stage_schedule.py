"""The fluid schedule of dependent stages sharing links (sysmodel/stage_schedule.py), by hand.

The wafer-wide hierarchical 2D all-reduce of the RTL mesh (5 rows x 4 columns, links of a
quarter flit per cycle), buffer S flits, a share a rows first: in cycles per flit of S, the
rows-first chunk runs row reduce-scatter 3a, column all-reduce 1.6a, row all-gather 3a; the
columns-first chunk (b = 1 - a) column reduce-scatter 3.2b, row all-reduce 1.2b, column
all-gather 3.2b (tests/sysmodel/test_mesh_rtl_model.py derives the loads).

At a = 13/24 (the split that balances the summed loads, 0.95 S per link = 3.8 S cycles):
0 -> 1.4667: both alone (rows / columns); 1.4667: B's row all-reduce joins A's row
reduce-scatter (0.1583 left): half each, A's ends at 1.7833, B's has 0.3917 left, alone to
2.175; meanwhile A's column all-reduce (0.8667) runs alone from 1.7833, 0.475 left at 2.175
when B's column all-gather joins: half each, A's ends at 3.125; then A's row all-gather
(1.625) alone ends at 4.75, B's column all-gather (0.9917 left) at 4.1167. 4.75 S: 25 % over
the summed loads, where the RTL measured 18,870 cycles at S = 4000 (4.72 S).

At a = 1/2: A 1.5 / 0.8 / 1.5, B 1.6 / 0.6 / 1.6: 4.0 S (A's column stage meets B's column
stages for 0.1 at each end)."""

import numpy as np
import pytest

from sysmodel.stage_schedule import chains_time, chains_time_reference, link_classes

ROW, COL = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def mesh_chunks(a: float):
    b = 1 - a
    rows_first = [(3 * a, 3 * a * ROW), (1.6 * a, 1.6 * a * COL), (3 * a, 3 * a * ROW)]
    cols_first = [(3.2 * b, 3.2 * b * COL), (1.2 * b, 1.2 * b * ROW), (3.2 * b, 3.2 * b * COL)]
    return [rows_first, cols_first]


def test_one_chain_is_the_sum_of_its_stages():
    assert chains_time([[(2.0, ROW * 2), (3.0, COL), (1.0, np.zeros(2))]]) == pytest.approx(6.0)


def test_two_chains_on_one_link_share_it_half_each():
    # both need the link fully: together they take the sum; the short one ends at twice its time
    assert chains_time([[(1.0, ROW)], [(3.0, 3 * ROW)]]) == pytest.approx(4.0)
    assert chains_time([[(1.0, ROW)], [(1.0, ROW)], [(1.0, COL)]]) == pytest.approx(2.0)


def test_a_latency_bound_stage_takes_only_its_share_of_the_link():
    # A keeps the link busy a quarter of its 4 s, B all of its 3 s: max-min fair, both rise to
    # 0.8 (0.8 / 4 + 0.8 = 1); B ends at 3 / 0.8 = 3.75, when A has run 0.8 x 3.75 / 4 = 3/4 of
    # itself: its last quarter alone, 1 s, ends at 4.75
    assert chains_time([[(4.0, ROW)], [(3.0, 3 * ROW)]]) == pytest.approx(4.75)


def test_mesh_2d_at_the_balanced_loads_split_is_4_75_s_not_3_8_s():
    assert chains_time(mesh_chunks(13 / 24)) == pytest.approx(4.75)


def test_mesh_2d_at_half_split_is_4_s():
    assert chains_time(mesh_chunks(0.5)) == pytest.approx(4.0)


def test_never_below_the_busiest_link_nor_the_longest_chain():
    for a in np.linspace(0.05, 0.95, 19):
        chunks = mesh_chunks(a)
        busiest = max(sum(link for _, link in (s for c in chunks for s in c)))
        longest = max(sum(d for d, _ in c) for c in chunks)
        assert chains_time(chunks) >= max(busiest, longest) - 1e-9


def test_link_classes_merge_identical_links_without_changing_the_time():
    wide = [[(d, np.repeat(link, 5)) for d, link in chain] for chain in mesh_chunks(0.4)]
    compact = link_classes(wide)
    assert all(len(link) == 2 for chain in compact for _, link in chain)
    assert chains_time(compact) == pytest.approx(chains_time(wide))


def test_a_stage_busier_than_its_duration_is_refused():
    with pytest.raises(ValueError, match="keeps a link busy"):
        chains_time([[(1.0, 2 * ROW)]])


def test_the_reference_gives_the_hand_computed_schedules_too():
    assert chains_time_reference(mesh_chunks(13 / 24)) == pytest.approx(4.75)
    assert chains_time_reference([[(4.0, ROW)], [(3.0, 3 * ROW)]]) == pytest.approx(4.75)
    with pytest.raises(ValueError, match="keeps a link busy"):
        chains_time_reference([[(1.0, 2 * ROW)]])


def _random_chains(rng: np.random.Generator) -> list:
    """Up to five chains of up to four stages on up to six links: some stages of zero duration
    (skipped), some empty chains, links unused, partly used or full for the whole stage."""
    links = int(rng.integers(1, 7))
    chains = []
    for _ in range(int(rng.integers(1, 6))):
        chain = []
        for _ in range(int(rng.integers(0, 5))):
            duration = 0.0 if rng.random() < 0.05 else float(rng.uniform(0.1, 5.0))
            link_s = rng.uniform(0.0, 1.0, links) * duration * (rng.random(links) < 0.6)
            if rng.random() < 0.3:    # a bandwidth-bound stage: its links busy all along
                link_s = np.where(link_s > 0, duration, 0.0)
            chain.append((duration, link_s))
        chains.append(chain)
    return chains


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_schedule_is_the_reference_to_the_last_bit(seed):
    # sysmodel/stage_schedule_compiled.py adds every sum in the reference's order, so the
    # figures are equal, not merely close (the mesh's split search compares them)
    rng = np.random.default_rng(seed)
    for _ in range(250):
        chains = _random_chains(rng)
        assert chains_time(chains) == chains_time_reference(chains)


def test_no_stage_to_run_takes_no_time():
    assert chains_time([]) == chains_time_reference([]) == 0.0
    assert chains_time([[(0.0, ROW)], []]) == chains_time_reference([[(0.0, ROW)], []]) == 0.0
