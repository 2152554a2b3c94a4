"""On-chip RAM behind an AXI4 subordinate port: the external memory of the core's DMA on a board.

A second, AXI4-Lite port (``host``) reaches the same memory for the host (through the UART
bridge on a board: loading inputs, reading results); it is served between bursts.

One burst at a time (reads and writes alternate when both wait), one beat per cycle in each
burst, INCR and FIXED bursts of any length, narrow transfers (``size`` below the bus width)
with the master's ``wstrb``. Addresses at or above ``size_bytes`` answer DECERR (writes
dropped, reads return 0).
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In

from rtl.bus.axi import AXI4LiteSignature, AXI4Signature
from rtl.bus.skid import SkidBuffer
from sim.config import check_int, check_pow2

__all__ = ["AxiRam"]


class AxiRam(wiring.Component):
    """AXI4 subordinate RAM.

    Parameters
    ----------
    size_bytes : int
        Memory size, a power of two, at least 4 data words.
    data_width : int
        32, 64 or 128.
    addr_width : int
        Width of the address ports (at least log2(size_bytes)).
    id_width : int
        ID width, echoed on B and R.
    init : sequence of int, optional
        Initial words.

    Members
    -------
    axi : In(AXI4Signature(...))
        Latency: the first read beat is valid 3 cycles after the AR handshake, then one beat
        per cycle while ``rready`` is high (``rready`` low holds the beat; R leaves through a
        register and a skid buffer, so ``rready`` reaches only registers); a burst's AR is
        taken once the previous read burst's last beat has left the read port, 3 cycles
        between their beats when back to back. The B response follows the last W beat by one
        cycle. ``awlock``/``cache``/``prot`` are ignored.
    host : In(AXI4LiteSignature(addr_width=addr_width, data_width=32))
        32-bit word access at byte addresses (``wstrb`` honoured), one at a time; served when
        no AXI4 burst waits (the DMA has priority). Read latency 3 cycles, write 1.
    """

    def __init__(self, size_bytes, *, data_width=32, addr_width=32, id_width=1, init=()):
        if data_width not in (32, 64, 128):
            raise ValueError(f"data_width must be 32, 64 or 128, not {data_width!r}")
        check_pow2("size_bytes", size_bytes, 4 * data_width // 8, 1 << 32)
        check_int("addr_width", addr_width, (size_bytes - 1).bit_length(), 64)
        self._size = size_bytes
        self._data_width = data_width
        self._addr_width = addr_width
        self._id_width = id_width
        self._init = list(init)
        super().__init__({
            "axi": In(AXI4Signature(addr_width=addr_width, data_width=data_width,
                                    id_width=id_width)),
            "host": In(AXI4LiteSignature(addr_width=addr_width, data_width=32)),
        })

    size_bytes = property(lambda self: self._size)
    data_width = property(lambda self: self._data_width)

    def elaborate(self, platform):
        m = Module()
        bus = self.axi
        nbytes = self._data_width // 8
        lsb = (nbytes - 1).bit_length()
        depth = self._size // nbytes
        m.submodules.mem = mem = memory.Memory(shape=self._data_width, depth=depth,
                                               init=self._init)
        wp = mem.write_port(granularity=8)
        rp = mem.read_port()

        addr = Signal(self._addr_width)
        size = Signal(3)
        fixed = Signal()
        bid = Signal(self._id_width)
        err = Signal()
        beats = Signal(9)                 # read beats still to issue
        # ``beats != 0`` kept in a flip-flop beside the count: the issue condition starts from
        # flip-flops, not a 9-bit compare in front of the block RAM's enables.
        beats_nz = Signal()
        prefer_read = Signal()

        # Read beats leave through a skid buffer: the block RAM's enable sees registers, not
        # the manager's ``rready`` (the DMA's, a function of the SBUF write arbiter). Before it,
        # two stages: s1 is the
        # read port's output (it holds its data while the port is not enabled), s2 a register
        # of it, so that the block RAM's output reaches only flip-flops and the error zeroing
        # and the skid buffer's multiplexer start from s2.
        # A stage takes a beat when empty or when its own beat leaves in the same cycle, so the
        # read port's enable and s2's clock enable are functions of flip-flops (``s1_valid``,
        # ``s2_valid``, the skid buffer's ``full``, the state). s2 keeps its beat's ID: the
        # burst ends (and a new AR may load ``bid``) once its last beat has left s1.
        s1_valid = Signal()
        s1_last = Signal()
        s1_err = Signal()
        s2_valid = Signal()
        s2_data = Signal(self._data_width, reset_less=True)   # ``s2_valid`` says what it holds
        s2_last = Signal()
        s2_err = Signal()
        s2_id = Signal(self._id_width)
        s1_free = Signal()
        s2_free = Signal()
        m.submodules.r_skid = r_skid = SkidBuffer(data.StructLayout({
            "data": self._data_width, "last": 1, "resp": 2, "id": self._id_width}))
        m.d.comb += [
            s2_free.eq(~s2_valid | r_skid.i.ready),
            s1_free.eq(~s1_valid | s2_free),
            r_skid.i.valid.eq(s2_valid), r_skid.i.p.last.eq(s2_last), r_skid.i.p.id.eq(s2_id),
            r_skid.i.p.data.eq(Mux(s2_err, 0, s2_data)), r_skid.i.p.resp.eq(Mux(s2_err, 3, 0)),
            bus.rvalid.eq(r_skid.o.valid), bus.rlast.eq(r_skid.o.p.last),
            bus.rid.eq(r_skid.o.p.id), bus.rdata.eq(r_skid.o.p.data),
            bus.rresp.eq(r_skid.o.p.resp), r_skid.o.ready.eq(bus.rready),
            bus.bid.eq(bid), bus.bresp.eq(Mux(err, 3, 0)),
            wp.addr.eq(addr[lsb:]),
            rp.addr.eq(addr[lsb:]),
        ]
        next_addr = Mux(fixed, addr, addr + (Const(1, 8) << size))
        out_of_range = (lambda a: a[(self._size - 1).bit_length():] != 0)

        with m.If(s2_free):
            m.d.sync += [s2_valid.eq(s1_valid), s2_data.eq(rp.data), s2_last.eq(s1_last),
                         s2_err.eq(s1_err), s2_id.eq(bid), s1_valid.eq(0)]

        host = self.host
        lanes = self._data_width // 32
        lane = Signal(range(lanes)) if lanes > 1 else Const(0, 1)
        hdata = Signal(32)
        hstrb = Signal(4)
        # The host's read word registered straight out of the block RAM, lane selection and
        # error zeroing after it, so the block RAM's output reaches only this register, not the
        # UART bridge's ``reply``. It follows the port every
        # cycle: ``addr`` does not change from the host's AR to its R handshake.
        h_data = Signal(self._data_width, reset_less=True)
        h_step = Signal()                 # HREAD's second cycle
        m.d.sync += h_data.eq(rp.data)
        m.d.comb += [
            wp.data.eq(bus.wdata),
            host.rdata.eq(Mux(err, 0, h_data.word_select(lane, 32))),
            host.rresp.eq(Mux(err, 3, 0)), host.bresp.eq(Mux(err, 3, 0)),
        ]

        with m.FSM():
            with m.State("IDLE"):
                take_read = bus.arvalid & (prefer_read | ~bus.awvalid)
                with m.If(take_read):
                    m.d.comb += bus.arready.eq(1)
                    m.d.sync += [addr.eq(bus.araddr), size.eq(bus.arsize), bid.eq(bus.arid),
                                 fixed.eq(bus.arburst == 0), beats.eq(bus.arlen + 1),
                                 beats_nz.eq(1), prefer_read.eq(0)]
                    m.next = "READ"
                with m.Elif(bus.awvalid):
                    m.d.comb += bus.awready.eq(1)
                    m.d.sync += [addr.eq(bus.awaddr), size.eq(bus.awsize), bid.eq(bus.awid),
                                 fixed.eq(bus.awburst == 0), err.eq(0), prefer_read.eq(1)]
                    m.next = "WRITE"
                with m.Elif(host.arvalid):
                    m.d.comb += host.arready.eq(1)
                    m.d.sync += [addr.eq(host.araddr), err.eq(out_of_range(host.araddr))]
                    if lanes > 1:
                        m.d.sync += lane.eq(host.araddr[2:lsb])
                    m.next = "HREAD"
                with m.Elif(host.awvalid & host.wvalid):
                    m.d.comb += [host.awready.eq(1), host.wready.eq(1)]
                    m.d.sync += [addr.eq(host.awaddr), err.eq(out_of_range(host.awaddr)),
                                 hdata.eq(host.wdata), hstrb.eq(host.wstrb)]
                    if lanes > 1:
                        m.d.sync += lane.eq(host.awaddr[2:lsb])
                    m.next = "HWRITE"
            with m.State("HREAD"):
                # The port reads ``addr`` in the first cycle, ``h_data`` takes the word in the
                # second.
                m.d.sync += h_step.eq(~h_step)
                with m.If(h_step):
                    m.next = "HRESP_R"
            with m.State("HRESP_R"):
                m.d.comb += host.rvalid.eq(1)
                with m.If(host.rready):
                    m.next = "IDLE"
            with m.State("HWRITE"):
                m.d.comb += wp.data.eq(hdata.replicate(lanes))
                with m.If(~err):
                    m.d.comb += wp.en.eq(hstrb << (4 * lane))
                m.next = "HRESP_B"
            with m.State("HRESP_B"):
                m.d.comb += host.bvalid.eq(1)
                with m.If(host.bready):
                    m.next = "IDLE"
            with m.State("WRITE"):
                m.d.comb += bus.wready.eq(1)
                with m.If(bus.wvalid):
                    with m.If(out_of_range(addr)):
                        m.d.sync += err.eq(1)
                    with m.Else():
                        m.d.comb += wp.en.eq(bus.wstrb)
                    m.d.sync += addr.eq(next_addr)
                    with m.If(bus.wlast):
                        m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += bus.bvalid.eq(1)
                with m.If(bus.bready):
                    m.next = "IDLE"
            with m.State("READ"):
                # Issue a beat when s1 is free; a stalled beat stays in the port, which is
                # not enabled. Outside READ the port reads every cycle (the host's reads, and
                # yosys then sees that a write implies the read enable: the DP16KD's clock
                # enable is the read enable, with no hold multiplexer on its output, which it
                # adds when ``rp.en`` is ``s1_free`` alone).
                m.d.comb += rp.en.eq(s1_free)
                with m.If(beats_nz & s1_free):
                    m.d.sync += [s1_valid.eq(1), s1_last.eq(beats == 1),
                                 s1_err.eq(out_of_range(addr)),
                                 addr.eq(next_addr), beats.eq(beats - 1),
                                 beats_nz.eq(beats != 1)]
                with m.If(~beats_nz & s1_free):
                    m.next = "IDLE"
        return m
