"""A control signal onto one of the FPGA's global networks, for a fan-out to every flip-flop."""

from amaranth.hdl import Instance, Signal

__all__ = ["global_buffer"]


def global_buffer(m, name, value, platform):
    """``value`` through a global buffer (submodule ``name`` of ``m``) when ``platform`` is an
    ECP5 (a DCCA), else ``value`` itself.

    nextpnr-ecp5 promotes only clocks to the global networks by itself; a reset or clear that
    reaches every flip-flop of a unit must not take general routing, so on the ECP5 it goes
    through a global buffer. nextpnr-ice40 promotes such nets itself. Combinational: no added
    latency."""
    if getattr(platform, "family", None) != "ecp5":
        return value
    out = Signal(name=f"{name}_global")
    m.submodules[name] = Instance("DCCA", i_CLKI=value, i_CE=1, o_CLKO=out)
    return out
