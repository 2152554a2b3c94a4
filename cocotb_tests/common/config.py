"""Inside a cocotb test: the configuration the runner passed in ``DUT_CONFIG``."""

import json
import os

__all__ = ["dut_config"]


def dut_config():
    """Return the configuration dict the runner was given (empty if none)."""
    return json.loads(os.environ.get("DUT_CONFIG", "{}"))
