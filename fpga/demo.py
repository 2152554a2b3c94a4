"""A small AXI4-Lite register block: the payload of the board tops before the core existed, and
still the smallest design that proves a board's link (``python -m fpga.build <board> --config
demo``).

Register map (byte addresses, 32-bit registers):

=======  ======  ==========================================================
0x00     RO      ``ID`` = 0x4E43_4650 ("NCFP")
0x04     RO      ``CYCLES``: free-running clock-cycle counter
0x10-1C  RW      ``SCRATCH[0..3]``
0x20     RO      ``PRODUCT``: signed SCRATCH[0][15:0] * SCRATCH[1][15:0]
other    --      DECERR
=======  ======  ==========================================================
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from rtl.bus.axi import AXI4LiteSignature

__all__ = ["DEMO_ID", "DemoRegisters"]

DEMO_ID = 0x4E43_4650


class DemoRegisters(wiring.Component):
    """AXI4-Lite subordinate with the register map above; one transaction at a time, a read
    answers one cycle after its AR handshake, a write one cycle after both AW and W.

    Members
    -------
    axil : In(AXI4LiteSignature(addr_width=8))
    """

    def __init__(self):
        super().__init__({"axil": In(AXI4LiteSignature(addr_width=8))})

    def elaborate(self, platform):
        m = Module()
        bus = self.axil
        scratch = [Signal(32, name=f"scratch{i}") for i in range(4)]
        cycles = Signal(32)
        product = Signal(32)
        m.d.sync += [cycles.eq(cycles + 1),
                     product.eq(scratch[0][:16].as_signed() * scratch[1][:16].as_signed())]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(bus.arvalid):
                    m.d.comb += bus.arready.eq(1)
                    m.d.sync += bus.rresp.eq(0)
                    with m.Switch(bus.araddr[2:8]):
                        with m.Case(0x00 >> 2):
                            m.d.sync += bus.rdata.eq(DEMO_ID)
                        with m.Case(0x04 >> 2):
                            m.d.sync += bus.rdata.eq(cycles)
                        for i in range(4):
                            with m.Case((0x10 >> 2) + i):
                                m.d.sync += bus.rdata.eq(scratch[i])
                        with m.Case(0x20 >> 2):
                            m.d.sync += bus.rdata.eq(product)
                        with m.Default():
                            m.d.sync += [bus.rdata.eq(0), bus.rresp.eq(3)]
                    m.next = "R"
                with m.Elif(bus.awvalid & bus.wvalid):
                    m.d.comb += [bus.awready.eq(1), bus.wready.eq(1)]
                    m.d.sync += bus.bresp.eq(0)
                    with m.Switch(bus.awaddr[2:8]):
                        for i in range(4):
                            with m.Case((0x10 >> 2) + i):
                                m.d.sync += scratch[i].eq(bus.wdata)
                        with m.Case(0x00 >> 2, 0x04 >> 2, 0x20 >> 2):
                            m.d.sync += bus.bresp.eq(2)
                        with m.Default():
                            m.d.sync += bus.bresp.eq(3)
                    m.next = "B"
            with m.State("R"):
                m.d.comb += bus.rvalid.eq(1)
                with m.If(bus.rready):
                    m.next = "IDLE"
            with m.State("B"):
                m.d.comb += bus.bvalid.eq(1)
                with m.If(bus.bready):
                    m.next = "IDLE"
        return m
