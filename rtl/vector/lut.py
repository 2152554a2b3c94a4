"""The run-time programmable LUT of the vector engine: two banks of tables and one evaluation
pipeline per lane. Golden model: ``sim.vector.lut_eval`` and ``VectorEngineModel.cfg_*``.

The ``Lut`` owns the table memories and connects its units: the cfg port (``LutConfig``), the
active bank's header (``LutHeader``) and one ``LutLane`` per lane (``rtl/vector/lut_lane.py``:
``LutReduce`` in ``lut_reduce.py``, ``LutPoly`` in ``lut_poly.py``; their arithmetic steps in
``lut_arith.py``)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.arith.common import delay
from rtl.vector.lut_arith import Mulz as _Mulz  # noqa: F401 (re-exported for tests)
from rtl.vector.lut_arith import exp2_reduce, int_to_f32, ldexp_ftz, segment_offset
from rtl.vector.lut_config import CFG_LAYOUT, LutConfig
from rtl.vector.lut_header import LutHeader
from rtl.vector.lut_lane import STAGES, LutLane, latency_of
from sim.config import check_bool, check_int, check_pow2
from sim.vector import DESC_BASE_BITS, MAX_BINADES

__all__ = ["Lut", "CFG_LAYOUT", "check_lanes", "check_depth", "int_to_f32", "ldexp_ftz",
           "exp2_reduce", "segment_offset"]



#: The most lanes of a ``Lut`` or a ``VectorEngine``.
MAX_LANES = 128


def check_lanes(lanes):
    """``sim.config.check_int("lanes", lanes, 1, MAX_LANES)``."""
    return check_int("lanes", lanes, 1, MAX_LANES)


def check_units(units, lanes):
    """``units`` evaluation units for ``lanes`` lanes: ``lanes`` when None, else an integer
    from 1 to ``lanes`` that divides it."""
    if units is None:
        return lanes
    check_int("units", units, 1, lanes)
    if lanes % units:
        raise ValueError(f"units must be a divisor of lanes ({lanes}), not {units}")
    return units


def check_depth(depth):
    """``sim.config.check_pow2("depth", depth, 8, 1024)``: entries per LUT bank."""
    return check_pow2("depth", depth, 8, 1024)


class Lut(wiring.Component):
    """Two banks of LUT tables, written and read through ``cfg``, and ``lanes`` evaluation
    pipelines (``sim.vector.lut_eval``) with hit/underflow/overflow counters.

    Parameters
    ----------
    lanes : int
        Lanes (1..128).
    depth : int
        Entries per bank (power of two, 8..1024). Each entry is three FP32 coefficients.
    deep : bool
        Pipeline the FP32 units (``latency`` 30 cycles) for clock speed; ``False`` keeps one
        cycle per step (``latency`` 6, each step a multiply-add in one cycle: about a fifth of
        the clock frequency). Results are identical.

    Members
    -------
    cfg : In(stream.Signature(CFG_LAYOUT))
        Word writes and reads of the map in ``sim.vector`` (``CFG_*``). A beat is taken into a
        register (``ready`` is its complement: one beat every two cycles at most) and carried
        out from it the next cycle at the earliest: a write lands in the cycle after it is
        taken (a coefficient, descriptor or header word one cycle later still, from registers
        of their own), a read's ``rdata`` beat is valid three cycles after it. A bad address
        sets ``error`` (a read then returns 0). A write to bank ``bank`` waits in the register
        while ``lock`` is high, so a running instruction never sees its table change; the
        other bank can be loaded meanwhile (double buffering).
    rdata : Out(stream.Signature(32))
        One beat per cfg read, in order; a beat waits in the register while a read result
        waits.
    error : Out(1)
        Sticky; cleared by a write to ``Status.ERROR``.
    z : In(ArrayLayout(32, lanes))
        FP32 inputs; ``bank`` selects the table, ``bypass`` passes ``z`` through unchanged.
        ``bank`` and the header of that bank must not change while an element that is not
        bypassed is in the pipeline (its stages take them as the element passes).
    count : In(1)
        The beat in ``z`` is an element to count in the hit/underflow/overflow counters.
    en : In(1)
        Advance the pipeline (stall when low).
    y : Out(ArrayLayout(32, lanes))
        Results, ``latency`` enabled cycles after ``z``.
    lock : In(1)
        Block cfg writes to bank ``bank`` (an instruction is using it). The coefficient RAM is
        synthesized without read/write collision logic (``no_rw_check``): a lane's read that
        matters never meets a write to its bank, as long as ``lock`` is high while the
        elements of a table instruction are in the pipeline.
    """

    #: The lanes' pipeline registers per ``deep`` (``rtl.vector.lut_reduce.STAGES``).
    _STAGES = STAGES

    def __init__(self, lanes, depth=512, *, deep=True):
        self._lanes = check_lanes(lanes)
        self._depth = check_depth(depth)
        self._deep = check_bool("deep", deep)
        super().__init__({
            "cfg": In(stream.Signature(CFG_LAYOUT)),
            "rdata": Out(stream.Signature(32)),
            "error": Out(1),
            "z": In(data.ArrayLayout(32, lanes)),
            "bank": In(1),
            "bypass": In(1),
            "count": In(1),
            "en": In(1),
            "lock": In(1),
            "y": Out(data.ArrayLayout(32, lanes)),
        })

    @property
    def lanes(self):
        return self._lanes

    @property
    def depth(self):
        return self._depth

    @property
    def deep(self):
        return self._deep

    @classmethod
    def latency_of(cls, deep):
        """Enabled cycles from ``z`` to ``y`` of a ``Lut(..., deep=deep)``: the pre-scale,
        range reduction, table read, two multiply-adds and the finish (a ``LutLane``'s)."""
        return latency_of(deep)

    @property
    def latency(self):
        """Enabled cycles from ``z`` to ``y``."""
        return self.latency_of(self._deep)

    def elaborate(self, platform):
        m = Module()
        lanes, depth = self._lanes, self._depth

        # -- the tables and the cfg port ----------------------------------------------------
        # The coefficient RAM is never read and written at one address in one cycle where the
        # read matters: a cfg read and a cfg write are different beats, and the lanes read
        # bank ``bank`` while a cfg write to it waits for ``lock`` to fall (a lane's read of
        # the other bank, or without ``lock``, is not used). ``no_rw_check`` tells yosys so,
        # for its read ports, each an asynchronous read and the register after it (in
        # ``LutConfig`` and ``LutLane``; a synchronous Amaranth read port keeps its
        # read-before-write promise): otherwise it emulates read-before-write across the
        # block RAM's two ports with a delayed write and a bypass (a registered address
        # compare and a multiplexer after every read port's output).
        m.submodules.coef = coef = Memory(shape=96, depth=2 * depth, init=[],
                                          attrs={"no_rw_check": 1})
        # A descriptor's base (``desc``) and its K (``desc_k``, written beside it): the lanes
        # read K one stage before the base. Beside each descriptor, the mask of the mantissa's
        # top seven bits below its segment start (``desc_low``, ``0x7F >> K``; K = 0 before a
        # write): the lanes read it instead of shifting by K after the descriptor read.
        m.submodules.desc = desc = Memory(shape=DESC_BASE_BITS, depth=4 * MAX_BINADES, init=[])
        m.submodules.desc_k = desc_k = Memory(shape=3, depth=4 * MAX_BINADES, init=[])
        m.submodules.desc_low = desc_low = Memory(shape=7, depth=4 * MAX_BINADES,
                                                  init=[0x7F] * (4 * MAX_BINADES))
        # The cfg port (``LutConfig``): writes land through the memories' write ports, cfg
        # reads through read ports of their own.
        m.submodules.config = cfg = LutConfig(lanes, depth)
        wiring.connect(m, wiring.flipped(self.cfg), cfg.cfg)
        wiring.connect(m, cfg.rdata, wiring.flipped(self.rdata))
        coef_wp = coef.write_port(granularity=32)
        coef_cfg_rp = coef.read_port(domain="comb")
        desc_cfg_rp = desc.read_port(domain="comb")
        desc_k_cfg_rp = desc_k.read_port(domain="comb")
        m.d.comb += [self.error.eq(cfg.error), cfg.lock.eq(self.lock), cfg.bank.eq(self.bank),
                     coef_wp.en.eq(cfg.coef_wr_en), coef_wp.addr.eq(cfg.coef_wr_addr),
                     coef_wp.data.eq(cfg.coef_wr_data), coef_cfg_rp.addr.eq(cfg.coef_rd_addr),
                     cfg.coef_rd_data.eq(coef_cfg_rp.data),
                     desc_cfg_rp.addr.eq(cfg.desc_rd_addr), desc_k_cfg_rp.addr.eq(cfg.desc_rd_addr),
                     cfg.desc_rd_base.eq(desc_cfg_rp.data), cfg.desc_rd_k.eq(desc_k_cfg_rp.data)]
        for mem, data_ in ((desc, cfg.desc_wr_base), (desc_k, cfg.desc_wr_k),
                           (desc_low, cfg.desc_wr_low)):
            wp = mem.write_port()
            m.d.comb += [wp.en.eq(cfg.desc_wr_en), wp.addr.eq(cfg.desc_wr_addr), wp.data.eq(data_)]

        # -- the active bank's header -------------------------------------------------------
        # Registered beside stages 1 and 2 (``LutHeader``): the stages' choices by mode, the
        # multipliers' operands, the binade and the descriptor address start from registers.
        m.submodules.header = hs = LutHeader()
        m.d.comb += [hs.banks.eq(cfg.header), hs.bank.eq(self.bank), hs.en.eq(self.en)]

        en = self.en
        PRE = STAGES[self._deep][0]
        # count flag down the pipeline (stage 1, 2)
        s1_count = Signal()
        s2_count = Signal()
        with m.If(en):
            m.d.sync += [s1_count.eq(delay(m, en, self.count & ~self.bypass, PRE, "count")),
                         s2_count.eq(s1_count)]
        regions = []

        # The lanes (``LutLane``), each with its own read ports of the shared memories.
        header = ("s1_mode", "s1_is", "s1_sq", "fin_scaled", "fin_recip", "fin_log", "pre_q",
                  "post_q", "s2_bank", "s2_e_lo", "s2_hi_neg", "s2_hi_pos")
        for lane in range(lanes):
            ln = LutLane(depth, deep=self._deep)
            m.submodules[f"lane{lane}"] = ln
            m.d.comb += [ln.z.eq(self.z[lane]), ln.bypass.eq(self.bypass), ln.en.eq(en),
                         ln.bank.eq(self.bank), ln.s2_count.eq(s2_count),
                         self.y[lane].eq(ln.y)]
            m.d.comb += [getattr(ln, n).eq(getattr(hs, n)) for n in header]
            for half in range(2):
                krp = desc_k.read_port(domain="comb")
                m.d.comb += [krp.addr.eq(ln.k_addr[half]), ln.k_data[half].eq(krp.data)]
            drp = desc.read_port(domain="comb")
            lrp = desc_low.read_port(domain="comb")
            crp = coef.read_port(domain="comb")
            m.d.comb += [drp.addr.eq(ln.desc_addr), lrp.addr.eq(ln.desc_addr),
                         ln.desc_base.eq(drp.data), ln.desc_low.eq(lrp.data),
                         crp.addr.eq(ln.coef_addr), ln.coef_data.eq(crp.data)]
            regions.append(ln.region)

        # -- counters ---------------------------------------------------------------------
        with m.If(en):
            for code, inc in ((1, cfg.inc_hits), (2, cfg.inc_unders), (3, cfg.inc_overs)):
                m.d.comb += inc.eq(sum((r == code).as_unsigned() for r in regions))
        return m
