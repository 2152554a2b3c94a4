"""The vector engine's record adapter: VECTOR records to vector-controller commands."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.control.layouts import record_layout
from sim import isa
from sim.config import check_int
from sim.records import KIND_ENGINE, KIND_NOP, KIND_SEED, KIND_TABLE
from sim.vector import AccOp, AluOp, Src

__all__ = ["VectorRecordAdapter"]


class VectorRecordAdapter(wiring.Component):
    """VECTOR records (``sim.isa.VECTOR_RECORD``) to ``VectorController`` commands, as
    ``sim.records.vector_commands`` (``sim/refsim.py`` executes the records on the engine
    model).

    Every record becomes one command, except ACC_RD, which becomes two: read the accumulators
    out, then reset them to +0. Every command asks for a done pulse (``sem_en``) but the first
    of ACC_RD's. Invalid records never reach the adapter (the sequencer's record check traps
    them at EMIT); an unknown op or a REDUCE with another ALU op becomes a NOP.

    Parameters
    ----------
    parts : int
        Partitions the engine instructions read and write (the core's rows, 1 to 1024).
    cmd_layout : Layout
        The controller's command (``VectorController.cmd_layout``).
    engine_cmd_layout : Layout
        The engine's command (``rtl.vector.engine.CMD_LAYOUT``), the command's ``op`` field.

    Members
    -------
    rec : In(stream.Signature(record_layout(Engine.VECTOR)))
        Records. ``ready`` is a flip-flop: a record is taken into a register (``vec_rec``)
        when it is empty, so the source's read reaches that register only.
    cmd : Out(stream.Signature(cmd_layout))
        Commands, from a one-entry register (``vec_cmd``) loaded from ``vec_rec`` when empty.
        A record is offered as a command two cycles after it is taken at the earliest; a
        command issues every other cycle at most.

    The translation is written into the command register (sync domain): a combinational
    translation would drive some command bits with constants only, which Icarus never
    evaluates (``always @*`` without sensitivities stays X). Reset: both registers empty.
    """

    def __init__(self, parts, cmd_layout, engine_cmd_layout):
        self._parts = check_int("parts", parts, 1, 1024)
        self._engine_cmd_layout = data.Layout.cast(engine_cmd_layout)
        super().__init__({
            "rec": In(stream.Signature(record_layout(isa.Engine.VECTOR))),
            "cmd": Out(stream.Signature(cmd_layout)),
        })

    @property
    def parts(self):
        return self._parts

    def elaborate(self, platform):
        m = Module()
        rec = Signal.like(self.rec.payload, name="vec_rec")
        rec_valid = Signal(name="vec_rec_valid")
        r = rec
        buf = Signal(self.cmd.payload.shape(), name="vec_cmd")
        buf_valid = Signal(name="vec_cmd_valid")
        c = buf
        e = data.View(self._engine_cmd_layout, c.op)
        second = Signal()
        op = r.op
        acc_rd = op == isa.VecOp.ACC_RD
        take = Signal()
        m.d.comb += [
            self.cmd.valid.eq(buf_valid),
            self.cmd.payload.eq(buf),
            take.eq(rec_valid & ~buf_valid),
            self.rec.ready.eq(~rec_valid),
        ]
        with m.If(self.rec.valid & self.rec.ready):
            m.d.sync += [rec.eq(self.rec.payload), rec_valid.eq(1)]
        with m.If(take & (~acc_rd | second)):
            m.d.sync += rec_valid.eq(0)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += buf_valid.eq(0)
        with m.If(take):
            m.d.sync += buf_valid.eq(1)
            with m.If(acc_rd):
                m.d.sync += second.eq(~second)
            m.d.sync += [
                c.eq(0),
                c.kind.eq(KIND_ENGINE), c.scalar.eq(r.scalar),
                c.n.eq(r.n), c.a_psum.eq(r.a_space), c.a_addr.eq(r.a_addr), c.a_stride.eq(1),
                c.b_en.eq(0), c.b_addr.eq(r.b_addr), c.b_stride.eq(1),
                c.o_n.eq(r.n), c.o_addr.eq(r.dst_addr), c.o_stride.eq(1),
                c.parts.eq(self._parts), c.sem.eq(r.sem), c.sem_en.eq(1),
                e.fmt_a.eq(r.in_fmt), e.fmt_b.eq(r.in_fmt), e.fmt_o.eq(r.out_fmt),
                e.rmode.eq(r.rnd), e.count.eq(r.n), e.emit.eq(1),
            ]
            with m.Switch(op):
                with m.Case(isa.VecOp.ACT):
                    m.d.sync += [e.op0.eq(AluOp.MUL), e.imm0.eq(r.scalar),
                                 e.op1.eq(AluOp.ADD), e.imm1.eq(r.bias),
                                 e.lut.eq(~r.func[1]), e.bank.eq(r.func[0]),
                                 e.acc_op.eq(Mux(r.acc, AccOp.SUM, AccOp.NONE))]
                with m.Case(isa.VecOp.TT):
                    m.d.sync += [e.op0.eq(r.alu), e.src0.eq(Src.TENSOR), c.b_en.eq(1)]
                with m.Case(isa.VecOp.TS):
                    m.d.sync += [e.op0.eq(r.alu), e.imm0.eq(r.scalar)]
                with m.Case(isa.VecOp.COPY):
                    pass
                with m.Case(isa.VecOp.REDUCE):
                    m.d.sync += [e.emit.eq(0), e.acc_reset.eq(1), e.emit_acc.eq(1),
                                 c.o_n.eq(1)]
                    with m.Switch(r.alu):
                        with m.Case(isa.VecAlu.ADD):
                            m.d.sync += e.acc_op.eq(AccOp.SUM)
                        with m.Case(isa.VecAlu.MAX):
                            m.d.sync += e.acc_op.eq(AccOp.MAX)
                        with m.Case(isa.VecAlu.MIN):
                            m.d.sync += e.acc_op.eq(AccOp.MIN)
                        with m.Default():
                            m.d.sync += [c.kind.eq(KIND_NOP), c.n.eq(0), c.o_n.eq(0)]
                with m.Case(isa.VecOp.TABLE):
                    # Paired (``func`` bit ``TABLE_FUNC_PAIRED``): a beat of partitions 0 and
                    # 1 per write; unpaired: two words of partition 0 per write.
                    pair = r.func[0] if self._parts > 1 else 0
                    m.d.sync += [c.kind.eq(KIND_TABLE), c.a_psum.eq(0), c.o_n.eq(0),
                                 c.n.eq(Mux(pair, r.n, r.n << 1)), c.parts.eq(Mux(pair, 2, 1))]
                with m.Case(isa.VecOp.SEED):
                    m.d.sync += [c.kind.eq(KIND_SEED), c.n.eq(0), c.o_n.eq(0)]
                with m.Case(isa.VecOp.ACC_RD):
                    with m.If(~second):
                        m.d.sync += [e.emit.eq(0), e.count.eq(0), e.emit_acc.eq(1),
                                     c.n.eq(0), c.o_n.eq(1), c.sem_en.eq(0)]
                    with m.Else():
                        m.d.sync += [e.emit.eq(0), e.count.eq(0), e.acc_op.eq(AccOp.SUM),
                                     e.acc_reset.eq(1), c.n.eq(0), c.o_n.eq(0)]
                with m.Default():
                    m.d.sync += [c.kind.eq(KIND_NOP), c.n.eq(0), c.o_n.eq(0)]
        return m
