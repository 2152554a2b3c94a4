"""The LUT window: host accesses to the vector engine's configuration port, beside the TABLE
records' writes."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.bus.axi_lite import WindowSignature
from rtl.vector.lut import CFG_LAYOUT
from sim.memmap import LUT_PAGE_BITS, MEMORY_MAP

__all__ = ["LutWindow"]


class LutWindow(wiring.Component):
    """Turns the LUT window's accesses into configuration accesses of the vector engine and
    merges them with the TABLE records' writes.

    Window word ``a`` reaches cfg address ``sim.memmap.lut_cfg_address(page, a)``: region
    ``a[9:8]`` (0 coefficients, 1 descriptors, 2 headers, 3 status), bank ``a[10]``, index
    ``page << 8 | a[7:0]``. An access is held in a one-entry register until ``cfg`` takes it,
    one cycle after the window's strobe at the earliest; a strobe while an access is held is
    ignored. The TABLE writes (``table``) have priority and pass through combinationally
    (``table.ready`` is ``cfg.ready``); the register block locks the window while a program
    runs, so the two do not compete in practice. A read's data (``rdata.valid``) is held for
    ``window.rdata`` until the next one; ``rdata.ready`` is 1.

    Members
    -------
    window : In(WindowSignature)
        The register block's LUT window port.
    page : In(LUT_PAGE_BITS)
        The ``LUT_PAGE`` register.
    table : In(stream.Signature(rtl.vector.lut.CFG_LAYOUT))
        TABLE records' writes (the vector controller's ``cfg``).
    cfg : Out(stream.Signature(CFG_LAYOUT))
        To the vector engine's configuration port.
    rdata : In(stream.Signature(32))
        The configuration port's read data.

    Reset: no access held, ``window.rdata`` 0.
    """

    def __init__(self):
        windows = {w.port: w for w in MEMORY_MAP.windows}
        super().__init__({
            "window": In(WindowSignature(windows["lut"].addr_bits)),
            "page": In(LUT_PAGE_BITS),
            "table": In(stream.Signature(CFG_LAYOUT)),
            "cfg": Out(stream.Signature(CFG_LAYOUT)),
            "rdata": In(stream.Signature(32)),
        })

    def elaborate(self, platform):
        m = Module()
        lut = self.window
        pend = Signal()
        pend_addr = Signal(16)
        pend_data = Signal(32)
        pend_write = Signal()
        la = lut.addr
        region = la[8:10]
        index = Cat(la[:8], self.page)
        cfg_addr = Mux(region == 3, 0x8000 | index, (region << 12) | (la[10] << 14) | index)
        with m.If((lut.we | lut.re) & ~pend):
            m.d.sync += [pend.eq(1), pend_addr.eq(cfg_addr), pend_data.eq(lut.wdata),
                         pend_write.eq(lut.we)]
        cfg = self.cfg
        m.d.comb += self.table.ready.eq(cfg.ready)
        with m.If(self.table.valid):
            m.d.comb += [cfg.valid.eq(1), cfg.payload.eq(self.table.payload)]
        with m.Else():
            m.d.comb += [cfg.valid.eq(pend), cfg.p.addr.eq(pend_addr),
                         cfg.p.data.eq(pend_data), cfg.p.write.eq(pend_write)]
            with m.If(pend & cfg.ready):
                m.d.sync += pend.eq(0)
        rdata = Signal(32)
        m.d.comb += self.rdata.ready.eq(1)
        with m.If(self.rdata.valid):
            m.d.sync += rdata.eq(self.rdata.payload)
        m.d.comb += lut.rdata.eq(rdata)
        return m
