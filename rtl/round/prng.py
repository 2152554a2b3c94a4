"""Per-lane XORWOW random generators with run-time seeding from one 32-bit seed.

The golden model is ``sim/prng.py`` (same generator, same seeding, same reset state); see
``docs/rounding.md`` for the choice of generator.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.dsp import registered_product
from sim.config import check_int
from sim.prng import STATE_WORDS, WEYL_STEP, XORWOW_D_STEP, lane_states

__all__ = ["Prng", "LanePrngs", "MAX_LANES"]

#: The most lanes of a generator bank: one per SBUF partition.
MAX_LANES = 128


class Prng(wiring.Component):
    """One XORWOW generator (160-bit xorshift state plus a 32-bit Weyl counter).

    Parameters
    ----------
    init : sequence of 6 ints
        Reset value of ``x, y, z, w, v, d``.

    Members
    -------
    out : Out(32)
        The word the next step produces (combinational from the state): ``d + 362437 + v'``.
    advance : In(1)
        Take the step at the next rising edge (``out`` then shows the following word).
    shift : In(1)
        Seeding: shift the state one word towards ``x`` (``x <- y <- ... <- d <- shift_in``);
        has priority over ``advance``.
    shift_in : In(32)
    shift_out : Out(32)
        The current ``x``: chain lanes by connecting it to the previous lane's ``shift_in``.
    """

    out: Out(32)
    advance: In(1)
    shift: In(1)
    shift_in: In(32)
    shift_out: Out(32)

    def __init__(self, init=None):
        if init is None:
            init = lane_states(1, 0)[0]
        init = [int(v) for v in init]
        if len(init) != STATE_WORDS or any(not 0 <= v < (1 << 32) for v in init):
            raise ValueError(f"init must be {STATE_WORDS} 32-bit words, not {init!r}")
        self._init = init
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        x, y, z, w, v, d = (Signal(32, name=n, init=i) for n, i in zip("xyzwvd", self._init))
        t = Signal(32)
        v_new = Signal(32)
        d_new = Signal(32)
        m.d.comb += [
            t.eq(x ^ (x >> 2)),
            v_new.eq((v ^ (v << 4)[:32]) ^ (t ^ (t << 1)[:32])),
            d_new.eq(d + XORWOW_D_STEP),
            self.out.eq(d_new + v_new),
            self.shift_out.eq(x),
        ]
        with m.If(self.shift):
            m.d.sync += [x.eq(y), y.eq(z), z.eq(w), w.eq(v), v.eq(d), d.eq(self.shift_in)]
        with m.Elif(self.advance):
            m.d.sync += [x.eq(y), y.eq(z), z.eq(w), w.eq(v), v.eq(v_new), d.eq(d_new)]
        return m


class LanePrngs(wiring.Component):
    """``lanes`` XORWOW generators seeded from one 32-bit seed, as ``sim.prng`` defines.

    After reset the lanes hold the states of seed 0. A ``seed_load`` pulse starts re-seeding:
    one shared MurmurHash3 finaliser produces the words of ``splitmix32(seed)``, one per cycle,
    shifted into the chained lane states. The finaliser is pipelined (:attr:`SEED_LATENCY`
    register stages: each 32-bit multiply registers its operands, then their 16 x 16-bit
    partial products, then the products' sum), so re-seeding takes ``6 * lanes + 6`` cycles
    (:attr:`seed_cycles`), during which ``busy`` is 1, ``out`` is meaningless and ``advance``
    is ignored. A ``seed_load`` while busy restarts.

    Parameters
    ----------
    lanes : int

    Members
    -------
    seed : In(32)
    seed_load : In(1)
    busy : Out(1)
    advance : In(lanes)
        Per-lane step enable.
    out : Out(ArrayLayout(32, lanes))
        The word each lane's next step produces.
    """

    #: Register stages of the seeding hash (three per 32-bit multiply): re-seeding keeps
    #: ``busy`` for ``6 * lanes`` plus this many cycles.
    SEED_LATENCY = 6

    def __init__(self, lanes):
        check_int("lanes", lanes, 1, MAX_LANES)
        self._lanes = lanes
        super().__init__({
            "seed": In(32),
            "seed_load": In(1),
            "busy": Out(1),
            "advance": In(lanes),
            "out": Out(data.ArrayLayout(32, lanes)),
        })

    @property
    def lanes(self):
        return self._lanes

    @property
    def seed_cycles(self):
        """Cycles ``busy`` stays 1 after a ``seed_load`` pulse."""
        return STATE_WORDS * self._lanes + self.SEED_LATENCY

    @staticmethod
    def _mul_lo32(m, platform, name, a, const):
        """``(a * const) mod 2**32`` in three register stages; returns the result register.

        Stage 1 registers the operand halves, stage 2 three 16 x 16-bit partial products of
        them, stage 3 their sum ``lo*lo + (lo*hi + hi*lo) << 16`` (``hi*hi`` only reaches bit
        32 and above). On an ECP5 the stage-1 and stage-2 registers are the input and output
        registers of one MULT18X18D per product (``rtl.arith.dsp.registered_product``): the
        multiply runs between them and the products leave the blocks early in the cycle, so
        the sum after them is not behind the block's combinational delay."""
        a_lo, a_hi = a[:16], a[16:32]
        c_lo, c_hi = Const(const & 0xFFFF, 16), Const(const >> 16, 16)
        one = Const(1)
        p_ll = registered_product(m, platform, a_lo, c_lo, one, f"{name}_p_ll", out_reg=True)
        p_lh = registered_product(m, platform, a_lo, c_hi, one, f"{name}_p_lh",
                                  out_reg=True)[:16]
        p_hl = registered_product(m, platform, a_hi, c_lo, one, f"{name}_p_hl",
                                  out_reg=True)[:16]
        res = Signal(32, name=name)
        m.d.sync += res.eq(p_ll + ((p_lh + p_hl)[:16] << 16))
        return res

    def elaborate(self, platform):
        m = Module()
        lanes = self._lanes
        states = lane_states(lanes, 0)
        gens = []
        for i in range(lanes):
            gen = m.submodules[f"prng{i}"] = Prng(states[i])
            gens.append(gen)
            m.d.comb += [self.out[i].eq(gen.out), gen.advance.eq(self.advance[i] & ~self.busy)]

        # Seeding: a Weyl sequence through the MurmurHash3 finaliser, one word per cycle, in
        # SEED_LATENCY stages (operands, partial products, their sum, for each 32-bit
        # multiply).
        # A restart needs no flush: words of the old seed still in the pipeline shift in first
        # and the 6 * lanes new words then replace the whole chained state.
        # ``weyl`` holds the Weyl word being hashed (the seed plus one step at the load), so the
        # Weyl adder is not in front of the first multiply.
        count = Signal(range(STATE_WORDS * lanes + 1))
        weyl = Signal(32)
        issue = Signal()
        valid = Signal(self.SEED_LATENCY)       # valid[k]: the word after stage k + 1
        # ``busy`` is ``count != 0 | valid.any()`` kept in a register: its next value is
        # computed from this cycle's (``count > 1`` implies ``issue``), so the count's compare
        # is not in front of the lanes' clock enables.
        busy = Signal()
        m.d.comb += [
            issue.eq(count != 0),
            self.busy.eq(busy),
        ]
        m.d.sync += valid.eq(Cat(issue, valid[:-1]))
        m.d.sync += busy.eq(self.seed_load | issue | valid[:-1].any())
        h1 = self._mul_lo32(m, platform, "h1", weyl ^ (weyl >> 16), 0x85EBCA6B)
        word = self._mul_lo32(m, platform, "word", h1 ^ (h1 >> 13), 0xC2B2AE35)
        with m.If(self.seed_load):
            m.d.sync += [weyl.eq(self.seed + WEYL_STEP), count.eq(STATE_WORDS * lanes)]
        with m.Elif(issue):
            m.d.sync += [weyl.eq(weyl + WEYL_STEP), count.eq(count - 1)]
        hashed = word ^ (word >> 16)
        for i, gen in enumerate(gens):
            m.d.comb += [
                gen.shift.eq(valid[-1]),
                gen.shift_in.eq(hashed if i == lanes - 1 else gens[i + 1].shift_out),
            ]
        return m
