"""The sequencer's micro-pipeline (``rtl/control/micro_pipeline.py``) in the Amaranth simulator
with a control store of random micro-words: the micro-addresses that go from X follow the
sequential order (JUMP/CALL targets, taken BRANCH/ULOOP, RET), under random stalls, with two
bubbles after a redirect, one after an AG_SET/AG_SNAP whose successor reads what it writes,
and none otherwise."""

import random

import pytest
from amaranth.hdl import Array, Const, Elaboratable, Module, Signal

from amaranth.sim import Simulator

from rtl.control.memories import jump_bit
from rtl.control.micro_decode import field
from rtl.control.micro_pipeline import MicroPipeline
from sim import isa
from sim.isa import AG_SET_READS, AG_SNAP_READS, USeq, USpecial, USrc

DEPTH = 64      # control-store words used (addresses wrap into them)


def _fields(word):
    return isa.unpack(isa.MICRO_FIELDS, word)


def _store(rng):
    words = []
    for _ in range(DEPTH):
        seq = rng.choice([USeq.NEXT] * 5 + [USeq.JUMP, USeq.CALL, USeq.BRANCH, USeq.ULOOP,
                                            USeq.RET, USeq.END])
        special = rng.choice([USpecial.NONE] * 4 + [USpecial.AG_SET, USpecial.AG_SNAP])
        srcs = [USrc.RD, USrc.T0] + list(AG_SET_READS + AG_SNAP_READS)
        words.append(isa.pack(isa.MICRO_FIELDS, seq=seq, special=special,
                              cond=rng.randrange(16), target=rng.randrange(DEPTH),
                              a=rng.choice(srcs), b=rng.choice(srcs)))
    return words


class _Harness(Elaboratable):
    """The pipeline, a control store of ``words`` (one cycle read latency, the jump bit
    stored beside each word) and X's flags decoded from ``uword_x``. X's BRANCH and ULOOP
    are taken when the word's ``cond`` is odd; ``stall`` holds X."""

    def __init__(self, words):
        self.pipe = MicroPipeline()
        self.words = words
        self.stall = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.pipe = p = self.pipe
        store = Array(Const(w | jump_bit(w) << 64, 65) for w in self.words)
        m.d.sync += p.ucode_data.eq(store[p.ucode_addr[:6]])
        seq, special = field(p.uword_x, "seq"), field(p.uword_x, "special")
        m.d.comb += [
            p.go.eq(p.x_valid & ~self.stall),
            p.x_ret.eq(seq == USeq.RET), p.x_end.eq(seq == USeq.END),
            p.x_ag_set.eq(special == USpecial.AG_SET),
            p.x_ag_snap.eq(special == USpecial.AG_SNAP),
            p.redirect.eq((seq == USeq.RET) | ((seq == USeq.BRANCH) | (seq == USeq.ULOOP)) &
                          field(p.uword_x, "cond")[0]),
        ]
        return m


def _model(words, entry, ret_target, n):
    """The first ``n`` micro-addresses executed from ``entry`` and the bubbles after each."""
    order, bubbles, addr = [], [], entry
    while len(order) < n:
        f = _fields(words[addr % DEPTH])
        order.append(addr)
        if f["seq"] == USeq.END:
            bubbles.append(None)
            break
        taken = f["seq"] == USeq.RET or f["seq"] in (USeq.BRANCH, USeq.ULOOP) and f["cond"] & 1
        if taken:
            nxt = ret_target if f["seq"] == USeq.RET else f["target"]
        elif f["seq"] in (USeq.JUMP, USeq.CALL):
            nxt = f["target"]
        else:
            nxt = (addr + 1) % (1 << isa.UADDR_BITS)
        g = _fields(words[nxt % DEPTH])
        reads = {g["a"], g["b"]}
        hold = (f["special"] == USpecial.AG_SET and reads & set(AG_SET_READS) or
                f["special"] == USpecial.AG_SNAP and reads & set(AG_SNAP_READS))
        bubbles.append(2 if taken else 1 if hold else 0)
        addr = nxt
    return order, bubbles


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_micro_pipeline_order_and_bubbles(seed):
    rng = random.Random(seed)
    words = _store(rng)
    top = _Harness(words)
    p = top.pipe

    async def bench(ctx):
        for trial in range(12):
            entry, ret_target = rng.randrange(DEPTH), rng.randrange(DEPTH)
            want, want_bubbles = _model(words, entry, ret_target, 40)
            ctx.set(p.ret_target, ret_target)
            ctx.set(p.map_entry, entry)
            ctx.set(p.in_map, 1)            # MAP: the opcode map's entry, R and X emptied
            ctx.set(p.flush, 1)
            await ctx.tick()
            ctx.set(p.in_map, 0)
            ctx.set(p.flush, 0)
            ctx.set(p.in_exec, 1)
            got, bubbles, empty, cycle = [], [], 0, 0
            while len(got) < len(want):
                stall = rng.random() < 0.3
                ctx.set(top.stall, stall)
                if ctx.get(p.x_valid) and not stall:
                    got.append(ctx.get(p.upc_x))
                    if len(got) > 1:
                        bubbles.append(empty)
                    empty = 0
                elif not ctx.get(p.x_valid):
                    empty += 1
                if len(got) == 1 and cycle == 0:
                    raise AssertionError("X is valid in MAP's next cycle")
                cycle += 1
                await ctx.tick()
                assert cycle < 1000, f"trial {trial}: pipeline stuck after {got}"
            what = f"trial {trial} from {entry} (seed {seed})"
            assert got == want, what
            assert bubbles == want_bubbles[:len(bubbles)], what
            ctx.set(p.in_exec, 0)
            ctx.set(top.stall, 0)
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
