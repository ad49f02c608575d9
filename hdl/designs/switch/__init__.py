"""The FRED switch RTL: microswitches, the recursive Fred_m(P) and its configuration memory.

See ``docs/switch.md`` for the datapath, latency and the configuration load protocol.
"""

from .config_memory import ConfigMemory
from .demux import Demux
from .fred_switch import FredSwitch
from .input_microswitch import InputMicroswitch
from .mux import Mux
from .output_microswitch import OutputMicroswitch
from .rd_microswitch import RDMicroswitch
from .switch_top import FredSwitchTop

__all__ = ["ConfigMemory", "Demux", "FredSwitch", "FredSwitchTop", "InputMicroswitch", "Mux",
           "OutputMicroswitch", "RDMicroswitch"]
