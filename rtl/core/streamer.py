"""Address generator turning a memory read port into a stream (shared by the engine controllers).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sim.config import check_bool, check_int

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
    flip-flops and a block RAM's output (a slow clock-to-out on the ECP5) reaches only that
    register, not the consumer's logic (the vector controller's operand stream into the vector
    engine and its table writes). The first word of a request is offered
    two cycles after the request is taken; then one word per cycle while ``o.ready``.

    Without ``skid`` the whole pipeline (read port enable, the word register, ``req.ready``)
    moves on ``~o.valid | o.ready``: on a stall the register and the read port's output hold.
    With ``skid`` a skid register after the word register takes the word offered in the
    first cycle of a stall; the word register moves while the skid register is empty, the
    read port (stage 1) also while it holds no word (flip-flops): ``o.ready`` reaches only
    the skid register's flag (no clock enable, not ``req.ready``, not the read port's
    enable). ``o`` is the skid register while it is full, else the word register (a
    multiplexer of flip-flops). No latency is added and a stall costs no cycle (after it,
    the skid register and then the word register are offered back to back): for requests
    offered back to back the words are offered in the same cycles as without it. The
    pipeline runs one word ahead during a stall, so a request may be taken a cycle earlier,
    and a bubble that a request of count 0 leaves may be absorbed by the stall: words are
    then offered earlier than without it, never later.

    With ``alt_lanes`` a second read port ``rd_alt`` (another memory read at the same address
    in the same cycles: the vector controller's PSUM beside SBUF) is read instead of
    ``rd_data`` for the words of requests whose ``tag`` bit 0 is set; its lanes at or above
    ``alt_lanes`` read zero. Each port's word is registered on its own and the choice (and
    the zeroing of lanes at or above ``parts``) is made after the registers, by per-lane
    select flags registered beside them: an AND-OR of flip-flops per bit in front of ``o``,
    and a block RAM's output reaches its register through nothing but the memory's own read
    logic, never a choice between the memories.

    Parameters
    ----------
    lanes : int
        Words per read (partitions).
    addr_bits, n_bits : int
        Address and count widths.
    data_width : int
        Bits kept of each 32-bit word (low bits).
    tag_bits : int
        Width of ``tag``.
    skid : bool
        Add the skid register (above): ``o.ready`` out of the pipeline's enables.
    alt_lanes : int
        Words of the second read port ``rd_alt`` (0: none; at most ``lanes``).

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
    rd_alt : In(ArrayLayout(32, alt_lanes))
        With ``alt_lanes``: the second memory's read data (same address and enable).
    o : Out(stream {data: Array(data_width, lanes), last: 1})
        ``last`` on the final word of each request.
    o_next_valid, o_next_tag : Out
        ``o.valid`` and ``o.payload.tag`` of the next cycle (combinational lookahead), so that a
        user can keep flags decoded from them in flip-flops beside the stage-2 register.
    busy : Out(1)
    """

    def __init__(self, lanes, addr_bits, n_bits, data_width=32, tag_bits=1, *, skid=False,
                 alt_lanes=0):
        check_int("lanes", lanes, 1, 1024)
        check_int("addr_bits", addr_bits, 1, 32)
        check_int("n_bits", n_bits, 1, 32)
        check_int("data_width", data_width, 1, 32)
        check_int("tag_bits", tag_bits, 1, 8)
        check_bool("skid", skid)
        check_int("alt_lanes", alt_lanes, 0, lanes)
        self.lanes, self.addr_bits, self.n_bits, self.data_width = (lanes, addr_bits, n_bits,
                                                                     data_width)
        self.tag_bits = tag_bits
        self.skid = bool(skid)
        self.alt_lanes = alt_lanes
        req = read_request_layout(addr_bits, n_bits, lanes, tag_bits)
        alt = {"rd_alt": In(data.ArrayLayout(32, alt_lanes))} if alt_lanes else {}
        super().__init__({
            "req": In(stream.Signature(req)),
            "s1_tag": Out(tag_bits),
            "rd_addr": Out(addr_bits),
            "rd_en": Out(1),
            "rd_data": In(data.ArrayLayout(32, lanes)),
            **alt,
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
        # left == 1, kept beside it, so that no n_bits-wide test precedes ``req.ready`` and so
        # the controllers' queue read enables.
        left_one = Signal()
        parts = Signal(range(lanes + 1))
        s1_valid, s1_last = Signal(), Signal()
        s1_parts = Signal(range(lanes + 1))
        tag, s1_tag = Signal(self.tag_bits), Signal(self.tag_bits)
        # Stage 2: the word registered (payload registers without reset); ``s2_word`` is the
        # word it offers (``s2`` itself, or with ``alt_lanes`` the choice after the registers).
        s2_valid = Signal()
        s2 = Signal.like(self.o.payload, reset_less=True)
        s2_word = Signal.like(self.o.payload)
        advance = Signal()      # stage 2 loads (from stage 1)
        s1_en = Signal()        # stage 1 loads (the read port is enabled)
        if self.skid:
            # ``o.ready`` must not reach ``advance``, ``req.ready``, the read port's enable and
            # from there the clock enables of PSUM's and SBUF's read-address registers, the
            # operand queue and the controller's ``noout_sent``. The skid register takes stage 2's
            # word whenever it is empty (its payload's enable is the flag) and is kept on a stall;
            # ``o.ready`` reaches only ``sk_full``'s D input.
            sk_full = Signal()
            sk = Signal.like(self.o.payload, reset_less=True)
            sk_full_n = Signal()
            m.d.comb += [
                # Stage 1 also loads while it is empty: the pipeline moved once more at the
                # start of the stall, and a request taken during it fills stage 1 as it would
                # fill the stalled pipeline without the skid register (else a word could be
                # offered a cycle later than without it).
                advance.eq(~sk_full),
                s1_en.eq(~sk_full | ~s1_valid),
                sk_full_n.eq((sk_full | s2_valid) & ~self.o.ready),
                self.o.valid.eq(sk_full | s2_valid),
                self.o.payload.eq(Mux(sk_full, sk, s2_word)),
                self.busy.eq(active | s1_valid | s2_valid | sk_full),
                # Next cycle's ``o``: the skid register if it stays or becomes full; else
                # stage 2, loaded from stage 1 or held.
                self.o_next_valid.eq(sk_full_n | Mux(advance, s1_valid, s2_valid)),
                self.o_next_tag.eq(Mux(sk_full_n, Mux(sk_full, sk.tag, s2.tag),
                                       Mux(advance, s1_tag, s2.tag))),
            ]
            m.d.sync += sk_full.eq(sk_full_n)
            with m.If(~sk_full):
                m.d.sync += sk.eq(s2_word)
        else:
            m.d.comb += [
                advance.eq(~s2_valid | self.o.ready),
                s1_en.eq(advance),
                self.o.valid.eq(s2_valid),
                self.o.payload.eq(s2_word),
                self.busy.eq(active | s1_valid | s2_valid),
                self.o_next_valid.eq(Mux(advance, s1_valid, s2_valid)),
                self.o_next_tag.eq(Mux(advance, s1_tag, s2.tag)),
            ]
        m.d.comb += [
            self.s1_tag.eq(s1_tag),
            self.rd_addr.eq(a),
            self.rd_en.eq(s1_en),
        ]
        dw = self.data_width
        with m.If(advance):
            m.d.sync += [s2_valid.eq(s1_valid), s2.last.eq(s1_last), s2.tag.eq(s1_tag)]
        if self.alt_lanes:
            # Each port's word in its own register, the per-lane choice (one-hot, zero for
            # lanes at or above ``parts``) in flags beside them (class docstring).
            na = self.alt_lanes
            s2_d0 = Signal(data.ArrayLayout(dw, lanes), reset_less=True)
            s2_d1 = Signal(data.ArrayLayout(dw, na), reset_less=True)
            s2_use0 = Signal(lanes, reset_less=True)
            s2_use1 = Signal(na, reset_less=True)
            with m.If(advance):
                m.d.sync += [s2_d0[r].eq(self.rd_data[r][:dw]) for r in range(lanes)]
                m.d.sync += [s2_d1[r].eq(self.rd_alt[r][:dw]) for r in range(na)]
                m.d.sync += [s2_use0[r].eq(~s1_tag[0] & (s1_parts > r)) for r in range(lanes)]
                m.d.sync += [s2_use1[r].eq(s1_tag[0] & (s1_parts > r)) for r in range(na)]
            m.d.comb += [s2_word.last.eq(s2.last), s2_word.tag.eq(s2.tag)]
            m.d.comb += [s2_word.data[r].eq(
                (s2_d0[r] & s2_use0[r].replicate(dw)) |
                (s2_d1[r] & s2_use1[r].replicate(dw) if r < na else 0))
                for r in range(lanes)]
        else:
            with m.If(advance):
                m.d.sync += [s2.data[r].eq(Mux(s1_parts > r, self.rd_data[r][:dw], 0))
                             for r in range(lanes)]
            m.d.comb += s2_word.eq(s2)
        with m.If(s1_en):
            m.d.sync += s1_valid.eq(active)
            with m.If(active):
                m.d.sync += [s1_last.eq(left_one), s1_parts.eq(parts), s1_tag.eq(tag),
                             a.eq(a + st), left.eq(left - 1), left_one.eq(left == 2)]
                with m.If(left_one):
                    m.d.sync += active.eq(0)
        m.d.comb += self.req.ready.eq(~active | (s1_en & left_one))
        with m.If(self.req.valid & self.req.ready):
            r = self.req.payload
            m.d.sync += [active.eq(r.count != 0), a.eq(r.addr), st.eq(r.stride),
                         left.eq(r.count), left_one.eq(r.count == 1), parts.eq(r.parts),
                         tag.eq(r.tag)]
        return m
