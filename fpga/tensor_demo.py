"""The tensor engine (``rtl/tensor/engine.py``) behind a small AXI4-Lite register block: the
board payload used before the full core existed, and a way to measure the systolic array
alone on an FPGA (Fmax, LUTs and DSPs per PE) with every PE kept by synthesis.

Register map (byte addresses, 32-bit registers):

===========  ====  ============================================================================
0x000        RO    ``ID`` = 0x4E43_5444 ("NCTD")
0x004        RO    ``SHAPE``: rows [7:0] | cols [15:8] (minus one each) | formats mask [23:16]
0x008        WO    ``CTRL``: bit 0 push a stationary beat (``fmt`` in bits [6:4], ``last`` bit
                   1); bit 2 push a moving beat (``last`` bit 3, ``moving_keep`` bit 7); bit 8
                   pop the captured result beat
0x00C        RO    ``STATUS``: bit 0 stationary beat pending, bit 1 moving beat pending, bit 2
                   a result beat captured, bit 3 its ``last``, bit 4 engine busy
0x100+4i     WO    lane ``i`` of the staging beat (16 bits), ``i < rows``
0x200+4j     RO    lane ``j`` of the captured result beat (32 bits), ``j < cols``
other              DECERR
===========  ====  ============================================================================

A push holds the beat on the engine's stream until it is taken (STATUS shows it pending); a
result beat is held in the capture registers until popped. Reads answer two cycles after the
AR handshake (the read mux is registered once).
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from rtl.bus.axi import AXI4LiteSignature
from rtl.tensor.engine import TensorEngine
from sim.config import ENGINE_FORMATS, check_int

__all__ = ["TENSOR_DEMO_ID", "TensorDemo"]

TENSOR_DEMO_ID = 0x4E43_5444


class TensorDemo(wiring.Component):
    """AXI4-Lite access to a ``rows x cols`` :class:`TensorEngine`.

    Parameters
    ----------
    rows, cols : int
        Array shape, 2 to 64 each.
    formats : collection of Format
        Passed to the engine.
    mul_stages, add_stages : int
        Passed to the engine.

    Members
    -------
    axil : In(AXI4LiteSignature(addr_width=12))
    busy : Out(1)
    """

    def __init__(self, rows, cols, formats=ENGINE_FORMATS, *, mul_stages=1, add_stages=1):
        check_int("rows", rows, 2, 64)
        check_int("cols", cols, 2, 64)
        self.engine = TensorEngine(rows, cols, formats, mul_stages=mul_stages,
                                   add_stages=add_stages)
        self._rows, self._cols = rows, cols
        from amaranth.lib.wiring import Out
        super().__init__({"axil": In(AXI4LiteSignature(addr_width=12)), "busy": Out(1)})

    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        m.submodules.engine = eng = self.engine
        bus = self.axil

        stage = [Signal(16, name=f"stage{i}") for i in range(rows)]
        st_valid, st_fmt, st_last = Signal(), Signal(3), Signal()
        mv_valid, mv_last, mv_keep = Signal(), Signal(), Signal()
        st_data = Signal(16 * rows)
        mv_data = Signal(16 * rows)
        res = [Signal(32, name=f"res{j}") for j in range(cols)]
        res_valid, res_last = Signal(), Signal()

        m.d.comb += [
            eng.stationary.valid.eq(st_valid), eng.stationary.p.fmt.eq(st_fmt),
            eng.stationary.p.last.eq(st_last), eng.stationary.p.data.as_value().eq(st_data),
            eng.moving.valid.eq(mv_valid), eng.moving.p.last.eq(mv_last),
            eng.moving.p.data.as_value().eq(mv_data), eng.moving_keep.eq(mv_keep),
            eng.result.ready.eq(~res_valid),
            self.busy.eq(eng.busy),
        ]
        with m.If(eng.stationary.valid & eng.stationary.ready):
            m.d.sync += st_valid.eq(0)
        with m.If(eng.moving.valid & eng.moving.ready):
            m.d.sync += mv_valid.eq(0)
        with m.If(eng.result.valid & eng.result.ready):
            m.d.sync += [res_valid.eq(1), res_last.eq(eng.result.p.last)]
            m.d.sync += [r.eq(eng.result.p.data[j]) for j, r in enumerate(res)]

        fmask = sum(1 << int(f) for f in self.engine.formats)
        shape = (rows - 1) | ((cols - 1) << 8) | ((fmask & 0xFF) << 16)
        rdata = Signal(32)
        rresp = Signal(2)
        waddr = bus.awaddr[2:12]
        raddr = bus.araddr[2:12]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(bus.arvalid):
                    m.d.comb += bus.arready.eq(1)
                    m.d.sync += [rresp.eq(0), rdata.eq(0)]
                    with m.Switch(raddr):
                        with m.Case(0):
                            m.d.sync += rdata.eq(TENSOR_DEMO_ID)
                        with m.Case(1):
                            m.d.sync += rdata.eq(shape)
                        with m.Case(3):
                            m.d.sync += rdata.eq(Cat(st_valid, mv_valid, res_valid, res_last,
                                                     eng.busy))
                        for j in range(cols):
                            with m.Case((0x200 >> 2) + j):
                                m.d.sync += rdata.eq(res[j])
                        with m.Case(*[(0x100 >> 2) + i for i in range(rows)], 2):
                            m.d.sync += rresp.eq(2)      # write-only
                        with m.Default():
                            m.d.sync += rresp.eq(3)
                    m.next = "R"
                with m.Elif(bus.awvalid & bus.wvalid):
                    m.d.comb += [bus.awready.eq(1), bus.wready.eq(1)]
                    m.d.sync += bus.bresp.eq(0)
                    with m.Switch(waddr):
                        with m.Case(2):
                            w = bus.wdata
                            with m.If(w[0]):
                                m.d.sync += [st_valid.eq(1), st_last.eq(w[1]),
                                             st_fmt.eq(w[4:7]), st_data.eq(Cat(*stage))]
                            with m.If(w[2]):
                                m.d.sync += [mv_valid.eq(1), mv_last.eq(w[3]),
                                             mv_keep.eq(w[7]), mv_data.eq(Cat(*stage))]
                            with m.If(w[8]):
                                m.d.sync += res_valid.eq(0)
                        for i in range(rows):
                            with m.Case((0x100 >> 2) + i):
                                m.d.sync += stage[i].eq(bus.wdata[:16])
                        with m.Case(0, 1, 3, *[(0x200 >> 2) + j for j in range(cols)]):
                            m.d.sync += bus.bresp.eq(2)  # read-only
                        with m.Default():
                            m.d.sync += bus.bresp.eq(3)
                    m.next = "B"
            with m.State("R"):
                m.d.sync += [bus.rdata.eq(rdata), bus.rresp.eq(rresp)]
                m.next = "R2"
            with m.State("R2"):
                m.d.comb += bus.rvalid.eq(1)
                with m.If(bus.rready):
                    m.next = "IDLE"
            with m.State("B"):
                m.d.comb += bus.bvalid.eq(1)
                with m.If(bus.bready):
                    m.next = "IDLE"
        return m
