"""PSUM: the tensor engine's accumulator memory (read-add-write, no bubbles) with a read port."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rtl.arith.common import check_formats
from rtl.bus.mem_ports import PartitionReadSignature
from sim.config import check_int, check_pow2
from sim.dtypes import Format

from .pe import MAX_ADD_STAGES

__all__ = ["psum_write_layout", "psum_next_layout", "psum_formats", "PSUMReadSignature",
           "PSUM"]


def psum_write_layout(cols, depth):
    """One result beat on its way into PSUM (the same layout as ``rtl.core.tensor_ctrl``)."""
    return data.StructLayout({
        "data": data.ArrayLayout(32, cols),
        "addr": ceil_log2(depth),
        "accumulate": 1,
        "last": 1,
    })


def psum_next_layout(depth, candidates):
    """The beats a registered producer may offer on ``wr`` next cycle if it advances in this
    one (``PSUM(lookahead=candidates)``'s ``wr_next``): ``sel`` marks the one it will offer."""
    return data.ArrayLayout(data.StructLayout({
        "sel": 1, "addr": ceil_log2(depth), "accumulate": 1}), candidates)


def psum_formats(engine_formats):
    """The accumulation formats PSUM needs beside a tensor engine built for
    ``engine_formats``: FP32, and INT32 if the engine has INT8 (an INT8 tile's sums are the
    only INT32 beats)."""
    return (Format.FP32, Format.INT32) if Format.INT8 in engine_formats else (Format.FP32,)


#: PSUM's read port (requester's view): ``rtl.bus.mem_ports.PartitionReadSignature``.
PSUMReadSignature = PartitionReadSignature


def _kept(m, value, name):
    """``value`` on a signal that synthesis keeps (a boundary that ABC maps up to)."""
    s = Signal(name=name, attrs={"keep": 1})
    m.d.comb += s.eq(value)
    return s


def _tree(m, terms, op, name, top=4):
    """``op`` (``"all"`` or ``"any"``) of ``terms`` as a balanced tree of kept 4-input
    functions, down to at most ``top`` terms (combined here, not kept)."""
    level = 0
    while len(terms) > top:
        terms = [_kept(m, getattr(Cat(*terms[i:i + 4]), op)(), f"{name}_l{level}_{i // 4}")
                 for i in range(0, len(terms), 4)]
        level += 1
    return getattr(Cat(*terms), op)()


def _hazard(m, addr, gate, stages, name, first=1):
    """1 when ``gate`` (an accumulating beat, and in lookahead the candidate's select) and the
    beat at ``addr`` must wait for one of ``stages`` (pairs of valid, address): a fixed tree
    of kept 4-input functions, 2-bit address pairs, their AND per stage, (valid & match) of
    two stages, then ``gate`` and the OR. Left to itself, ABC's area recovery chained the
    whole compare (9 LUTs deep in the core)."""
    abits = len(addr)
    clash = []
    match = []
    for k, (sv, sa) in enumerate(stages):
        pairs = [_kept(m, sa[j:j + 2] == addr[j:j + 2], f"{name}{k + first}_eq{j // 2}")
                 for j in range(0, abits, 2)]
        match.append((sv, _kept(m, _tree(m, pairs, "all", f"{name}{k + first}_match"),
                                f"{name}{k + first}_match")))
    for k in range(0, len(match), 2):
        terms = [sv & mt for sv, mt in match[k:k + 2]]
        clash.append(_kept(m, terms[0] | terms[1] if len(terms) == 2 else terms[0],
                           f"{name}{k + first}_clash"))
    if not clash:
        return _kept(m, 0, f"{name}_hazard")
    return _kept(m, gate & _tree(m, clash, "any", f"{name}_clash", top=3),
                 f"{name}_hazard")


class PSUM(wiring.Component):
    """``cols`` partitions x ``depth`` words of FP32/INT32 accumulators.

    Each beat on ``wr`` carries one word per partition and an address: with ``accumulate`` 0 it
    overwrites the word (``psum = x``), with 1 it adds (``psum = psum + x``: FP32 RNE with DAZ/FTZ
    and canonical NaN through ``FP32Adder``, or INT32 wrapping when ``wr_int`` is 1). The words
    are split in ``banks`` equal banks (bank = the high address bits); a bank is an addressing
    convention for software (one accumulation group per bank), the hardware is one memory.

    Throughput: one beat per cycle. The only stall: an accumulating beat whose address is still
    being written by one of the ``2 + add_stages`` beats before it (a read-after-write hazard,
    only possible when a group of at most ``2 + add_stages`` beats is followed by one
    accumulating into the same words). Latency: a beat accepted at cycle ``t`` is written at the
    end of cycle ``t + latency``, ``latency = 2 + add_stages``: the old word is read (1),
    registered straight out of the block RAM (1: a block RAM's clock-to-output takes most of a
    cycle on ECP5), then added (``add_stages``); a ``rd`` request (``en``) at cycle
    ``t + latency`` or later returns it (the read port is transparent to the write). The memory
    is not cleared by reset (contents start at zero after configuration).

    Parameters
    ----------
    cols : int
        Partitions (the tensor array's columns), from 1 to 512.
    depth : int
        Words per partition, a power of two from 2 to 65536.
    banks : int
        Number of banks, a power of two dividing ``depth``.
    add_stages : int
        Pipeline stages of the FP32 adders (0 to 4).
    formats : collection of Format
        Accumulation formats to build: ``Format.FP32`` and/or ``Format.INT32`` (default both).
    lookahead : int
        0 (default): ``wr.ready`` is the hazard compare of the beat on ``wr``, a combinational
        function of ``wr.payload``. From 1 to 8: ``wr.ready`` is a flip-flop, for a producer
        whose ``wr`` comes from registers and which shows on ``wr_next`` this many candidates
        for the beat it offers next cycle if it advances in this one (``wr.valid`` low, or the
        beat taken), ``sel`` set on the one it will offer. The same beats are accepted in the
        same cycles (the hazard is computed a cycle ahead for the held beat and each
        candidate, and selected at the end: a producer's multiplexer is not in front of the
        compare).

    Members
    -------
    wr : In(stream {data: Array(32, cols), addr, accumulate: 1, last: 1})
    wr_int : In(1)
        Sampled with each ``wr`` beat: 1 accumulates as INT32 instead of FP32.
    rd : In(PSUMReadSignature(cols, depth))
        Read port for the other engines (latency 1).
    idle : Out(1)
        No write in flight.
    wr_next : In(psum_next_layout(depth, lookahead))
        With ``lookahead`` only: address and ``accumulate`` of the candidates for the beat the
        producer offers on ``wr`` next cycle if this cycle's is taken or ``wr.valid`` is 0;
        ``sel`` (at most one) marks the beat it will offer (ignored if it then offers none). A
        producer must not offer a different beat.
    """

    def __init__(self, cols, depth, *, banks=1, add_stages=1,
                 formats=(Format.FP32, Format.INT32), lookahead=0):
        check_int("cols", cols, 1, 512)
        check_pow2("depth", depth, 2, 65536)
        check_pow2("banks", banks, 1, depth)
        self._add_stages = check_int("add_stages", add_stages, 0, MAX_ADD_STAGES)
        fset = check_formats(formats, {Format.FP32, Format.INT32})
        check_int("lookahead", lookahead, 0, 8)
        self._cols, self._depth, self._banks, self._formats = cols, depth, banks, frozenset(fset)
        self._lookahead = lookahead
        members = {
            "wr": In(stream.Signature(psum_write_layout(cols, depth))),
            "wr_int": In(1),
            "rd": In(PSUMReadSignature(cols, depth)),
            "idle": Out(1),
        }
        if lookahead:
            members["wr_next"] = In(psum_next_layout(depth, lookahead))
        super().__init__(members)

    cols = property(lambda self: self._cols)
    depth = property(lambda self: self._depth)
    banks = property(lambda self: self._banks)
    add_stages = property(lambda self: self._add_stages)
    formats = property(lambda self: self._formats)
    lookahead = property(lambda self: self._lookahead)

    @property
    def bank_depth(self):
        return self._depth // self._banks

    @property
    def latency(self):
        """Cycles from a beat's transfer on ``wr`` to the first ``rd`` request that sees it."""
        return 2 + self._add_stages

    def elaborate(self, platform):
        m = Module()
        cols, Sa = self._cols, self._add_stages
        layout = data.ArrayLayout(32, cols)
        m.submodules.mem = mem = Memory(shape=layout, depth=self._depth, init=[])
        wp = mem.write_port()
        # A plain synchronous read port (old data on a same-address write), as block RAM does;
        # the hazard check below covers the write stage too.
        rmw = mem.read_port()
        ext = mem.read_port(transparent_for=(wp,))
        m.d.comb += [ext.addr.eq(self.rd.addr), ext.en.eq(self.rd.en),
                     self.rd.data.eq(ext.data)]

        # Stage k (1 .. 2+Sa) registers of beats in flight; stage 2+Sa writes.
        n = 2 + Sa
        v = [Signal(name=f"s{k + 1}_valid") for k in range(n)]
        a = [Signal(range(self._depth), name=f"s{k + 1}_addr") for k in range(n)]
        d = [Signal(layout, name=f"s{k + 1}_data", reset_less=True) for k in range(n)]
        acc = [Signal(name=f"s{k + 1}_acc") for k in range(n)]
        isint = [Signal(name=f"s{k + 1}_int") for k in range(n)]

        wr = self.wr
        # Read-after-write hazard: an accumulating beat whose address a beat in stages
        # 1 .. 2+Sa will write at or after the edge that ends this read.
        stages = list(zip(v, a))
        if not self._lookahead:
            # ``wr.ready`` is the compare of the producer's fresh address with every stage.
            ready = ~_hazard(m, wr.p.addr, wr.p.accumulate, stages, "s")
        else:
            # ``wr.ready`` is a flip-flop: next cycle's hazard, computed in this one for both
            # beats that can be on ``wr`` then. Held (``wr.valid & ~wr.ready``): this beat,
            # against stages 1 .. 1+Sa (they shift to 2 .. 2+Sa; nothing enters stage 1).
            # Otherwise: each ``wr_next`` candidate, against this beat if it is taken (it
            # enters stage 1) and stages 1 .. 1+Sa, the selected one kept. The producer's
            # registers and PSUM's stages reach this register, not back into the producer's
            # clock enables.
            # Each candidate's select (and ``accumulate``) is its compare's gate, from
            # flip-flops alongside the address compare: the OR of the gated compares is then
            # one LUT before ``ready``.
            ready = Signal(init=1, name="wr_ready")
            take_now = wr.valid & ready
            held = wr.valid & ~ready
            hazards = [_hazard(m, wr.p.addr, _kept(m, held & wr.p.accumulate, "la_held_gate"),
                               stages[:-1], "la_held", 2)]
            for i, c in enumerate(self.wr_next):
                gate = _kept(m, ~held & c.sel & c.accumulate, f"la_next{i}_gate")
                hazards.append(_hazard(m, c.addr, gate, [(take_now, wr.p.addr)] + stages[:-1],
                                       f"la_next{i}_", 1))
            m.d.sync += ready.eq(~_tree(m, hazards, "any", "la_hazard"))
        m.d.comb += [
            wr.ready.eq(ready),
            rmw.addr.eq(wr.p.addr),
            rmw.en.eq(1),
        ]
        take = wr.valid & wr.ready
        m.d.sync += [v[0].eq(take), a[0].eq(wr.p.addr), d[0].eq(wr.p.data),
                     acc[0].eq(wr.p.accumulate), isint[0].eq(self.wr_int)]
        for k in range(1, n):
            m.d.sync += [v[k].eq(v[k - 1]), a[k].eq(a[k - 1]), d[k].eq(d[k - 1]),
                         acc[k].eq(acc[k - 1]), isint[k].eq(isint[k - 1])]

        # Stage 1: the old word leaves the block RAM (rmw.data) into ``old``; stage 2: old word +
        # new word; sums ready at stage 2 + Sa.
        w = n - 1
        old = Signal(layout, name="s2_old", reset_less=True)
        m.d.sync += old.eq(rmw.data)
        value = Signal(layout)
        for i in range(cols):
            outs = {}
            if Format.INT32 in self._formats:
                s = Signal(32, name=f"isum{i}")
                m.d.comb += s.eq(old[i] + d[1][i])
                for k in range(Sa):
                    r = Signal(32, name=f"isum{i}_d{k}", reset_less=True)
                    m.d.sync += r.eq(s)
                    s = r
                outs["int"] = s
            if Format.FP32 in self._formats:
                from rtl.arith.fp32_add import FP32Adder
                add = FP32Adder(stages=Sa)
                m.submodules[f"add{i}"] = add
                m.d.comb += [add.a.eq(old[i]), add.b.eq(d[1][i])]
                outs["fp"] = add.o
            if len(outs) == 2:
                summ = Mux(isint[w], outs["int"], outs["fp"])
            else:
                summ = next(iter(outs.values()))
            m.d.comb += value[i].eq(Mux(acc[w], summ, d[w][i]))
        m.d.comb += [
            wp.addr.eq(a[w]),
            wp.data.eq(value),
            wp.en.eq(v[w]),
            self.idle.eq(~Cat(*v).any()),
        ]
        return m
