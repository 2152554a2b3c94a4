"""The board-independent part of every board top: UART bridge -> payload's AXI4-Lite port,
payload's AXI4 DMA port -> on-chip RAM, status LEDs.

The payload is any :class:`amaranth.lib.wiring.Component` with one AXI4-Lite subordinate port
(a member ``In(...)`` whose signature has ``awaddr`` but no ``awlen``) and at most one AXI4
manager port (``Out(...)`` with ``awlen``); the ports are found by their members, not their
names, so the core and the demo register block fit alike. Other 1-bit outputs named ``irq``,
``busy`` or ``error`` drive LEDs when the board has enough.
"""

from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Flow, In, Out

from rtl.bus.uart import uart_divisor
from rtl.bus.uart_bridge import UartBridge

from .axi_ram import AxiRam

__all__ = ["RAM_WINDOW", "find_axi_ports", "demux_lite", "HostLink", "BoardTop"]


def find_axi_ports(component):
    """Return ``(lite_name, axi_name or None)`` of a payload; ValueError if it has no AXI4-Lite
    subordinate port or several candidates."""
    lite, full = [], []
    for name, member in component.signature.members.items():
        if not member.is_signature:
            continue
        names = set(member.signature.members.keys())
        if "awaddr" not in names:
            continue
        if "awlen" in names:
            if member.flow == Flow.Out:
                full.append(name)
        elif member.flow == Flow.In:
            lite.append(name)
    if len(lite) != 1:
        raise ValueError(f"the payload must have exactly one AXI4-Lite subordinate port, "
                         f"found {lite or 'none'}")
    if len(full) > 1:
        raise ValueError(f"the payload must have at most one AXI4 manager port, found {full}")
    return lite[0], (full[0] if full else None)


def connect_by_name(m, manager, subordinate):
    """Connect two AXI interfaces member by member (widths may differ: addresses truncate or
    zero-extend); members missing on the subordinate side are left unconnected."""
    for name, member in manager.signature.members.items():
        if not hasattr(subordinate, name):
            continue
        src, dst = getattr(manager, name), getattr(subordinate, name)
        if member.flow == Flow.Out:
            m.d.comb += dst.eq(src)
        else:
            m.d.comb += src.eq(dst)


#: Bridge addresses at and above this go to the on-chip RAM's host port (offset subtracted);
#: below it, to the payload's AXI4-Lite port.
RAM_WINDOW = 0x8000_0000


def demux_lite(m, manager, targets, select):
    """Route one AXI4-Lite manager with a single transaction outstanding (the bridge: its
    address is stable until the response) to ``targets[select]``."""
    valids = {"awvalid", "wvalid", "arvalid", "bready", "rready"}
    for name, member in manager.signature.members.items():
        src = getattr(manager, name)
        if member.flow == Flow.Out:
            for k, t in enumerate(targets):
                if name in valids:
                    m.d.comb += getattr(t, name).eq(src & (select == k))
                elif name in ("awaddr", "araddr"):
                    # Offsets inside the window: the selecting bit is not passed on.
                    m.d.comb += getattr(t, name).eq(src[:len(src) - 1])
                else:
                    m.d.comb += getattr(t, name).eq(src)
        else:
            with m.Switch(select):
                for k, t in enumerate(targets):
                    with m.Case(k):
                        m.d.comb += src.eq(getattr(t, name))


