"""The sequencer's micro-pipeline: F (control-store fetch), R (operand read), X (execute), and
the next control-store address."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.arith.wide_mux import lut4, pair_mux
from sim import isa
from sim.isa import AG_SET_READS, AG_SNAP_READS

from .micro_decode import field

__all__ = ["MicroPipeline"]


class MicroPipeline(wiring.Component):
    """Moves micro-words through the three stages and picks the control store's next address.

    F: the control store's output ``ucode_data`` is the micro-word at ``upc_f`` (the address
    registered by the block RAM) with its jump bit; F picks its own successor (a JUMP/CALL
    target, else ``upc_f + 1``). R: the word in ``uword_r`` (valid when ``r_valid``). X: the
    word in ``uword_x`` (valid when ``x_valid``). X redirects F on ``redirect`` (a taken
    BRANCH, ULOOP or a RET, to ``target``, or for a RET ``ret_target``): two bubbles, as R
    and F refill. X holds R in place (``x_holds_r``) on END (the instruction is done) and on
    an AG_SET/AG_SNAP whose successor in R reads the generator state it writes (one bubble:
    R re-reads its operands). The pipeline moves on ``go`` (X's micro-instruction leaves X),
    not on ``adv``: a trap stops the sequencer and MAP empties the pipeline (``flush``), so
    the error terms stay out of the control-store address. In MAP the address is the opcode
    map's entry (``map_entry``). ``kill`` (an error) empties X and wins over everything.

    The address is ``go ? (redirect ? x_target : addr_go) : (in_map ? map_entry :
    addr_hold)``, one slice per bit (``pair_mux``), with ``addr_go``/``addr_hold`` F's
    successor for each outcome of ``go`` as one LUT4 per bit behind the block RAM's output
    (``lut4``), so that ``go`` (the stall's sum of products) is one level in front of the
    control store's address pins.

    R's registers load on ``r_load`` (``r_take`` without its redirect term: a taken redirect
    empties R, and the next take loads them again), X's registers on ``x_load``
    (``~x_valid | go``); nothing reads them while their stage is empty.

    Members
    -------
    ucode_data : In(65)
        The control store's output: F's micro-word and its jump bit (bit 64).
    map_entry : In(UADDR_BITS)
        The opcode map's micro-address for MAP.
    in_exec, in_map : In(1)
        The sequencer is in EXEC, in MAP.
    go, redirect : In(1)
        X's micro-instruction goes; it redirects (valid with ``go``).
    x_ret : In(1); ret_target : In(UADDR_BITS)
        X's micro-instruction is a RET; the micro-call stack's top.
    x_end, x_ag_set, x_ag_snap : In(1)
        X's END, AG_SET, AG_SNAP (decoded flags).
    flush, kill : In(1)
        MAP (empty R and X); an error (empty X).
    ucode_addr : Out(UADDR_BITS)
        The control store's read address.
    uword_r, uword_x : Out(64); upc_x : Out(UADDR_BITS)
    r_valid, x_valid : Out(1)
    r_load, x_load : Out(1)
        R's, X's registers load this cycle.
    r_reads_set : Out(1)
        R's word reads what an AG_SET writes (``sim.isa.AG_SET_READS``).
    """

    def __init__(self):
        ua = isa.UADDR_BITS
        super().__init__({
            "ucode_data": In(65), "map_entry": In(ua), "in_exec": In(1), "in_map": In(1),
            "go": In(1), "redirect": In(1), "x_ret": In(1), "ret_target": In(ua),
            "x_end": In(1), "x_ag_set": In(1), "x_ag_snap": In(1), "flush": In(1),
            "kill": In(1), "ucode_addr": Out(ua), "uword_r": Out(64), "uword_x": Out(64),
            "upc_x": Out(ua), "r_valid": Out(1), "x_valid": Out(1), "r_load": Out(1),
            "x_load": Out(1), "r_reads_set": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        go, redirect, in_exec = self.go, self.redirect, self.in_exec
        rv, xv = self.r_valid, self.x_valid
        uword_f, jump_f = self.ucode_data[:64], self.ucode_data[64]
        upc_f, upc_r = Signal(isa.UADDR_BITS), Signal(isa.UADDR_BITS)
        x_target = Signal(isa.UADDR_BITS)
        m.d.comb += x_target.eq(Mux(self.x_ret, self.ret_target, field(self.uword_x, "target")))
        upc_f_inc = Signal(isa.UADDR_BITS)
        m.d.comb += upc_f_inc.eq(upc_f + 1)

        # Whether R's word reads what an AG_SET/AG_SNAP in X writes, registered as F's word
        # enters R, so R's operand-select compares are not in front of the pipeline's moves.
        def f_reads(srcs):
            return Cat(*[(field(uword_f, "a") == src) | (field(uword_f, "b") == src)
                         for src in srcs]).any()

        r_reads_snap = Signal()
        x_holds_r = self.x_end | self.x_ag_set & self.r_reads_set | self.x_ag_snap & r_reads_snap
        x_take, r_take, r_take_nr = Signal(), Signal(), Signal()   # R -> X, F -> R
        m.d.comb += [
            x_take.eq(in_exec & rv & (~xv | (go & ~redirect & ~x_holds_r))),
            r_take.eq(in_exec & ~(go & redirect) & (~rv | x_take)),
            r_take_nr.eq(in_exec & (~rv | ~xv | go & ~x_holds_r)),
            self.r_load.eq(r_take_nr), self.x_load.eq(~xv | go),
        ]
        with m.If(r_take_nr):
            m.d.sync += [self.r_reads_set.eq(f_reads(AG_SET_READS)),
                         r_reads_snap.eq(f_reads(AG_SNAP_READS))]
        # F's successor for each outcome of ``go`` (``nj_*``: ``upc_f + 1`` when F's
        # successor is used, ``use_f_*``, else ``upc_f``; then F's jump bit and target), both
        # kept for synthesis, which otherwise folds ``go`` into them.
        use_f_go = Signal(attrs={"keep": 1})
        use_f_hold = Signal(attrs={"keep": 1})
        nj_go = Signal(isa.UADDR_BITS, attrs={"keep": 1})
        nj_hold = Signal(isa.UADDR_BITS, attrs={"keep": 1})
        target_f = field(uword_f, "target")
        m.d.comb += [
            use_f_go.eq(in_exec & (~rv | ~xv | ~x_holds_r)),
            use_f_hold.eq(in_exec & (~rv | ~xv)),
            nj_go.eq(Mux(use_f_go, upc_f_inc, upc_f)),
            nj_hold.eq(Mux(use_f_hold, upc_f_inc, upc_f)),
        ]

        def f_succ(jump, use, tgt, nj):     # ``Mux(jump & use, target, nj)``
            return (jump & use & tgt) | (~(jump & use) & nj)

        addr_go = lut4(m, platform, f_succ, (jump_f, use_f_go, target_f, nj_go), "addr_go")
        addr_hold = lut4(m, platform, f_succ, (jump_f, use_f_hold, target_f, nj_hold),
                         "addr_hold")
        m.d.comb += self.ucode_addr.eq(pair_mux(m, platform, go,
                                                (self.in_map, addr_hold, self.map_entry),
                                                (redirect, addr_go, x_target), "next_uaddr"))
        m.d.sync += upc_f.eq(self.ucode_addr)
        with m.If(r_take):
            m.d.sync += rv.eq(1)
        with m.Elif(x_take | (go & redirect)):
            m.d.sync += rv.eq(0)
        with m.If(r_take_nr):
            m.d.sync += [self.uword_r.eq(uword_f), upc_r.eq(upc_f)]
        with m.If(self.x_load):
            m.d.sync += [self.uword_x.eq(self.uword_r), self.upc_x.eq(upc_r)]
        with m.If(x_take):
            m.d.sync += xv.eq(1)
        with m.Elif(go):
            m.d.sync += xv.eq(0)
        with m.If(self.flush):
            m.d.sync += [rv.eq(0), xv.eq(0)]
        with m.If(self.kill):
            m.d.sync += xv.eq(0)
        return m
