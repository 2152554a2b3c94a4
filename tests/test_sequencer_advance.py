"""The sequencer's stall and error cones (``rtl/control/advance.py``) in the Amaranth
simulator, fed by the micro-word decoder: when X's micro-instruction goes, holds or traps,
over seeded random conditions."""

import random

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.sim import Simulator

from rtl.control.advance import AdvanceControl
from rtl.control.micro_decode import MicroDecoder
from sim import isa
from sim.isa import Engine, ErrorBit, UCond, UDst, USeq, USpecial


class _Decoded(Elaboratable):
    """AdvanceControl with the decoder's flags of ``word`` (combinational, no X register)."""

    def __init__(self):
        self.dec = MicroDecoder()
        self.adv = AdvanceControl()

    def elaborate(self, platform):
        m = Module()
        m.submodules.dec, m.submodules.adv = self.dec, self.adv
        m.d.comb += self.adv.flags.eq(self.dec.r)
        return m


def _word(**fields):
    return isa.pack(isa.MICRO_FIELDS, **{k: int(v) for k, v in fields.items()})


def _sim(top, bench):
    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


async def _idle(ctx, adv):
    """Defaults: every engine has queue space, nothing pending, no stack at a limit."""
    for n in ("outstanding", "chk_pend", "ill", "uctr_fix", "more_pending", "step_pending",
              "flags_w", "loop_full", "call_full", "ucall_full", "x_live"):
        ctx.set(getattr(adv, n), 0)
    for n in ("loop_empty", "call_empty", "ucall_empty"):
        ctx.set(getattr(adv, n), 0)
    ctx.set(adv.can_emit, 0b111)
    await ctx.tick()


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_wait_goes_on_the_registered_compare(seed):
    """A WAIT holds its first two cycles in X, then goes in the first cycle whose previous
    cycle's semaphore reached the value; short with nothing outstanding, it traps."""
    rng = random.Random(seed)
    top = _Decoded()
    adv = top.adv

    async def bench(ctx):
        await _idle(ctx, adv)
        for trial in range(60):
            i, value = rng.randrange(isa.NUM_SEMS), rng.randrange(1, 20)
            sem, outstanding = rng.randrange(value + 2), 1
            ctx.set(top.dec.word, _word(special=USpecial.WAIT, seq=USeq.END))
            ctx.set(adv.sem_sel, 1 << i)
            ctx.set(adv.res16, value)
            ctx.set(adv.x_live, 1)
            prev = None
            for cycle in range(40):
                outstanding = int(rng.random() < 0.9) if sem < value else 1
                ctx.set(adv.sems[i], sem)
                ctx.set(adv.outstanding, outstanding)
                go, err = ctx.get(adv.go), ctx.get(adv.exec_err)
                what = f"trial {trial} cycle {cycle} sem {sem} value {value} (seed {seed})"
                if cycle < 2:
                    assert (go, err) == (0, 0), what
                else:
                    sem_p, out_p = prev
                    assert go == int(sem_p >= value), what
                    dead = sem_p < value and out_p == 0
                    assert err == (1 << ErrorBit.DEADLOCK if dead else 0), what
                    assert ctx.get(adv.wait_stall) == int(sem_p < value), what
                    if go or dead:
                        break
                prev = (sem, outstanding)
                await ctx.tick()
                if rng.random() < 0.3:
                    sem += 1
            ctx.set(adv.x_live, 0)
            await ctx.tick()
            await ctx.tick()

    _sim(top, bench)