class HostLink(wiring.Component):
    """Everything of a board top but the clock and the pins: UART bridge, address decode,
    on-chip RAM, payload. Simulated as a whole by ``cocotb_tests/test_uart_link.py``.

    Parameters
    ----------
    payload : wiring.Component
        The design (see the module docstring).
    divisor : int
        UART clock cycles per bit.
    timeout : int
        Bridge frame time-out in cycles.
    ram_bytes : int
        On-chip RAM size (0: none). It serves the payload's AXI4 manager port, if any, and the
        host at ``RAM_WINDOW`` and above.
    rx_depth, tx_depth : int
        Bridge buffers.

    Members
    -------
    rx : In(1), tx : Out(1)
        Serial lines.
    link_busy, link_error : Out(1)
        A frame is being handled; a received byte was dropped or malformed (sticky).
    status : Out(4)
        The payload's ``busy``, ``irq``, ``error``, ``done`` outputs where it has them.
    """

    def __init__(self, payload, *, divisor, timeout, ram_bytes=16384, rx_depth=64,
                 tx_depth=64):
        self.payload = payload
        self.lite_name, self.axi_name = find_axi_ports(payload)
        self.divisor = divisor
        self.timeout = timeout
        self.ram_bytes = ram_bytes
        self.rx_depth = rx_depth
        self.tx_depth = tx_depth
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "link_busy": Out(1),
                          "link_error": Out(1), "status": Out(4)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.payload = payload = self.payload
        lite = getattr(payload, self.lite_name)
        if not self.ram_bytes:
            m.submodules.bridge = bridge = UartBridge(
                divisor=self.divisor, addr_width=min(len(lite.awaddr), 32),
                rx_depth=self.rx_depth, tx_depth=self.tx_depth, timeout=self.timeout)
            connect_by_name(m, bridge.bus, lite)
        else:
            m.submodules.bridge = bridge = UartBridge(
                divisor=self.divisor, addr_width=32, rx_depth=self.rx_depth,
                tx_depth=self.tx_depth, timeout=self.timeout)
            if self.axi_name is not None:
                axi = getattr(payload, self.axi_name)
                m.submodules.ram = ram = AxiRam(
                    self.ram_bytes, data_width=len(axi.wdata), addr_width=len(axi.awaddr),
                    id_width=len(axi.awid))
                connect_by_name(m, axi, ram.axi)
            else:
                m.submodules.ram = ram = AxiRam(self.ram_bytes)
            # The bridge drives awaddr and araddr from one register that holds the frame's
            # address from its last byte until the reply: bit 31 selects, so no path runs from
            # the handshake signals (awvalid/arvalid) through the selection.
            sel_now = bridge.bus.awaddr[31]
            demux_lite(m, bridge.bus, [lite, ram.host], sel_now)

        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx),
                     self.link_busy.eq(bridge.busy)]
        with m.If(bridge.overrun | bridge.frame_error):
            m.d.sync += self.link_error.eq(1)
        members = payload.signature.members
        for i, name in enumerate(("busy", "irq", "error", "done")):
            if name in members and members[name].is_port and members[name].flow == Flow.Out:
                m.d.comb += self.status[i].eq(getattr(payload, name)[0])
        return m


class BoardTop(Elaboratable):
    """A board top: the ``sync`` clock from ``clockgen``, a :class:`HostLink` around
    ``payload`` on the board's USB serial pins, status on the LEDs (heartbeat, link busy,
    link error, payload busy/irq/error/done, as many as the board has).

    Parameters
    ----------
    payload : wiring.Component
        The design (see the module docstring).
    clockgen : callable(platform) -> Elaboratable
        Drives the ``sync`` domain (a PLL from the board oscillator).
    freq : float
        The ``sync`` frequency in Hz (for the UART divisor and the 20 ms frame time-out).
    baud : int
        Serial rate of the host link.
    ram_bytes : int
        Size of the on-chip RAM.
    """

    def __init__(self, payload, *, clockgen, freq, baud=115200, ram_bytes=16384,
                 rx_depth=64, tx_depth=64):
        self.payload = payload
        self.clockgen = clockgen
        self.freq = freq
        self.baud = baud
        self.divisor = uart_divisor(freq, baud)
        self.link = HostLink(payload, divisor=self.divisor, timeout=int(freq // 50),
                             ram_bytes=ram_bytes, rx_depth=rx_depth, tx_depth=tx_depth)

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.submodules.clockgen = self.clockgen(platform)
        m.submodules.link = link = self.link
        uart = platform.request("uart", 0)
        m.d.comb += [link.rx.eq(uart.rx.i), uart.tx.o.eq(link.tx)]
        heartbeat = Signal(26)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        status = [heartbeat[-1], link.link_busy, link.link_error, *link.status]
        for i, bit in enumerate(status):
            try:
                led = platform.request("led", i)
            except Exception:
                break
            m.d.comb += led.o.eq(bit)
        return m
