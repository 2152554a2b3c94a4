"""The sequencer's loop stack: start PCs and remaining counts of the macro loops."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim import isa

__all__ = ["LoopStack"]


class LoopStack(wiring.Component):
    """``LOOP_DEPTH`` entries ``{start, remaining}``: LOOP_PUSH, LOOP_STEP and LOOP_POP of the
    micro-instruction in X.

    A push (``push`` with ``x_live``) writes ``start = pc + 1`` into the free entry while X
    holds the micro-instruction, stalled or not (nothing reads that entry until a push writes
    it again), and its count ``res_q`` (X's result, registered) the cycle after ``go`` (W). A
    step writes ``remaining - 1`` into the top entry while X holds it; the new top count of a
    step or pop lands in W from registers loaded every cycle. The pointers (``depth``,
    ``level_oh``, the top index, ``empty``, ``full``) move on ``adv_pre`` (a loop
    micro-instruction never traps on a record check, so ``adv_pre`` is its ``adv``).
    ``clear`` (START) empties the stack and wins over everything.

    The top count is kept beside the entries (and read instead of its entry while it is the
    top), with its ``> 1`` test as two registered halves (bits 1..15 and 16..31 not zero), so
    that ``more`` is an OR of flip-flops. Readers of the top in the cycle after a push, step
    or pop (W) hold instead of bypassing: ``more_pending`` after any of them (a BRANCH on
    LOOP_MORE), ``step_pending`` after a step or pop (a LOOP_STEP; a pushed count it reads
    through the bypass).

    Members
    -------
    clear : In(1)
    x_live, go, adv_pre : In(1)
        X holds a micro-instruction; it goes; it takes effect (no trap).
    push, step, pop, top : In(1)
        X's micro-instruction is a LOOP_PUSH, LOOP_STEP, LOOP_POP; ``top`` is ``step | pop``
        (decoded with them).
    pc : In(32)
        The instruction's PC (a push's start is ``pc + 1``).
    res_q : In(32)
        X's result registered: a push's count, the cycle after ``go``.
    more : Out(1)
        LOOP_MORE: the stack is not empty and the top's remaining count is above 1.
    start : Out(32)
        The top entry's start PC.
    depth : Out(range(LOOP_DEPTH + 1)), level_oh : Out(LOOP_DEPTH + 1)
        The depth, binary and one-hot.
    empty, full : Out(1)
        Registered ``depth == 0``, ``depth == LOOP_DEPTH``.
    more_pending, step_pending : Out(1)
        The top changes at the coming edge (W of a push, step or pop; of a step or pop).
    """

    def __init__(self):
        n = isa.LOOP_DEPTH
        super().__init__({
            "clear": In(1), "x_live": In(1), "go": In(1), "adv_pre": In(1),
            "push": In(1), "step": In(1), "pop": In(1), "top": In(1),
            "pc": In(32), "res_q": In(32),
            "more": Out(1), "start": Out(32),
            "depth": Out(range(n + 1)), "level_oh": Out(n + 1, init=1),
            "empty": Out(1, init=1), "full": Out(1),
            "more_pending": Out(1), "step_pending": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = isa.LOOP_DEPTH
        res_q = self.res_q
        lsp, lsp_oh = self.depth, self.level_oh
        ls_start = Array(Signal(32, name=f"loop_start{i}") for i in range(n))
        ls_rem = Array(Signal(32, name=f"loop_rem{i}") for i in range(n))
        rem_top = Signal(32)                  # ls_rem[ltop], kept beside it for LOOP_MORE
        # ``ls_rem[i] > 1`` and ``rem_top > 1`` as two registered halves ([1:16], [16:32])
        ls_more = Array(Signal(2, name=f"loop_more{i}") for i in range(n))
        rem_more = Signal(2)                  # ls_more[ltop]
        # The top index (pointer - 1, wrapped) is a register kept beside the pointer, so
        # that reading the top entry is a multiplexer without a subtractor.
        ltop = Signal(range(n), init=n - 1)
        push_w = Signal()                     # rem_top and ls_rem[ltop] take res_q
        lmore_w, lstep_w = self.more_pending, self.step_pending
        rem_top_now = Signal(32)
        m.d.comb += [rem_top_now.eq(Mux(push_w, res_q, rem_top)),
                     self.start.eq(ls_start[ltop]),
                     self.more.eq(~self.empty & rem_more.any())]
        push_more = Signal(2)
        m.d.comb += push_more.eq(Cat(res_q[1:16] != 0, res_q[16:32] != 0))
        # A stepped count's flags (``rem_top - 1 > 1``: ``rem_top`` neither 1 nor 2; 0 wraps
        # to 2**32 - 1).
        step_more = Signal(2)
        m.d.comb += step_more.eq(Cat(~((rem_top_now == 1) | (rem_top_now == 2)), 0))

        m.d.sync += push_w.eq(self.go & self.push)
        with m.If(push_w):      # (before LOOP_STEP's and LOOP_POP's writes, which win)
            m.d.sync += [rem_top.eq(res_q), ls_rem[ltop].eq(res_q), rem_more.eq(push_more),
                         ls_more[ltop].eq(push_more)]
        with m.If(self.adv_pre):
            with m.If(self.push):
                m.d.sync += [lsp.eq(lsp + 1), lsp_oh.eq(lsp_oh << 1), ltop.eq(lsp),
                             self.empty.eq(0), self.full.eq(lsp == n - 1)]
            with m.If(self.pop):
                m.d.sync += [lsp.eq(lsp - 1), lsp_oh.eq(lsp_oh >> 1), ltop.eq(ltop - 1),
                             self.empty.eq(lsp == 1), self.full.eq(0)]
        # The entries are written while X holds the micro-instruction (``go``, the stall
        # cone, is not in their clock enables); a stalled micro-instruction rewrites the
        # same values, a trapping one stops the sequencer and START empties the stack.
        with m.If(self.x_live & self.push):
            m.d.sync += ls_start[lsp[:2]].eq(self.pc + 1)
        with m.If(self.x_live & self.step):
            m.d.sync += [ls_rem[ltop].eq(rem_top_now - 1), ls_more[ltop].eq(step_more)]
        # A step's or pop's new top count and flags, picked by X's LOOP_STEP flag, land in W.
        top_v, top_m = Signal(32), Signal(2)
        m.d.sync += [top_v.eq(Mux(self.step, rem_top_now - 1, ls_rem[(ltop - 1)[:2]])),
                     top_m.eq(Mux(self.step, step_more, ls_more[(ltop - 1)[:2]])),
                     lstep_w.eq(self.go & self.top),
                     lmore_w.eq(self.go & (self.push | self.top))]
        with m.If(lstep_w):
            m.d.sync += [rem_top.eq(top_v), rem_more.eq(top_m)]
        with m.If(self.clear):
            m.d.sync += [lsp.eq(0), lsp_oh.eq(1), ltop.eq(-1), self.empty.eq(1),
                         self.full.eq(0)]
        return m
