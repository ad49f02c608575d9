"""The packet format (hdl/contracts/packet.py): header table, the paper's sizes, the golden
packetizer and depacketizer. Pure Python, fast."""

from __future__ import annotations

import pytest

from hdl.contracts.errors import FredError
from hdl.contracts.packet import (MAX_PHASE_BITS, PAPER, PRIORITY, VC, PacketFormat, depacketize, header_overhead,
                             link_words, packetize, paper_flits, phase_field_bits, stream_packets)

FMT = PacketFormat(phase_bits=2, seq_bits=4, flow_bits=3, packet_flits=3)


def test_header_fields_lsb_first():
    assert [(f.name, f.width, f.offset) for f in FMT.header] == [
        ("phase", 2, 0), ("vc", 2, 2), ("seq", 4, 4), ("flow", 3, 8)]
    assert FMT.header_width == 11
    # hand-computed: phase 2, vc DP (1), seq 5, flow 6
    assert FMT.pack_header(phase=2, vc=VC.DP, seq=5, flow=6) == 2 | 1 << 2 | 5 << 4 | 6 << 8
    assert FMT.unpack_header(0b110_0101_01_10) == {"phase": 2, "vc": 1, "seq": 5, "flow": 6}


def test_paper_sizes_in_flits_and_header_overhead():
    assert paper_flits() == {"data_packet": 8, "control_packet": 1, "data_vc_buffer": 48,
                             "control_vc_buffer": 4}
    assert header_overhead() == pytest.approx((4096 + 6) / 4096)
    assert PAPER["header_bytes"] * 8 == 48
    assert PRIORITY == (VC.MP, VC.PP, VC.DP)


def test_packetize_cuts_numbers_and_wraps():
    packets = packetize(FMT, range(10), phase=1, vc=VC.MP, flow=2, first_seq=14)
    assert [p.flits for p in packets] == [(0, 1, 2), (3, 4, 5), (6, 7, 8), (9,)]
    assert [p.seq for p in packets] == [14, 15, 0, 1]          # wraps at 2**4
    words = [w for p in packets for w in link_words(FMT, p)]
    assert [last for _, last, _ in words] == [0, 0, 1, 0, 0, 1, 0, 0, 1, 1]
    assert depacketize(FMT, words, first_seq=14) == {2: list(range(10))}


def test_packets_end_at_chunk_ends():
    """Issue 28's cut, by hand: a ring's 12-flit chunks in packets of 8 are 2 packets per
    chunk, of 8 and 4 flits (a packet never holds flits of two chunks); 96 flits = 8 chunks
    -> 16 packets, not ceil(96 / 8) = 12. A chunk at least the stream (the engines' chunk of
    all ones when they walk none) changes nothing; a last partial chunk of 5 -> 1 packet."""
    fmt = PacketFormat(phase_bits=2, seq_bits=5, flow_bits=3, packet_flits=8)
    packets = packetize(fmt, range(24), phase=0, vc=VC.DP, flow=0, chunk=12)
    assert [p.flits for p in packets] == [tuple(range(8)), tuple(range(8, 12)),
                                          tuple(range(12, 20)), tuple(range(20, 24))]
    assert [p.seq for p in packets] == [0, 1, 2, 3]
    assert stream_packets(12, 8, 12) == 2 and stream_packets(96, 8, 12) == 16
    assert stream_packets(96, 8) == 12 == stream_packets(96, 8, 0xFFFFFFFF)
    assert stream_packets(64, 8, 8) == 8 and stream_packets(76, 8, 2) == 38
    assert stream_packets(29, 8, 12) == 2 * 2 + 1 == len(packetize(fmt, range(29), phase=0, vc=VC.DP,
                                                                  flow=0, chunk=12))
    assert stream_packets(0, 8, 12) == 0
    with pytest.raises(FredError, match="chunk must be an integer"):
        stream_packets(24, 8, 0)


