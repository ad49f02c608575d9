"""The FRED switch RTL: microswitches, the recursive Fred_m(P) and its configuration memory.

See ``docs/switch.md`` for the datapath, latency and the configuration load protocol.
"""

from .config_memory import ConfigMemory
from .fred_switch import FredSwitch
from .input_microswitch import InputMicroswitch
from .output_microswitch import OutputMicroswitch
from .rd_microswitch import RDMicroswitch
from .switch_top import FredSwitchTop

__all__ = ["ConfigMemory", "FredSwitch", "FredSwitchTop", "InputMicroswitch", "OutputMicroswitch", "RDMicroswitch"]
