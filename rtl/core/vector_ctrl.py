"""The vector engine's controller: executes vector commands against SBUF and PSUM.

A command carries the engine's own instruction word (opaque here: the engine's ``cmd`` payload,
passed through), the access pattern of operand ``a`` (SBUF or PSUM), of operand ``b`` (SBUF,
optional) and of the output (SBUF), and a semaphore to increment when the output is written.
"""

from amaranth.hdl import Cat, Elaboratable, Module, Mux, Shape, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rtl.tensor.psum import PSUMReadSignature
from rtl.vector.lut import CFG_LAYOUT
from sim.config import check_int, check_pow2
from sim.records import KIND_ENGINE, KIND_NOP, KIND_SEED, KIND_TABLE

from .pending_count import PendingCount
from .sbuf import SBUFReadSignature, SBUFWriteSignature
from .streamer import ReadStreamer
from .table_split import TableSplit

__all__ = ["vector_cmd_layout", "PSUMReadSignature", "VectorController", "KIND_ENGINE",
           "KIND_TABLE", "KIND_SEED", "KIND_NOP"]



def vector_cmd_layout(engine_cmd_bits, lanes, sbuf_depth, psum_depth, n_bits=16, sem_bits=4):
    """The controller's command.

    Fields
    ------
    kind : ``sim.records.KIND_*``. TABLE, SEED and NOP wait until every earlier command has
        completed and the engine is idle; TABLE streams ``n`` beats into the engine's ``cfg``
        port instead of ``a``: with ``parts`` = 1 words of partition 0 (address, data,
        address, data...), with ``parts`` = 2 one write per beat (address partition 0, data
        partition 1; ``sim.isa.TABLE_FUNC_PAIRED``).
    scalar : the seed of a SEED command.
    op : the engine's ``cmd`` payload (``engine_cmd_bits`` wide), passed through unchanged.
    n : elements (beats) of ``a`` (and of ``b`` when ``b_en``); 0 sends only the instruction.
    a_psum : ``a`` comes from PSUM (lanes >= cols read as zero) instead of SBUF.
    a_addr, a_stride : word ``j`` of ``a`` at ``a_addr + j*a_stride``.
    b_en, b_addr, b_stride : operand ``b`` from SBUF.
    o_n : output beats the engine produces for this command (0: none, e.g. an accumulate-only
        instruction); beat ``j`` is written to SBUF word ``o_addr + j*o_stride``.
    parts : partitions read and written (1..lanes); lanes >= parts read as zero, not written.
    sem, sem_en : semaphore to increment on completion.
    """
    addr = max(ceil_log2(sbuf_depth), ceil_log2(psum_depth))
    sb = ceil_log2(sbuf_depth)
    return data.StructLayout({
        "kind": 2,
        "scalar": 32,
        "op": engine_cmd_bits,
        "n": n_bits,
        "a_psum": 1,
        "a_addr": addr,
        "a_stride": addr,
        "b_en": 1,
        "b_addr": sb,
        "b_stride": sb,
        "o_n": n_bits,
        "o_addr": sb,
        "o_stride": sb,
        "parts": ceil_log2(lanes + 1),
        "sem": sem_bits,
        "sem_en": 1,
    })


def _entry_layout(cmd_layout):
    """A queue entry of the controller: the command and its tests, decided on the way in
    (``_entry``), so that ``o_n == 1`` and the other tests are flip-flops, not logic in front
    of the completion queue's read enable. So are the kind tests (``engine``, ``table``) and
    the completion classes (``has_out``: an engine instruction with outputs; ``noout``: one
    without; ``misc``: a SEED, NOP or empty TABLE, completed once quiet): one flag of the head
    each, not a decode of ``kind`` and the count flags, in front of the read enables (cpl_q's
    head -> last beat -> cpl_q's read enable; ``quiet`` & the heads' kinds -> ``a_go`` -> the
    streamer's request -> a_q's clock enables)."""
    return data.StructLayout({"c": cmd_layout, "o_n_zero": 1, "o_n_one": 1, "n_zero": 1,
                              "engine": 1, "table": 1, "has_out": 1, "noout": 1, "misc": 1})


