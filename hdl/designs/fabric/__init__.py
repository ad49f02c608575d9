"""The wafer fabric RTL (``docs/fabric_rtl.md``): links, NPU engines, phase sequencers and the fabric top."""

from .fabric_top import FabricTop
from .link import Link, LinkReceiver, LinkSender
from .npu_engine import NpuEngine
from .phase_sequencer import PhaseSequencer

__all__ = ["FabricTop", "Link", "LinkReceiver", "LinkSender", "NpuEngine", "PhaseSequencer"]
