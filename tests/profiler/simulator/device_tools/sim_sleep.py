"""DEVICE SIMULATOR stand-in for the phone's ``sleep``: time passes, the SoC cools.

Advances the simulated clock by the requested seconds (cooling the thermal
model) but sleeps only ``time_scale`` of that for real, so cooldown tests
take milliseconds.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sim_device import cool  # noqa: E402

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
state = cool(os.environ["MBK_SYSROOT"], os.environ["MBK_SIM_DEVICE_DIR"], seconds)
time.sleep(seconds * state.get("time_scale", 0.005))
