"""A training iteration's trace run by the fabric's NPUs (``docs/fabric_iteration.md``): the trace
sequencer, the NPU that pairs it with the fabric's engine, and the fabric top built with them."""

from .collective_barrier import CollectiveBarrier
from .iteration_top import iteration_fabric_top, iteration_mesh_top, iteration_packet_top
from .loading_sequencer import LoadingTraceSequencer
from .mesh_iteration_top import MeshIterationTop
from .packet_io_iteration_top import PacketIoIterationTop
from .packet_iteration_top import PacketIterationTop
from .packet_trace_npu import PacketTraceNpu
from .program_loader import ProgramLoader
from .rerun_phase_sequencer import RerunPhaseSequencer
from .stage_barrier import StageBarrier
from .stripe_trace_npu import StripeTraceNpu
from .trace_npu import TraceNpu
from .trace_sequencer import TraceSequencer
from .traced_io_controller import TracedIoController
from .wafer_collective import WaferCollective

__all__ = ["CollectiveBarrier", "LoadingTraceSequencer", "MeshIterationTop", "PacketIterationTop", "PacketIoIterationTop", "PacketTraceNpu", "StripeTraceNpu", "TracedIoController", "WaferCollective", "ProgramLoader", "RerunPhaseSequencer", "StageBarrier", "TraceNpu", "TraceSequencer", "iteration_fabric_top", "iteration_mesh_top",
           "iteration_packet_top"]