@pytest.mark.parametrize("seed", [1, 2])
def test_holds_traps_and_gates(seed):
    """Each hold term holds exactly while its condition is set (random per cycle), the
    two-cycle holds hold two cycles, each trap term raises its bit with ``go`` but not
    ``adv``/``adv_pre``, and the gated outputs follow ``go``."""
    rng = random.Random(seed)
    top = _Decoded()
    adv = top.adv
    cases = [
        # (fields, condition port or None, two-cycle hold, trap (port, bit), gated output)
        (dict(special=USpecial.EMIT, eng=Engine.DMA), "can_emit_dma", False, None, "push0"),
        (dict(special=USpecial.EMIT, eng=Engine.TENSOR), "chk_pend1", False,
         ("ill1", ErrorBit.ILLEGAL_FIELD), "push1"),
        (dict(special=USpecial.EMIT, eng=Engine.VECTOR), "can_emit_vector", False,
         ("ill2", ErrorBit.ILLEGAL_FIELD), "push2"),
        (dict(special=USpecial.BARRIER), "outstanding", False, None, None),
        (dict(special=USpecial.SEMINC, seq=USeq.ULOOP), "uctr_fix", False, None, "seminc"),
        (dict(special=USpecial.SEMSET, seq=USeq.BRANCH, cond=UCond.LOOP_MORE), "more_pending",
         False, None, "semset"),
        (dict(special=USpecial.LOOP_STEP), "step_pending", False,
         ("loop_empty", ErrorBit.LOOP_UNDERFLOW), None),
        (dict(special=USpecial.AG_SET, seq=USeq.BRANCH, cond=UCond.EQ), "flags_w", False,
         None, "ag_set"),
        (dict(special=USpecial.AG_SNAP, seq=USeq.BRANCH, cond=UCond.Z), None, True, None,
         "ag_snap"),
        (dict(special=USpecial.SEMRD), None, True, None, None),
        (dict(special=USpecial.LOOP_PUSH, dst=UDst.RD), None, False,
         ("loop_full", ErrorBit.LOOP_OVERFLOW), None),
        (dict(special=USpecial.CALL_POP), None, False, ("call_empty", ErrorBit.CALL_UNDERFLOW),
         "call_pop"),
        (dict(special=USpecial.CALL_POP, seq=USeq.ULOOP), "uctr_fix", False,
         ("call_empty", ErrorBit.CALL_UNDERFLOW), "call_pop"),
        (dict(special=USpecial.CALL_PUSH, seq=USeq.BRANCH, cond=UCond.NZ), None, True,
         ("call_full", ErrorBit.CALL_OVERFLOW), "call_push"),
        (dict(special=USpecial.CALL_PUSH, seq=USeq.BRANCH, cond=UCond.GE), "flags_w", False,
         None, "call_push"),
        (dict(special=USpecial.CALL_PUSH, seq=USeq.RET), None, False,
         ("ucall_empty", ErrorBit.UCALL_UNDERFLOW), "call_push"),
        (dict(seq=USeq.CALL, special=USpecial.SEMINC), None, False,
         ("ucall_full", ErrorBit.UCALL_OVERFLOW), "seminc"),
        (dict(seq=USeq.RET, dst=UDst.RD), None, False, ("ucall_empty",
                                                        ErrorBit.UCALL_UNDERFLOW), None),
    ]

    def cond_set(ctx, port, on):
        """Set a hold condition (``on``: it holds)."""
        if port.startswith("can_emit"):
            e = Engine.DMA if port.endswith("dma") else Engine.VECTOR
            ctx.set(adv.can_emit, 0b111 & ~(int(on) << e))
        elif port[-1].isdigit():
            ctx.set(getattr(adv, port[:-1]), int(on) << int(port[-1]))
        else:
            ctx.set(getattr(adv, port), int(on))

    async def bench(ctx):
        await _idle(ctx, adv)
        for trial in range(80):
            fields, cond, two, trap, gated = rng.choice(cases)
            writes = fields.get("dst") == UDst.RD
            ctx.set(top.dec.word, _word(**fields))
            trapping = trap is not None and rng.random() < 0.3
            if trapping:
                cond_set(ctx, trap[0], True)
            ctx.set(adv.x_live, 1)
            for cycle in range(30):
                hold = cond is not None and rng.random() < 0.5
                if cond is not None:
                    cond_set(ctx, cond, hold)
                hold = hold or (two and cycle < 2)
                what = f"trial {trial} {fields} cycle {cycle} hold {hold} (seed {seed})"
                assert ctx.get(adv.go) == int(not hold), what
                err = ctx.get(adv.exec_err)
                assert err == (1 << trap[1] if trapping else 0), what
                assert ctx.get(adv.adv_pre) == int(not hold and (
                    not trapping or trap[1] == ErrorBit.ILLEGAL_FIELD)), what
                assert ctx.get(adv.adv) == int(not hold and not trapping), what
                if writes:
                    assert ctx.get(adv.wr_kill) == int(hold or trapping), what
                if gated is not None:
                    out = (ctx.get(adv.push) >> int(gated[-1]) & 1 if gated.startswith("push")
                           else ctx.get(getattr(adv, gated)))
                    assert out == int(not hold and not trapping), what
                await ctx.tick()
                if not hold:
                    break
            ctx.set(adv.x_live, 0)
            if trapping:
                cond_set(ctx, trap[0], False)
            if cond is not None:
                cond_set(ctx, cond, False)
            for _ in range(2):
                await ctx.tick()

    _sim(top, bench)