def _entry(cp):
    """The queue entry (``_entry_layout``) of command ``cp``."""
    k_engine, k_table = cp.kind == KIND_ENGINE, cp.kind == KIND_TABLE
    return Cat(cp.as_value(), cp.o_n == 0, cp.o_n == 1, cp.n == 0, k_engine, k_table,
               k_engine & (cp.o_n != 0), k_engine & (cp.o_n == 0),
               (cp.kind == KIND_SEED) | (cp.kind == KIND_NOP) | (k_table & (cp.n == 0)))


class _LookaheadFIFO(Elaboratable):
    """``fifo.SyncFIFOBuffered(width=width, depth=depth)``, port for port and cycle for cycle
    (an inner ``SyncFIFO`` of ``depth - 1`` entries and the head register; ``r_data`` holds
    while not ``r_rdy``), that also offers the next cycle's head: ``n_rdy`` and ``n_data``
    are ``r_rdy`` and ``r_data`` after this cycle's ``r_en`` and writes (combinational), so
    that the reader can keep flags of its head in flip-flops (the completion queue's)."""

    def __init__(self, *, width, depth):
        self.width, self.depth = width, depth
        self.w_data = Signal(width, name="w_data")
        self.w_en, self.w_rdy = Signal(name="w_en"), Signal(name="w_rdy")
        # (reset_less as the read port register of SyncFIFOBuffered)
        self.r_data = Signal(width, name="r_data", reset_less=True)
        self.r_en, self.r_rdy = Signal(name="r_en"), Signal(name="r_rdy")
        self.n_data, self.n_rdy = Signal(width, name="n_data"), Signal(name="n_rdy")

    def elaborate(self, platform):
        m = Module()
        load = Signal()                 # the head register loads (the inner head or w_data)
        new = Signal(self.width)
        if self.depth == 1:
            # (as SyncFIFOBuffered: one register, a write only while it is empty)
            m.d.comb += [self.w_rdy.eq(~self.r_rdy), load.eq(self.w_en & self.w_rdy),
                         new.eq(self.w_data)]
        else:
            inner = m.submodules.inner = fifo.SyncFIFO(width=self.width, depth=self.depth - 1)
            m.d.comb += [inner.w_data.eq(self.w_data), inner.w_en.eq(self.w_en),
                         self.w_rdy.eq(inner.w_rdy),
                         load.eq(inner.r_rdy & (~self.r_rdy | self.r_en)),
                         inner.r_en.eq(load), new.eq(inner.r_data)]
        m.d.comb += [self.n_rdy.eq(load | (self.r_rdy & ~self.r_en)),
                     self.n_data.eq(Mux(load, new, self.r_data))]
        m.d.sync += self.r_rdy.eq(self.n_rdy)
        with m.If(load):
            m.d.sync += self.r_data.eq(new)
        return m


