"""Address generator turning a memory read port into a stream (shared by the engine controllers).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["ReadStreamer", "read_request_layout"]


def read_request_layout(addr_bits, n_bits, lanes, tag_bits=1):
    """One request: ``count`` words at ``addr + j*stride`` (modulo 2**addr_bits), lanes >=
    ``parts`` zeroed."""
    return data.StructLayout({
        "addr": addr_bits,
        "stride": addr_bits,
        "count": n_bits,
        "parts": ceil_log2(lanes + 1),
        "tag": tag_bits,
    })


class ReadStreamer(wiring.Component):
    """Streams ``count`` words of a synchronous read port (latency 1, output holds while not
    enabled) with no bubbles between words or requests.

    Timing: the read port's word (``rd_data``, with lanes at or above the request's ``parts``
    zeroed) is registered before it is offered on ``o``, so ``o.payload`` comes from
    flip-flops and a block RAM's output (5.8 ns clock-to-out on the ECP5) reaches only that
    register (the vector controller's operand stream into the vector engine and its table
    writes were 11-12 ns paths of core2 without it). The first word of a request is offered
    two cycles after the request is taken; then one word per cycle while ``o.ready``. The
    whole pipeline (read port enable, the word register) moves on ``~o.valid | o.ready``: on
    a stall the register and the read port's output hold.

    Parameters
    ----------
    lanes : int
        Words per read (partitions).
    addr_bits, n_bits : int
        Address and count widths.
    data_width : int
        Bits kept of each 32-bit word (low bits).

    Members
    -------
    req : In(stream.Signature(read_request_layout(...) + {tag}))
        A request with ``count`` 0 is consumed and produces nothing. ``tag`` travels with
        every word of the request.
    s1_tag : Out(tag_bits)
        Tag of the word now on the read port's output (to select among several memories
        before ``rd_data``).
    rd_addr, rd_en : Out ; rd_data : In(ArrayLayout(32, lanes))
        The memory read port.
    o : Out(stream {data: Array(data_width, lanes), last: 1})
        ``last`` on the final word of each request.
    o_next_valid, o_next_tag : Out
        ``o.valid`` and ``o.payload.tag`` of the next cycle (combinational lookahead), so that a
        user can keep flags decoded from them in flip-flops beside the stage-2 register.
    busy : Out(1)
    """

    def __init__(self, lanes, addr_bits, n_bits, data_width=32, tag_bits=1):
        self.lanes, self.addr_bits, self.n_bits, self.data_width = (lanes, addr_bits, n_bits,
                                                                     data_width)
        self.tag_bits = tag_bits
        req = read_request_layout(addr_bits, n_bits, lanes, tag_bits)
        super().__init__({
            "req": In(stream.Signature(req)),
            "s1_tag": Out(tag_bits),
            "rd_addr": Out(addr_bits),
            "rd_en": Out(1),
            "rd_data": In(data.ArrayLayout(32, lanes)),
            "o": Out(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(data_width, lanes), "last": 1, "tag": tag_bits}))),
            "o_next_valid": Out(1),
            "o_next_tag": Out(tag_bits),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        active = Signal()
        a = Signal(self.addr_bits)
        st = Signal(self.addr_bits)
        left = Signal(self.n_bits)
        # left == 1, kept beside it: its n_bits-wide test was in front of ``req.ready`` and so
        # of the controllers' queue read enables.
        left_one = Signal()
        parts = Signal(range(lanes + 1))
        s1_valid, s1_last = Signal(), Signal()
        s1_parts = Signal(range(lanes + 1))
        tag, s1_tag = Signal(self.tag_bits), Signal(self.tag_bits)
        # Stage 2: the word registered (payload registers without reset).
        s2_valid = Signal()
        s2 = Signal.like(self.o.payload, reset_less=True)
        advance = Signal()
        m.d.comb += [
            advance.eq(~s2_valid | self.o.ready),
            self.o.valid.eq(s2_valid),
            self.o.payload.eq(s2),
            self.s1_tag.eq(s1_tag),
            self.rd_addr.eq(a),
            self.rd_en.eq(advance),
            self.busy.eq(active | s1_valid | s2_valid),
            self.o_next_valid.eq(Mux(advance, s1_valid, s2_valid)),
            self.o_next_tag.eq(Mux(advance, s1_tag, s2.tag)),
        ]
        with m.If(advance):
            m.d.sync += [s2_valid.eq(s1_valid), s2.last.eq(s1_last), s2.tag.eq(s1_tag)]
            m.d.sync += [s2.data[r].eq(Mux(s1_parts > r, self.rd_data[r][:self.data_width], 0))
                         for r in range(lanes)]
        with m.If(advance):
            m.d.sync += s1_valid.eq(active)
            with m.If(active):
                m.d.sync += [s1_last.eq(left_one), s1_parts.eq(parts), s1_tag.eq(tag),
                             a.eq(a + st), left.eq(left - 1), left_one.eq(left == 2)]
                with m.If(left_one):
                    m.d.sync += active.eq(0)
        m.d.comb += self.req.ready.eq(~active | (advance & left_one))
        with m.If(self.req.valid & self.req.ready):
            r = self.req.payload
            m.d.sync += [active.eq(r.count != 0), a.eq(r.addr), st.eq(r.stride),
                         left.eq(r.count), left_one.eq(r.count == 1), parts.eq(r.parts),
                         tag.eq(r.tag)]
        return m
