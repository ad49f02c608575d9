"""Functional coverage of the switch benches, with the ``cocotb-coverage`` library.

The cover points are ``cocotb_coverage.coverage.CoverPoint``/``CoverCross`` objects (this module
only declares them and feeds them samples); the library's ``coverage_db`` is exported to YAML at
the end of every bench run and the per-run files are merged with the library's
``merge_coverage`` (:func:`merge`). :func:`report` turns a merged file into totals per cover
group and a list of holes.

Coverage is off unless ``FRED_COVERAGE_FILE`` names the YAML file a run writes (the runner sets
it per run when ``FRED_COVERAGE_DIR`` is in the environment, ``make coverage`` does), so the
default suite pays nothing.

What is sampled comes from what the bench *did and saw*, never from what a test meant to do:

* ``modes.L<level>_P<size>.<kind>``: every microswitch mode of every configuration packet that
  the switch accepted (``error`` stayed NONE), decoded from the words written on the
  configuration port; one cover point per recursion level and microswitch kind, one bin per legal
  mode (``legal_modes``; e.g. 16 input, 16 output, 12 RD and 4 demux/mux modes for m = 3).
* ``flows.shape_size``: the (shape, group size) of every flow whose packets were driven.
* ``config.error``: every value the ``error`` output took (sampled when it changes).
* ``phase.event``: a configuration word or a phase select presented while ``busy`` (flits in
  flight) or while idle, as the ports showed it in the settled cycle.
* ``backpressure.situation``: episodes seen on the ports: a flow with several outputs where one
  output holds a flit it cannot deliver (valid, not ready) while another output of the flow is
  ready; a flow with several inputs where one input waits (valid, not ready) while another input
  of the flow has nothing to offer (the reduction waits for its second operand); a phase select
  pending while flits drain.
* ``backpressure.out_mode_x_stall``: the cross of the level-0 output microswitch's mode class
  (which drives ports 2v and 2v+1: out0 only, out1 only, broadcast of one wire to both, two wires)
  with the stall state of its two ports (both delivering, out0 stalled, out1 stalled, both
  stalled), sampled on every change of the pair's state while the active phase uses it.
  Internal microswitch ports of deeper levels are not sampled: the hierarchical Verilator build
  keeps each microswitch in its own model, where the VPI does not reach.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from hdl.contracts.encoding import legal_modes as encoding_legal_modes
from hdl.contracts.encoding import (DemuxMode, InputMode, MuxMode, OutputMode, RDMode,
                                        SwitchConfig, layout)
from hdl.contracts.config_port import ConfigError
from hdl.contracts.errors import FredError

__all__ = ["ENV_FILE", "ENV_DIR", "enabled", "legal_modes", "levels", "flow_shape",
           "SwitchCoverage", "merge", "load", "report", "UNREACHABLE"]

ENV_FILE = "FRED_COVERAGE_FILE"
ENV_DIR = "FRED_COVERAGE_DIR"

_KINDS = {"input": InputMode, "output": OutputMode, "rd": RDMode, "demux": DemuxMode,
          "mux": MuxMode}

#: Holes that no stimulus can close, with the reason (matched against a hole's bin text by
#: :func:`report`; each entry: (cover point suffix, bin, reason)).
UNREACHABLE: list[tuple[str, str, str]] = []


def enabled() -> bool:
    return bool(os.environ.get(ENV_FILE))


def legal_modes(kind: str, middle: int) -> list[str]:
    """The legal modes of a ``kind`` microswitch of Fred_m(.), as their ``describe()`` texts,
    in order of their encoding: every value of the mode's bit field that the contract accepts
    (the compiler's mode classes raise on every other one)."""
    return [mode.describe() for mode in encoding_legal_modes(_KINDS[kind], middle)]


def levels(ports: int, middle: int) -> dict[str, tuple[int, int, str]]:
    """``slot name -> (level, size, kind)``: the recursion level of every microswitch of
    Fred_m(P) (0 = the outermost Fred_m(P), one more per ``mid[k].``) and the port count of
    the Fred_m(.) it belongs to."""
    sizes = [ports]
    while sizes[-1] > 2:
        sizes.append(sizes[-1] // 2 + sizes[-1] % 2)
    out = {}
    for slot in layout(ports, middle):
        level = slot.name.count("mid[")
        out[slot.name] = (level, sizes[level], slot.kind)
    return out


def flow_shape(inputs, outputs) -> tuple[str, int]:
    """(shape, group size) of a flow: ``unicast`` (1 -> 1), ``multicast`` (1 -> k),
    ``reduce`` (k -> 1), ``all-reduce`` (the same k ports in and out), ``reduce-multicast``
    (k -> k' on other ports); the size is the larger side."""
    k_in, k_out = len(inputs), len(outputs)
    if k_in == 1 and k_out == 1:
        shape = "unicast"
    elif k_in == 1:
        shape = "multicast"
    elif k_out == 1:
        shape = "reduce"
    elif set(inputs) == set(outputs):
        shape = "all-reduce"
    else:
        shape = "reduce-multicast"
    return shape, max(k_in, k_out)


def _out_mode_class(mode: OutputMode) -> str | None:
    if mode.out0_en and mode.out1_en:
        return "broadcast" if mode.out0_wire == mode.out1_wire else "two-wires"
    if mode.out0_en:
        return "out0-only"
    if mode.out1_en:
        return "out1-only"
    return None


_STALL_STATES = ["delivering", "out0-stalled", "out1-stalled", "both-stalled"]
_SITUATIONS = ["broadcast-output-stalled", "reduce-waits-operand", "select-while-draining"]
_PHASE_EVENTS = ["load-idle", "load-in-flight", "select-idle", "select-in-flight"]


class SwitchCoverage:
    """The cover points of one Fred_m(P) switch bench (names under ``fred.P<P>m<m>``) and the
    samplers that feed them. Build it once per bench; cover points of the same name are shared
    (``cocotb-coverage`` keeps one ``coverage_db`` per process)."""

    def __init__(self, ports: int, middle: int):
        from cocotb_coverage.coverage import CoverCross, CoverPoint
        self.ports, self.middle = ports, middle
        self.root = root = f"fred.P{ports}m{middle}"
        self.levels = levels(ports, middle)
        self._mode_samplers = {}
        for level, size, kind in sorted(set(self.levels.values())):
            name = f"{root}.modes.L{level}_P{size}.{kind}"

            @CoverPoint(name, bins=legal_modes(kind, middle))
            def sample(description):
                pass
            self._mode_samplers[(level, kind)] = sample
        shapes = [("unicast", 1)] + [(s, k) for s in ("multicast", "reduce", "all-reduce")
                                     for k in range(2, ports + 1)]
        shapes += [("reduce-multicast", k) for k in range(2, ports)]

        @CoverPoint(f"{root}.flows.shape_size", bins=shapes, bins_labels=[f"{s}/{k}" for s, k in shapes])
        def sample_flow(shape_size):
            pass
        self._flow = sample_flow

        errors = [e.name for e in ConfigError]

        @CoverPoint(f"{root}.config.error", bins=errors)
        def sample_error(name):
            pass
        self._error = sample_error

        @CoverPoint(f"{root}.phase.event", bins=_PHASE_EVENTS)
        def sample_phase(event):
            pass
        self._phase = sample_phase

        @CoverPoint(f"{root}.backpressure.situation", bins=_SITUATIONS)
        def sample_situation(situation):
            pass
        self._situation = sample_situation

        classes = ["out0-only", "out1-only", "broadcast", "two-wires"]
        # a port the mode does not drive cannot hold a flit: out0-only never stalls out1 alone
        ignore = [("out0-only", "out1-stalled"), ("out0-only", "both-stalled"),
                  ("out1-only", "out0-stalled"), ("out1-only", "both-stalled")]

        # the points sample first (outer decorators), the cross (innermost) then combines
        # their new hits, as cocotb-coverage requires
        @CoverPoint(f"{root}.backpressure.out_mode", xf=lambda c, s: c, bins=classes)
        @CoverPoint(f"{root}.backpressure.out_stall", xf=lambda c, s: s, bins=_STALL_STATES)
        @CoverCross(f"{root}.backpressure.out_mode_x_stall",
                    items=[f"{root}.backpressure.out_mode", f"{root}.backpressure.out_stall"],
                    ign_bins=ignore)
        def sample_cross(cls, state):
            pass
        self._cross = sample_cross

    # -- samplers --------------------------------------------------------------------------
    def sample_config(self, config: SwitchConfig) -> None:
        """Every microswitch mode of a configuration the switch accepted."""
        for slot, mode in zip(config.slots, config.modes):
            level, _, kind = self.levels[slot.name]
            self._mode_samplers[(level, kind)](mode.describe())

    def sample_flow(self, inputs, outputs) -> None:
        self._flow(flow_shape(inputs, outputs))

    def sample_error(self, code: int) -> None:
        self._error(ConfigError(code).name)

    def sample_phase_event(self, event: str) -> None:
        self._phase(event)

    def sample_situation(self, situation: str) -> None:
        self._situation(situation)

    def sample_out_stall(self, mode_class: str, state: str) -> None:
        self._cross(mode_class, state)

    @staticmethod
    def write(path: str | os.PathLike | None = None) -> Path | None:
        """Export the process's ``coverage_db`` to YAML (default: ``$FRED_COVERAGE_FILE``)."""
        from cocotb_coverage.coverage import coverage_db
        path = path or os.environ.get(ENV_FILE)
        if not path:
            return None
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        coverage_db.export_to_yaml(str(path))
        return path


class SwitchCoverageProbe:
    """A :class:`~cocotb_tests.lib.stream.StreamHarness` agent that samples a switch bench's
    coverage from the ports every settled cycle: configuration packets the switch accepted
    (their modes), error codes, phase events, backpressure situations and the output-mode x
    stall cross. ``flows()`` returns the (inputs, outputs) of the flows the bench is driving;
    ``in_flight()`` whether flits entered the switch that no output delivered yet (the
    scoreboard's count: the switch's own ``busy`` also rises for a select, so it cannot tell a
    select into an idle switch from one that waits); ``word_layout`` is the configuration
    port's word layout (``config_word_layout``)."""

    def __init__(self, dut, coverage: SwitchCoverage, *, word_layout, flows, in_flight):
        self.dut, self.cov, self.flows, self.in_flight = dut, coverage, flows, in_flight
        self.word_layout = word_layout
        P = coverage.ports
        self.i_valid = [getattr(dut, f"i__{n}__valid") for n in range(P)]
        self.i_ready = [getattr(dut, f"i__{n}__ready") for n in range(P)]
        self.o_valid = [getattr(dut, f"o__{n}__valid") for n in range(P)]
        self.o_ready = [getattr(dut, f"o__{n}__ready") for n in range(P)]
        self.last_error = None
        self.episodes = defaultdict(bool)   # situation key -> ongoing
        self.pair_state = {}
        self.words = []            # configuration words of the packet being written
        self.pending = None        # (slot, words, cycle of last) of a packet being checked
        self.loaded = {}           # slot -> SwitchConfig the switch accepted
        self.accepted = 0          # packets accepted (tests of the probe read it)

    def _edge(self, cycle):
        pass

    def _reset(self):
        pass

    def _episode(self, key, on: bool, situation: str | None = None):
        if on and not self.episodes[key]:
            if situation:
                self.cov.sample_situation(situation)
        self.episodes[key] = on

    def _config_port(self, cycle, error):
        dut = self.dut
        if self.pending and cycle >= self.pending[2] + 2:
            # the packet check takes one cycle after `last`: error NONE now = accepted
            slot, words, _ = self.pending
            self.pending = None
            if error == ConfigError.NONE:
                try:
                    config = SwitchConfig.decode(words, ports=self.cov.ports, middle=self.cov.middle)
                except FredError:
                    config = None    # the switch accepted what the contract rejects: the
                    # benches' error checks fail on that; coverage does not count it
                if config is not None:
                    self.loaded[slot] = config
                    self.accepted += 1
                    self.cov.sample_config(config)
        if int(dut.config__valid.value) and int(dut.config__ready.value):
            word = self.word_layout.unpack(int(dut.config__payload.value))
            self.words.append(word["data"])
            if word["last"]:
                self.pending = (word["phase"], self.words, cycle)
                self.words = []

    def _sample(self, cycle):
        """One settled cycle: error codes, the configuration port, phase events, then (while
        flows run or a configuration is active) the backpressure situations of the flows and
        the output-mode x stall cross of the active configuration, in that order."""
        dut = self.dut
        error = int(dut.error.value)
        if error != self.last_error:
            self.cov.sample_error(error)
            self.last_error = error
        self._config_port(cycle, error)
        busy = int(bool(self.in_flight()))
        self._phase_events(busy)
        config = (self.loaded.get(int(dut.active_phase.value))
                  if int(dut.active_valid.value) else None)
        flows = self.flows()
        if not flows and config is None:
            return
        ports = _PortSample(self)
        self._flow_situations(flows, ports)
        if config is not None:
            self._out_stalls(config, ports)

    def _phase_events(self, busy: int):
        """A configuration load or phase select offered while flits are in flight or into an
        idle switch (``busy``), once per offer, and a select waiting while the switch drains
        (once per episode)."""
        for port, name in (("config", "load"), ("phase", "select")):
            valid = int(getattr(self.dut, f"{port}__valid").value)
            if valid and not self.episodes[(port, busy)]:
                self.cov.sample_phase_event(f"{name}-{'in-flight' if busy else 'idle'}")
            self.episodes[(port, busy)] = bool(valid)
            self.episodes[(port, 1 - busy)] = False
        phase_pending = int(self.dut.phase__valid.value)
        self._episode("select-drain", bool(phase_pending and busy), "select-while-draining")

    def _flow_situations(self, flows, ports: "_PortSample"):
        """Per flow of the bench (index in ``flows``), once per episode: a broadcast with one
        output stalled while another moves, a reduction with one operand waiting while another
        is missing."""
        iv, ir, ov, orr = ports.i_valid, ports.i_ready, ports.o_valid, ports.o_ready
        for index, (inputs, outputs) in enumerate(flows):
            if len(outputs) > 1:
                stalled = any(ov[p] and not orr[p] for p in outputs)
                moving = any(orr[p] for p in outputs)
                self._episode(("bcast", index), stalled and moving, "broadcast-output-stalled")
            if len(inputs) > 1:
                waiting = any(iv[p] and not ir[p] for p in inputs)
                missing = any(not iv[p] for p in inputs)
                self._episode(("reduce", index), waiting and missing, "reduce-waits-operand")

    def _out_stalls(self, config, ports: "_PortSample"):
        """The output-mode x stall cross of the active ``config``: per output pair (the last
        level's microswitch; Fred_m(2)'s RD), its mode class and which of its two outputs hold
        a flit they cannot deliver, counted when that (class, state) changes."""
        ov, orr = ports.o_valid, ports.o_ready
        for v in range(self.cov.ports // 2):
            slot = f"out[{v}]" if self.cov.ports > 2 else "rd"
            mode = config.modes[self._slot_index(config, slot)]
            mode_class = _out_mode_class(mode) if isinstance(mode, OutputMode) else _rd_class(mode)
            a, b = 2 * v, 2 * v + 1
            if mode_class is None or not (ov[a] or ov[b]):
                self.pair_state[v] = None
                continue
            stall_a, stall_b = ov[a] and not orr[a], ov[b] and not orr[b]
            state = _STALL_STATES[stall_a + 2 * stall_b]
            if self.pair_state.get(v) != (mode_class, state):
                self.cov.sample_out_stall(mode_class, state)
                self.pair_state[v] = (mode_class, state)

    @staticmethod
    def _slot_index(config, name):
        for slot in config.slots:
            if slot.name == name:
                return slot.index
        raise KeyError(name)


class _PortSample:
    """The streaming ports' handshake signals of one cycle, as lists of ints per port (read
    once per cycle from a :class:`SwitchCoverageProbe`'s handles)."""

    def __init__(self, probe: SwitchCoverageProbe):
        self.i_valid = [int(h.value) for h in probe.i_valid]
        self.i_ready = [int(h.value) for h in probe.i_ready]
        self.o_valid = [int(h.value) for h in probe.o_valid]
        self.o_ready = [int(h.value) for h in probe.o_ready]


def _rd_class(mode: RDMode) -> str | None:
    """Fred_m(2) has no output microswitch: its RD microswitch's outputs play that part."""
    if mode.out0 and mode.out1:
        return "broadcast" if mode.out0 == mode.out1 else "two-wires"
    if mode.out0:
        return "out0-only"
    if mode.out1:
        return "out1-only"
    return None


# -- merging and reporting --------------------------------------------------------------------
def merge(files, merged: str | os.PathLike) -> Path:
    """Merge per-run YAML exports into ``merged`` with cocotb-coverage's ``merge_coverage``."""
    from cocotb_coverage.coverage import merge_coverage
    files = [str(f) for f in files]
    if not files:
        raise FredError("no coverage files to merge")
    merge_coverage(lambda *a: None, str(merged), *files)
    return Path(merged)


def load(path) -> dict:
    import yaml
    return yaml.safe_load(Path(path).read_text()) or {}


def report(db: dict, *, root: str = "") -> tuple[list[str], dict]:
    """Lines of a report of a merged coverage database (``load``): per cover point (leaf),
    covered bins / bins; per cover group (the parent of a point) the totals; then every hole,
    with the reason when :data:`UNREACHABLE` explains it. Also returns
    ``{"points": {name: (covered, size)}, "holes": [(point, bin, reason)]}``."""
    points = {}
    holes = []
    for name, item in sorted(db.items()):
        if not name.startswith(root) or "bins:_hits" not in item:
            continue
        hits = item["bins:_hits"]
        at_least = item.get("at_least", 1)
        covered = sum(1 for v in hits.values() if v >= at_least)
        points[name] = (covered, len(hits))
        for b, v in hits.items():
            if v < at_least:
                reason = next((r for suffix, bin_, r in UNREACHABLE
                               if name.endswith(suffix) and str(b) == bin_), "")
                holes.append((name, str(b), reason))
    groups = defaultdict(lambda: [0, 0])
    for name, (c, s) in points.items():
        group = name.rsplit(".", 1)[0]
        groups[group][0] += c
        groups[group][1] += s
    lines = ["cover group / point                                   covered / bins"]
    for group in sorted(groups):
        c, s = groups[group]
        lines.append(f"{group:<52} {c:5d} / {s:<5d} {100 * c / s:6.1f} %")
        for name in sorted(p for p in points if p.rsplit(".", 1)[0] == group):
            pc, ps = points[name]
            lines.append(f"    {name.rsplit('.', 1)[1]:<48} {pc:5d} / {ps:<5d}")
    total_c = sum(c for c, _ in points.values())
    total_s = sum(s for _, s in points.values())
    if total_s:
        lines.append(f"{'total':<52} {total_c:5d} / {total_s:<5d} {100 * total_c / total_s:6.1f} %")
    lines.append(f"holes: {len(holes)}" + (" (none)" if not holes else ""))
    for name, b, reason in holes:
        lines.append(f"  {name}: {b}" + (f"  -- unreachable: {reason}" if reason else ""))
    return lines, {"points": points, "groups": dict(groups), "holes": holes}
