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
        Latency: the first read beat is valid 2 cycles after the AR handshake, then one beat
        per cycle while ``rready`` is high (``rready`` low holds the beat; R leaves through a
        skid buffer, so ``rready`` reaches only a register); the B response
        follows the last W beat by one cycle. ``awlock``/``cache``/``prot`` are ignored.
    host : In(AXI4LiteSignature(addr_width=addr_width, data_width=32))
        32-bit word access at byte addresses (``wstrb`` honoured), one at a time; served when
        no AXI4 burst waits (the DMA has priority). Read latency 2 cycles, write 1.
    """

    def __init__(self, size_bytes, *, data_width=32, addr_width=32, id_width=1, init=()):
        if data_width not in (32, 64, 128):
            raise ValueError(f"data_width must be 32, 64 or 128, not {data_width!r}")
        if (not isinstance(size_bytes, int) or size_bytes < 4 * data_width // 8
                or size_bytes & (size_bytes - 1)):
            raise ValueError(f"size_bytes must be a power of two of at least "
                             f"{4 * data_width // 8}, not {size_bytes!r}")
        if not isinstance(addr_width, int) or not (size_bytes - 1).bit_length() <= addr_width <= 64:
            raise ValueError(f"addr_width must be an integer from "
                             f"{(size_bytes - 1).bit_length()} to 64, not {addr_width!r}")
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
        # ``beats != 0`` kept in a flip-flop beside the count: the block RAM's read enable
        # (its clock enable, on every block of the memory) then starts from two flip-flops,
        # not a 9-bit compare (``beats`` -> compare -> the enables was 11.50 ns routed, core2
        # b0acae7 seed 3).
        beats_nz = Signal()
        prefer_read = Signal()

        # Read beats leave through a skid buffer: the block RAM's enable (``issue``) sees a
        # register, not the manager's ``rready`` (the DMA's, a function of the SBUF write
        # arbiter: the critical path of a core2 build, 7b5377e, 19.94 ns). ``bid`` is the ID
        # of the beat in ``rvalid``: the burst ends (and a new AR may load ``bid``) only once
        # the skid buffer has taken its last beat, with its own copy of the ID.
        rvalid = Signal()
        rlast = Signal()
        rerr = Signal()
        m.submodules.r_skid = r_skid = SkidBuffer(data.StructLayout({
            "data": self._data_width, "last": 1, "resp": 2, "id": self._id_width}))
        r_take = Signal()
        m.d.comb += [
            r_skid.i.valid.eq(rvalid), r_skid.i.p.last.eq(rlast), r_skid.i.p.id.eq(bid),
            r_skid.i.p.data.eq(Mux(rerr, 0, rp.data)), r_skid.i.p.resp.eq(Mux(rerr, 3, 0)),
            r_take.eq(rvalid & r_skid.i.ready),
            bus.rvalid.eq(r_skid.o.valid), bus.rlast.eq(r_skid.o.p.last),
            bus.rid.eq(r_skid.o.p.id), bus.rdata.eq(r_skid.o.p.data),
            bus.rresp.eq(r_skid.o.p.resp), r_skid.o.ready.eq(bus.rready),
            bus.bid.eq(bid), bus.bresp.eq(Mux(err, 3, 0)),
            wp.addr.eq(addr[lsb:]),
            rp.addr.eq(addr[lsb:]),
        ]
        next_addr = Mux(fixed, addr, addr + (Const(1, 8) << size))
        out_of_range = (lambda a: a[(self._size - 1).bit_length():] != 0)

        with m.If(r_take):
            m.d.sync += rvalid.eq(0)

        host = self.host
        lanes = self._data_width // 32
        lane = Signal(range(lanes)) if lanes > 1 else Const(0, 1)
        hdata = Signal(32)
        hstrb = Signal(4)
        m.d.comb += [
            wp.data.eq(bus.wdata),
            host.rdata.eq(Mux(err, 0, rp.data.word_select(lane, 32))),
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
                m.d.comb += rp.en.eq(1)
                m.next = "HRESP_R"
            with m.State("HRESP_R"):
                m.d.comb += [rp.en.eq(0), host.rvalid.eq(1)]
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
                # Issue a beat when the output register is free or being emptied; the read
                # port holds its data while not enabled, so a stalled beat stays put.
                issue = beats_nz & (~rvalid | r_skid.i.ready)
                m.d.comb += rp.en.eq(issue)
                with m.If(issue):
                    m.d.sync += [rvalid.eq(1), rlast.eq(beats == 1),
                                 rerr.eq(out_of_range(addr)),
                                 addr.eq(next_addr), beats.eq(beats - 1),
                                 beats_nz.eq(beats != 1)]
                with m.If(~beats_nz & (~rvalid | (r_skid.i.ready & rlast))):
                    m.next = "IDLE"
        return m