class VectorController(wiring.Component):
    """Drives the vector engine's ``cmd``, ``a``, ``b`` streams and writes ``o`` to SBUF.

    Parameters
    ----------
    lanes : int
        Vector lanes = SBUF partitions.
    cols : int
        PSUM partitions (<= lanes).
    sbuf_depth, psum_depth : int
        Powers of two.
    engine_cmd_layout : Layout or int
        Shape of the engine's ``cmd`` stream payload.

    Members
    -------
    cmd : In(stream.Signature(vector_cmd_layout(...)))
    a_sbuf, b_sbuf : Out(SBUFReadSignature)
    a_psum : Out(PSUMReadSignature)
    o_sbuf : Out(SBUFWriteSignature)
    e_cmd : Out(stream engine_cmd_layout)
    e_a, e_b : Out(stream Array(32, lanes))
    e_o : In(stream Array(32, lanes))
    cfg : Out(stream.Signature(rtl.vector.lut.CFG_LAYOUT))
        LUT configuration writes of TABLE commands (``TableSplit``).
    seed : Out(32), seed_load : Out(1)
        Re-seed pulse of SEED commands (registered: the cycle after the command completes).
    e_idle : In(1)
        The engine has nothing in flight. A command with ``o_n`` = 0 completes when its inputs
        have been sent and ``e_idle`` is 1; no later instruction enters the engine before.
    done, done_sem : Out
        Completion pulse and its semaphore (commands with ``sem_en``), registered: one cycle
        after the last output beat is written (or the command otherwise finishes; two cycles
        after a TABLE's last ``cfg`` write), so the sequencer's semaphore adder is not at the
        end of the SBUF write arbiter's path.
    busy : Out(1)
        From the cycle after a command is taken until it has completed; also high in the cycle
        of a ``done`` pulse.

    Commands complete in order. The output side stalls only for the SBUF: ``e_o.ready`` is
    ``o_sbuf.ready`` while a command with outputs is at the head of the completion queue, so
    an ``o`` beat leaves the engine in the cycle SBUF writes it (the write request,
    ``o_sbuf.mask``, follows ``e_o.valid``; while the DMA holds the shared SBUF write port the
    engine's output stream is back-pressured and nothing is lost or written twice).

    Units: four command queues (instruction, ``a``, ``b``, completion), a ``ReadStreamer``
    per operand, ``TableSplit`` (operand ``a``'s words to ``e_a`` or, for a TABLE, ``cfg``)
    and ``PendingCount`` (commands without outputs whose inputs are sent).
    """

    def __init__(self, lanes, cols, sbuf_depth, psum_depth, engine_cmd_layout, *, n_bits=16,
                 sem_bits=4, queue_depth=2):
        check_int("lanes", lanes, 1, 1024)
        check_int("cols", cols, 1, lanes)
        check_int("n_bits", n_bits, 1, 32)
        check_int("sem_bits", sem_bits, 1, 16)
        check_int("queue_depth", queue_depth, 1, 16)
        check_pow2("sbuf_depth", sbuf_depth, 2, 1 << 20)
        check_pow2("psum_depth", psum_depth, 2, 1 << 20)
        self.lanes, self.cols = lanes, cols
        self.sbuf_depth, self.psum_depth = sbuf_depth, psum_depth
        self.n_bits, self.sem_bits, self.queue_depth = n_bits, sem_bits, queue_depth
        self.engine_cmd_layout = engine_cmd_layout
        ecmd_bits = data.Layout.cast(engine_cmd_layout).size if isinstance(
            engine_cmd_layout, data.Layout) else int(engine_cmd_layout)
        self.cmd_layout = vector_cmd_layout(ecmd_bits, lanes, sbuf_depth, psum_depth, n_bits,
                                            sem_bits)
        vec = data.ArrayLayout(32, lanes)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "a_sbuf": Out(SBUFReadSignature(lanes, sbuf_depth)),
            "b_sbuf": Out(SBUFReadSignature(lanes, sbuf_depth)),
            "a_psum": Out(PSUMReadSignature(cols, psum_depth)),
            "o_sbuf": Out(SBUFWriteSignature(lanes, sbuf_depth)),
            "e_cmd": Out(stream.Signature(engine_cmd_layout)),
            "e_a": Out(stream.Signature(vec)),
            "e_b": Out(stream.Signature(vec)),
            "e_o": In(stream.Signature(vec)),
            "e_idle": In(1, init=1),
            "cfg": Out(stream.Signature(CFG_LAYOUT)),
            "seed": Out(32),
            "seed_load": Out(1),
            "done": Out(1),
            "done_sem": Out(sem_bits),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, cols = self.lanes, self.cols
        L = self.cmd_layout
        abits = Shape.cast(L["a_addr"].shape).width

        E = _entry_layout(L)            # the command and its tests (see _entry_layout)
        queues = {}
        for qname in ("op", "a", "b", "cpl"):
            # (the completion queue with its next head, for the ``*_arm`` flags below)
            f = (_LookaheadFIFO if qname == "cpl" else fifo.SyncFIFOBuffered)(
                width=E.size, depth=self.queue_depth)
            m.submodules[f"{qname}_q"] = f
            queues[qname] = f
        all_ready = Signal()
        m.d.comb += all_ready.eq(queues["op"].w_rdy & queues["a"].w_rdy & queues["b"].w_rdy &
                                 queues["cpl"].w_rdy)
        m.d.comb += self.cmd.ready.eq(all_ready)
        for qname, f in queues.items():
            en = self.cmd.valid & all_ready
            if qname == "b":
                en = en & self.cmd.p.b_en
            if qname == "a":
                # An empty TABLE has no operand request: it completes once quiet (``misc``),
                # and a request of its own, waiting for a TABLE at the completion queue's
                # head, could be left behind it (a deadlock).
                en = en & ~((self.cmd.p.kind == KIND_TABLE) & (self.cmd.p.n == 0))
            m.d.comb += [f.w_data.eq(_entry(self.cmd.payload)), f.w_en.eq(en)]

        def head(f):
            e = data.View(E, f.r_data)
            return e.c, e

        # Engine instruction words, in order.
        # A command without outputs completes when the engine goes idle, so no later command
        # may start in the engine before it has completed (fence).
        opq = queues["op"]
        oh, oe = head(opq)
        fence = Signal()
        fence_next = Signal()           # (for the completion arms below)
        table_done = Signal()            # the last TABLE beat was written, a cycle ago
        m.d.comb += [self.e_cmd.valid.eq(opq.r_rdy & ~fence & oe.engine),
                     self.e_cmd.payload.eq(oh.op)]
        with m.If(oe.engine):
            m.d.comb += opq.r_en.eq(self.e_cmd.ready & ~fence)
        with m.Elif(oe.table):
            # A TABLE leaves the op queue when it completes (its last beat handed on a cycle
            # ago, ``table_done``; an empty one below, once quiet), so no later instruction
            # reaches the engine and raises the LUT's bank ``lock`` while TABLE beats are still
            # on their way to the LUT: such a beat would be blocked behind the lock (the TABLE
            # stream and the instruction's own operands behind it stalled: the core stays
            # busy), or written after the instruction has read the entry.
            m.d.comb += opq.r_en.eq(table_done)
        m.d.comb += fence_next.eq(fence)
        with m.If(self.e_cmd.valid & self.e_cmd.ready & oe.o_n_zero):
            m.d.comb += fence_next.eq(1)
        m.d.sync += fence.eq(fence_next)
        cq = queues["cpl"]
        ch, ce = head(cq)
        # Every earlier command has completed and the engine has nothing in flight.
        quiet = Signal()
        m.d.comb += quiet.eq(cq.r_rdy & self.e_idle & ~fence & ~table_done)

        # Operand a: SBUF or PSUM through one streamer (tag bits: PSUM, no output, table,
        # paired table).
        sa = m.submodules.a_stream = ReadStreamer(lanes, abits, self.n_bits, tag_bits=4,
                                                   skid=True, alt_lanes=cols)
        aq = queues["a"]
        ah, ae = head(aq)
        a_table = ae.table
        # A TABLE reads one partition (unpaired) or two (paired): ``parts`` bit 1 tells them
        # apart (a core of one lane has no paired TABLE).
        a_pair = a_table & ah.parts[1] if lanes > 1 else 0
        a_go = Signal()
        m.d.comb += a_go.eq(aq.r_rdy & (~a_table | (quiet & ce.table)))
        m.d.comb += [
            sa.req.valid.eq(a_go), aq.r_en.eq(sa.req.ready & a_go),
            sa.req.p.addr.eq(ah.a_addr), sa.req.p.stride.eq(ah.a_stride),
            sa.req.p.count.eq(Mux(ae.engine | a_table, ah.n, 0)),
            sa.req.p.parts.eq(ah.parts),
            sa.req.p.tag.eq(ah.a_psum | ae.noout << 1 | a_table << 2 | a_pair << 3),
            self.a_sbuf.addr.eq(sa.rd_addr), self.a_sbuf.en.eq(sa.rd_en),
            self.a_psum.addr.eq(sa.rd_addr), self.a_psum.en.eq(sa.rd_en),
        ]
        # PSUM is the streamer's second read port, chosen by tag bit 0 after its word
        # registers (ReadStreamer: a block RAM output then reaches a register through no
        # choice).
        m.d.comb += [sa.rd_data.eq(self.a_sbuf.data), sa.rd_alt.eq(self.a_psum.data)]
        # TABLE words go to cfg, engine beats to e_a (TableSplit: ``cfg.valid`` a flip-flop
        # and ``sa.o.ready`` a multiplexer of flip-flops and the two readys, so the readys
        # reach neither the streamer's enables nor the operand queue's read enable).
        split = m.submodules.a_split = TableSplit(lanes)
        m.d.comb += [split.i.valid.eq(sa.o.valid), split.i.p.data.eq(sa.o.p.data),
                     split.i.p.last.eq(sa.o.p.last), split.i.p.table.eq(sa.o.p.tag[2]),
                     split.i.p.pair.eq(sa.o.p.tag[3]),
                     sa.o.ready.eq(split.i.ready), split.next_valid.eq(sa.o_next_valid),
                     split.next_table.eq(sa.o_next_tag[2]), split.next_pair.eq(sa.o_next_tag[3])]
        wiring.connect(m, split.cfg, wiring.flipped(self.cfg))
        wiring.connect(m, split.a, wiring.flipped(self.e_a))
        table_fin = split.table_fin

        # Operand b: SBUF.
        sbs = m.submodules.b_stream = ReadStreamer(lanes, ceil_log2(self.sbuf_depth),
                                                   self.n_bits)
        bq = queues["b"]
        bh, _ = head(bq)
        m.d.comb += [
            sbs.req.valid.eq(bq.r_rdy), bq.r_en.eq(sbs.req.ready),
            sbs.req.p.addr.eq(bh.b_addr), sbs.req.p.stride.eq(bh.b_stride),
            sbs.req.p.count.eq(bh.n), sbs.req.p.parts.eq(bh.parts),
            self.b_sbuf.addr.eq(sbs.rd_addr), self.b_sbuf.en.eq(sbs.rd_en),
            sbs.rd_data.eq(self.b_sbuf.data),
            self.e_b.valid.eq(sbs.o.valid), self.e_b.payload.eq(sbs.o.p.data),
            sbs.o.ready.eq(self.e_b.ready),
        ]

        # Commands without outputs whose inputs are all sent (``noout.nz``: one flag, not a
        # compare, in the completion queue's read enable); they complete once the engine is
        # idle. A command's last operand beat and a later command's empty request can come in
        # one cycle: two increments.
        noout = m.submodules.noout = PendingCount(2 * self.queue_depth + 1)
        dec, noout_nz = noout.dec, noout.nz
        m.d.comb += [
            noout.inc_a.eq(self.e_a.valid & self.e_a.ready & sa.o.p.last & sa.o.p.tag[1]),
            noout.inc_b.eq(sa.req.valid & sa.req.ready & ae.n_zero & ae.noout),
        ]

        # Outputs and completion.
        started = Signal()
        left = Signal(self.n_bits)
        oaddr = Signal(ceil_log2(self.sbuf_depth))
        fin = Signal()
        # The SBUF write request follows e_o.valid (never e_o.ready, which depends on the
        # SBUF's ready); a beat is taken from the engine only in the cycle SBUF writes it.
        o_head = Signal()
        m.d.comb += [
            o_head.eq(cq.r_rdy & ce.has_out),
            self.e_o.ready.eq(o_head & self.o_sbuf.ready),
        ]
        # left == 1 kept in a flag beside ``left``: the last-beat test is then a multiplexer
        # of two flags in front of the completion queue's read enable.
        left_one = Signal()
        # (next values, for the completion arms below)
        started_next, left_one_next = Signal(name="started_next"), Signal(name="left_one_next")
        cur_left = Mux(started, left, ch.o_n)
        cur_one = Mux(started, left_one, ce.o_n_one)
        cur_addr = Mux(started, oaddr, ch.o_addr)
        m.d.comb += [self.o_sbuf.addr.eq(cur_addr), self.o_sbuf.data.eq(self.e_o.payload)]
        with m.If(self.e_o.valid & o_head):
            m.d.comb += [self.o_sbuf.mask[r].eq(ch.parts > r) for r in range(lanes)]
        m.d.comb += [started_next.eq(started), left_one_next.eq(left_one)]
        with m.If(self.e_o.valid & self.e_o.ready):
            m.d.comb += [started_next.eq(1), left_one_next.eq(cur_left == 2)]
            m.d.sync += [left.eq(cur_left - 1), oaddr.eq(cur_addr + ch.o_stride)]
            with m.If(cur_one):
                m.d.comb += [started_next.eq(0), fin.eq(ch.sem_en)]
        m.d.sync += [started.eq(started_next), left_one.eq(left_one_next)]
        with m.If(cq.r_rdy & ce.noout & noout_nz & fence & self.e_idle):
            m.d.comb += [fin.eq(ch.sem_en), dec.eq(1), fence_next.eq(0)]
        # A TABLE completes the cycle after its last beat is written: the write's handshake
        # (the LUT's cfg.ready) stays out of the completion queue's read enable. Its entry is
        # still the queue's head then: no other completion takes a TABLE entry with beats.
        m.d.sync += table_done.eq(table_fin)
        with m.If(table_done):
            m.d.comb += fin.eq(ch.sem_en)
        m.d.sync += self.seed_load.eq(0)
        with m.If(quiet & ce.misc):
            # The op queue's head is this command too (all earlier ones have been issued and
            # a TABLE's entry stays until it completes): its completion pops it.
            m.d.comb += [fin.eq(ch.sem_en), opq.r_en.eq(1)]
            # Registered, so that the engine's idle flag does not reach the rounding unit's
            # generators through this; the engine is idle, so a cycle later is still before
            # any later element reaches the generators.
            m.d.sync += [self.seed_load.eq(ch.kind == KIND_SEED), self.seed.eq(ch.scalar)]

        m.d.sync += [self.done.eq(fin), self.done_sem.eq(ch.sem)]

        # The completion queue's read enable: the four completions above (``fin``), from
        # flags of its head kept in flip-flops (``*_arm``, from the queue's next head and the
        # next values of ``fence``, ``started``, ``left_one``), so that only the engine's and
        # the SBUF's handshake flags, ``e_idle``, ``noout_nz`` and ``table_done`` are live in
        # front of it and of the head register's clock enable (no decode of cpl_q's head, such
        # as ``quiet``, precedes them).
        #   m_arm: a SEED, NOP or empty TABLE at the head, no fence (completes once quiet;
        #          ``table_done`` is ORed in, so ``quiet``'s ``~table_done`` is not needed);
        #   n_arm: a command without outputs at the head, fenced (completes once idle and its
        #          inputs are sent, ``noout_nz``);
        #   o_arm: a command with outputs at the head, its next beat the last (``cur_one``).
        m_arm, n_arm, o_arm = Signal(name="m_arm"), Signal(name="n_arm"), Signal(name="o_arm")
        ne = data.View(E, cq.n_data)
        m.d.sync += [
            m_arm.eq(cq.n_rdy & ne.misc & ~fence_next),
            n_arm.eq(cq.n_rdy & ne.noout & fence_next),
            o_arm.eq(cq.n_rdy & ne.has_out & Mux(started_next, left_one_next, ne.o_n_one)),
        ]
        m.d.comb += cq.r_en.eq(table_done | (self.e_idle & (m_arm | (n_arm & noout_nz))) |
                               (o_arm & self.e_o.valid & self.o_sbuf.ready))
        # A command taken at an edge reaches the queues' heads (``r_rdy``) an edge later
        # (SyncFIFOBuffered): ``cmd_taken`` keeps ``busy`` high in between, so that a command
        # without a semaphore never looks complete before it has started.
        cmd_taken = Signal()
        m.d.sync += cmd_taken.eq(self.cmd.valid & self.cmd.ready)
        m.d.comb += self.busy.eq(opq.r_rdy | aq.r_rdy | bq.r_rdy | cq.r_rdy | sa.busy |
                                 sbs.busy | self.done | cmd_taken)
        return m
