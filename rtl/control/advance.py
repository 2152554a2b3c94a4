"""Whether X's micro-instruction goes, holds or traps: the sequencer's stall and error cones."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from sim import isa
from sim.isa import Engine, ErrorBit

from .micro_decode import CALL_GATED, ENGINES, FLAGS, HOLD_TERMS, NAMES, SEQ_TERMS, TRAP_TERMS

__all__ = ["AdvanceControl"]


class AdvanceControl(wiring.Component):
    """The stall, the errors and the advance of the micro-instruction in X.

    Each of ``HOLD_TERMS`` (``rtl.control.micro_decode``) holds X when its decoded flag and
    its registered condition are both set; each of ``TRAP_TERMS`` raises its error bit. The
    stall, ``exec_err`` and ``wr_kill`` (a register-file write's kill: the same terms, from
    the flags decoded for writing micro-instructions, ``wk_*``) are sums of products of these,
    so they cannot disagree. ``go``: X's micro-instruction leaves X (``x_live`` and no
    stall); ``adv_pre``: it also raises no error but the record check's; ``adv``: it takes
    effect. The record check's verdict (``ill``) enters last.

    A WAIT registers its value (``res16``) in its first cycle in X, compares it with every
    semaphore in the second (``sem_sel`` picks the instruction's one after the compare) and
    goes in the third once the registered compare says the semaphore reached the value
    (semaphores only grow while the sequencer waits, so a compare one cycle old is safe);
    while short with nothing outstanding it traps (DEADLOCK). A BRANCH on Z/NZ and a SEMRD
    hold their first two cycles in X (their zero test and semaphore read are registered).

    The micro-instructions of ``SEQ_GATED`` go by their ``seq`` field alone (their special
    neither holds nor traps): ``seminc``, ``semset``, ``ag_set``, ``ag_snap`` and each
    engine's ``push`` (with its queue space, pending check and verdict) are sums of products
    of their own decoded flags and registered conditions, apart from the stall cone.
    ``call_push`` and ``call_pop`` (``CALL_GATED``) are ``adv_pre`` of a CALL_PUSH / CALL_POP
    made the same way, with the call stack's ``full`` / ``empty``: the call stack's entries,
    top copy and pointers change on them, so none of their clock enables is behind the stall.

    Members
    -------
    flags : In(StructLayout({flag: 1 for flag in FLAGS}))
        X's decoded micro-word (:class:`rtl.control.micro_decode.MicroDecoder`'s ``x``).
    x_live : In(1)
    res16 : In(SEM_VALUE_BITS)
        X's result, low bits (a WAIT's value).
    sems : In(ArrayLayout(SEM_VALUE_BITS, NUM_SEMS)); sem_sel : In(NUM_SEMS)
        The semaphore registers; the instruction's semaphore, one-hot.
    outstanding, can_emit, chk_pend, ill : In(3)
        Per engine: a record outstanding; queue space; a checked slot's write pending; the
        record check's verdict.
    uctr_fix, more_pending, step_pending, flags_w : In(1)
        Pending writes of what ULOOP, LOOP_MORE, LOOP_STEP and a flag BRANCH read.
    loop_full, loop_empty, call_full, call_empty, ucall_full, ucall_empty : In(1)
        The stacks' registered pointer tests.
    go, adv_pre, adv : Out(1)
    exec_err : Out(16)
        X's error bits (``ErrorBit``), valid with ``x_live``.
    exec_any : Out(1)
        ``exec_err != 0``.
    wr_kill : Out(1)
        A writing micro-instruction in X holds or traps.
    wait_stall : Out(1)
        X's WAIT holds because its semaphore is short.
    seminc, semset, ag_set, ag_snap : Out(1); push : Out(3)
        Those micro-instructions go (with ``x_live``); an EMIT pushes its engine's record.
    call_push, call_pop : Out(1)
        A CALL_PUSH / CALL_POP goes and does not trap (``adv_pre`` with its flag).
    """

    def __init__(self):
        n = isa.NUM_SEMS
        super().__init__({
            "flags": In(data.StructLayout({f: 1 for f in FLAGS})), "x_live": In(1),
            "res16": In(isa.SEM_VALUE_BITS),
            "sems": In(data.ArrayLayout(isa.SEM_VALUE_BITS, n)), "sem_sel": In(n),
            "outstanding": In(3), "can_emit": In(3), "chk_pend": In(3), "ill": In(3),
            "uctr_fix": In(1), "more_pending": In(1), "step_pending": In(1), "flags_w": In(1),
            "loop_full": In(1), "loop_empty": In(1), "call_full": In(1), "call_empty": In(1),
            "ucall_full": In(1), "ucall_empty": In(1),
            "go": Out(1), "adv_pre": Out(1), "adv": Out(1), "exec_err": Out(16),
            "exec_any": Out(1), "wr_kill": Out(1), "wait_stall": Out(1),
            "seminc": Out(1), "semset": Out(1), "ag_set": Out(1), "ag_snap": Out(1),
            "push": Out(3), "call_push": Out(1), "call_pop": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        xd, x_live, outstanding = self.flags, self.x_live, self.outstanding
        # WAIT: neither the ALU's carry chain nor the compare is in front of ``adv``. The
        # compare reads the semaphore registers, not a pending SEMSET's value: that is from
        # the micro-instruction before this one, and the compare is used from the WAIT's
        # second cycle in X on, when nothing is pending.
        wait_short, wait_go = Signal(), Signal()
        wait_seen, wait_armed, wait_ok, wait_dead = Signal(), Signal(), Signal(), Signal()
        wait_val = Signal(isa.SEM_VALUE_BITS)
        sem_short = Signal(isa.NUM_SEMS)
        m.d.comb += [sem_short[i].eq(self.sems[i] < wait_val) for i in range(isa.NUM_SEMS)]
        m.d.comb += [wait_short.eq((sem_short & self.sem_sel).any()),
                     wait_go.eq(wait_armed & wait_ok),
                     self.wait_stall.eq(x_live & xd.wait & wait_armed & ~wait_ok)]
        m.d.sync += [wait_seen.eq(x_live & xd.wait & ~wait_go),
                     wait_armed.eq(x_live & xd.wait & wait_seen & ~wait_go),
                     wait_val.eq(self.res16), wait_ok.eq(~wait_short),
                     wait_dead.eq(wait_short & (outstanding == 0))]   # implies ~wait_ok
        zb_seen, zb_go = Signal(), Signal()
        sr_seen = Signal()          # a SEMRD has held its first cycle in X
        sr_go = Signal()            # ... and its second: the semaphore value is registered
        # The conditions of ``HOLD_TERMS`` and ``TRAP_TERMS``, by the same keys.
        hold_when = {"emit_" + NAMES[e]: ~self.can_emit[e] | self.chk_pend[e] for e in ENGINES}
        hold_when.update(wait=~wait_go, zbranch=~zb_go, barrier=outstanding != 0,
                         uloop=self.uctr_fix, br_loop_more=self.more_pending, semrd=~sr_go,
                         loop_step=self.step_pending, br_flags=self.flags_w)
        eb = ErrorBit
        trap_when = {
            (eb.LOOP_OVERFLOW, "loop_push"): self.loop_full,
            (eb.LOOP_UNDERFLOW, "loop_top"): self.loop_empty,
            (eb.CALL_OVERFLOW, "call_push"): self.call_full,
            (eb.CALL_UNDERFLOW, "call_pop"): self.call_empty,
            (eb.UCALL_OVERFLOW, "call"): self.ucall_full,
            (eb.UCALL_UNDERFLOW, "ret"): self.ucall_empty,
            (eb.MICRO_TRAP, "trap"): Const(1),
            (eb.DEADLOCK, "wait"): wait_armed & wait_dead,
            (eb.ILLEGAL_FIELD, "emit_tensor"): self.ill[Engine.TENSOR],
            (eb.ILLEGAL_FIELD, "emit_vector"): self.ill[Engine.VECTOR],
        }
        assert hold_when.keys() == set(HOLD_TERMS), "hold conditions differ from HOLD_TERMS"
        assert trap_when.keys() == set(TRAP_TERMS), "trap conditions differ from TRAP_TERMS"
        stall_any = Signal()    # the stall without ``x_live``
        m.d.comb += stall_any.eq(Cat(*[xd[n] & hold_when[n] for n in HOLD_TERMS]).any())
        exec_err = self.exec_err
        for bit in dict.fromkeys(b for b, _ in TRAP_TERMS):
            m.d.comb += exec_err[bit].eq(Cat(*[xd[n] & trap_when[b, n] for b, n in TRAP_TERMS
                                               if b == bit]).any())
        # ``exec_err != 0`` grouped by the registered tests the terms share (one LUT each);
        # the record check enters last, apart from the terms of registered flags.
        seq_fault, exec_other = Signal(), Signal()
        m.d.comb += [
            seq_fault.eq(exec_err[eb.UCALL_OVERFLOW] | exec_err[eb.UCALL_UNDERFLOW] |
                         exec_err[eb.MICRO_TRAP]),
            exec_other.eq(Cat(exec_err[eb.LOOP_OVERFLOW] | exec_err[eb.LOOP_UNDERFLOW],
                              exec_err[eb.CALL_OVERFLOW] | exec_err[eb.CALL_UNDERFLOW],
                              seq_fault, exec_err[eb.DEADLOCK]).any()),
            self.exec_any.eq(exec_other | exec_err[eb.ILLEGAL_FIELD]),
        ]
        go = Signal(attrs={"keep": 1})
        m.d.comb += [go.eq(x_live & ~(x_live & stall_any)), self.go.eq(go),
                     self.adv_pre.eq(go & ~exec_other),
                     self.adv.eq(self.adv_pre & ~exec_err[eb.ILLEGAL_FIELD])]
        # (On ``go``, not ``adv``: they differ only when X's micro-instruction traps, and the
        # trap empties X, so the flags are not read before they clear.)
        m.d.sync += [zb_seen.eq(x_live & xd.zbranch & ~go),
                     sr_seen.eq(x_live & xd.semrd & ~go),
                     sr_go.eq(x_live & xd.semrd & ~go & sr_seen),
                     zb_go.eq(x_live & xd.zbranch & ~go & zb_seen)]
        # The register file's write kill, apart from the stall and error cones.
        m.d.comb += self.wr_kill.eq(Cat(
            *[xd["wk_" + n] & hold_when[n] for n in HOLD_TERMS],
            *[xd["wk_" + n] & trap_when[b, n] for b, n in TRAP_TERMS]).any())
        # What lets a ``SEQ_GATED`` micro-instruction go: its ``seq`` field's terms.
        seq_lets_go = {"zbranch": zb_go, "ret": ~self.ucall_empty, "call": ~self.ucall_full,
                       "uloop": ~self.uctr_fix, "br_loop_more": ~self.more_pending,
                       "br_flags": ~self.flags_w}
        assert tuple(seq_lets_go) == SEQ_TERMS

        def seq_gate(n):
            return Cat(xd[n + "_plain"],
                       *[xd[f"{n}_{c}"] & ok for c, ok in seq_lets_go.items()]).any()

        for out, n in ((self.seminc, "seminc"), (self.semset, "semset"),
                       (self.ag_set, "ag_set"), (self.ag_snap, "ag_snap")):
            m.d.comb += out.eq(x_live & seq_gate(n))
        limit = {"call_push": self.call_full, "call_pop": self.call_empty}
        assert tuple(limit) == CALL_GATED
        for n, at_limit in limit.items():
            m.d.comb += getattr(self, n).eq(x_live & ~at_limit & seq_gate(n))
        for e in ENGINES:
            push = Signal(name=f"push_{NAMES[e]}")
            m.d.comb += push.eq(x_live & self.can_emit[e] & ~self.chk_pend[e] & ~self.ill[e] &
                                seq_gate("emit_" + NAMES[e]))
            m.d.comb += self.push[e].eq(push)
        return m