def test_depacketize_interleaved_flows_and_detects_faults():
    a = [w for p in packetize(FMT, range(6), phase=0, vc=VC.DP, flow=0) for w in link_words(FMT, p)]
    b = [w for p in packetize(FMT, range(100, 103), phase=1, vc=VC.MP, flow=1) for w in link_words(FMT, p)]
    assert depacketize(FMT, a[:3] + b + a[3:]) == {0: list(range(6)), 1: [100, 101, 102]}
    with pytest.raises(FredError, match="seq 1 where 0"):
        depacketize(FMT, a[3:] + a[:3])                       # reordered
    with pytest.raises(FredError, match="seq 0 where 1"):
        depacketize(FMT, a[:3] + a[:3])                       # duplicated
    with pytest.raises(FredError, match="no last flit"):
        depacketize(FMT, a[:2])                               # truncated
    bad = list(a[:3])
    bad[1] = (bad[1][0], 0, bad[1][2] ^ 1)
    with pytest.raises(FredError, match="header changed"):
        depacketize(FMT, bad)


def test_serial_number_compare():
    assert FMT.seq_le(3, 3) and FMT.seq_le(14, 1) and not FMT.seq_le(1, 14)


@pytest.mark.parametrize("kwargs,message", [
    ({"phase_bits": 0, "seq_bits": 4, "flow_bits": 2, "packet_flits": 2}, "phase_bits"),
    ({"phase_bits": 1, "seq_bits": 1, "flow_bits": 2, "packet_flits": 2}, "seq_bits"),
    ({"phase_bits": 1, "seq_bits": 4, "flow_bits": 2, "packet_flits": 0}, "packet_flits"),
])
def test_bad_formats_are_refused(kwargs, message):
    with pytest.raises(FredError, match=message):
        PacketFormat(**kwargs)


def test_bad_packetize_input_is_refused():
    with pytest.raises(FredError, match="vc must be"):
        packetize(FMT, [1], phase=0, vc=7, flow=0)
    with pytest.raises(FredError, match="phase"):
        packetize(FMT, [1], phase=4, vc=VC.DP, flow=0)
    with pytest.raises(FredError, match="at least one flit"):
        packetize(FMT, [], phase=0, vc=VC.DP, flow=0)


def test_dest_field_for_online_packets():
    """dest_bits adds a ``dest`` field above the others (existing fields keep their bits);
    the default phase index is all ones."""
    plain = PacketFormat(phase_bits=2, seq_bits=4, flow_bits=3, packet_flits=3)
    fmt = PacketFormat(phase_bits=2, seq_bits=4, flow_bits=3, packet_flits=3, dest_bits=3)
    assert fmt.online_phase == 3 and fmt.header_width == plain.header_width + 3
    word = fmt.pack_header(phase=3, vc=1, seq=5, flow=2, dest=6)
    assert word & ((1 << plain.header_width) - 1) == plain.pack_header(phase=3, vc=1, seq=5, flow=2)
    assert fmt.unpack_header(word)["dest"] == 6
    packets = packetize(fmt, range(7), phase=3, vc=1, flow=2, dest=6)
    assert all(p.dest == 6 for p in packets)
    words = [w for p in packets for w in link_words(fmt, p)]
    assert all(fmt.unpack_header(tag)["dest"] == 6 for _, _, tag in words)
    assert depacketize(fmt, words) == {2: list(range(7))}
    with pytest.raises(FredError, match="dest_bits > 0"):
        plain.pack_header(phase=0, vc=0, seq=0, flow=0, dest=1)
    with pytest.raises(FredError, match="dest_bits"):
        PacketFormat(phase_bits=2, seq_bits=4, flow_bits=3, packet_flits=3, dest_bits=9)


def test_the_phase_field_names_every_slot_and_online_the_default_index_above_them():
    """Hand-computed: 8 slots 0..7 in 3 bits (online: 4, the default index 15 above them), 9
    slots (Fred-D's striped I/O) in 4, one slot still one bit; 256 slots fill the widest field
    (online: 255), one more is refused naming where and the count."""
    assert [phase_field_bits(n) for n in (1, 2, 8, 9, 16, 17, 256)] == [1, 1, 3, 4, 4, 5, 8]
    assert [phase_field_bits(n, online=True) for n in (1, 7, 8, 9, 255)] == [1, 3, 4, 4, 8]
    assert MAX_PHASE_BITS == 8
    with pytest.raises(FredError, match=r"switch L1\.0 needs 257 configuration slots; .* names at most 256"):
        phase_field_bits(257, where="switch L1.0")
    with pytest.raises(FredError, match="at most 255"):
        phase_field_bits(256, online=True)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(FredError, match="positive integer"):
            phase_field_bits(bad)
