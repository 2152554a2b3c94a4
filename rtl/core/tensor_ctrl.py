"""The tensor engine's controller: executes matmul commands against SBUF and PSUM.

One command is one ``matmul(stationary[K,M], moving[K,N])`` of ``docs/interfaces.md`` section 6:
the controller reads the M stationary columns and the N moving columns from SBUF, streams them
into the tensor engine, tags each result beat with its PSUM address and the overwrite/accumulate
flag, and when the last beat has been written signals completion (a semaphore increment).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rtl.bus.pipeline_register import PipelineRegister
from rtl.tensor.psum import psum_next_layout
from sim.config import check_int, check_pow2

from .sbuf import SBUFReadSignature

__all__ = ["tensor_cmd_layout", "psum_write_layout", "TensorController"]


def tensor_cmd_layout(rows, cols, sbuf_depth, psum_depth, n_bits=16, sem_bits=4):
    """The controller's command: one matmul.

    Fields
    ------
    fmt : 3
        Input format (``sim.dtypes.Format``) of stationary and moving.
    k : rows in use (1..rows); partitions >= k are sent as zero.
    m : stationary columns (1..cols); beat ``j`` reads SBUF word ``stat_addr + j*stat_stride``.
    n : moving columns (>= 1); beat ``j`` reads ``mov_addr + j*mov_stride``.
    psum_addr : PSUM word of result column 0; column ``j`` goes to ``psum_addr + j``.
    accumulate : 0 overwrites PSUM, 1 adds to it.
    sem, sem_en : semaphore incremented on completion (if ``sem_en``).

    Addresses and strides wrap modulo the (power-of-two) memory depth, so a stride of
    ``depth - 1`` steps backwards.
    """
    return data.StructLayout({
        "fmt": 3,
        "k": ceil_log2(rows + 1),
        "m": ceil_log2(cols + 1),
        "n": n_bits,
        "stat_addr": ceil_log2(sbuf_depth),
        "stat_stride": ceil_log2(sbuf_depth),
        "mov_addr": ceil_log2(sbuf_depth),
        "mov_stride": ceil_log2(sbuf_depth),
        "psum_addr": ceil_log2(psum_depth),
        "accumulate": 1,
        "sem": sem_bits,
        "sem_en": 1,
    })


def psum_write_layout(cols, psum_depth):
    """One result column on its way into PSUM."""
    return data.StructLayout({
        "data": data.ArrayLayout(32, cols),
        "addr": ceil_log2(psum_depth),
        "accumulate": 1,
        "last": 1,
    })


class TensorController(wiring.Component):
    """Drives the tensor engine's ``stationary`` and ``moving`` streams from SBUF and its
    ``result`` stream into PSUM.

    Parameters
    ----------
    rows, cols : int
        Tensor array size (rows = SBUF partitions).
    sbuf_depth, psum_depth : int
        Powers of two.
    data_width : int
        Width of one element on the engine's input streams (low bits of the SBUF word).
    n_bits : int
        Width of the moving count N.
    sem_bits : int
        Width of a semaphore index.
    queue_depth : int
        Commands buffered per internal queue; the stationary side runs up to this many
        commands ahead of the moving side, so the next tile loads while the current one streams.
    done_delay : int
        Cycles between the last result beat accepted by PSUM and the completion pulse (set to
        PSUM's write latency so the semaphore is raised only once PSUM holds the data).

    Members
    -------
    cmd : In(stream.Signature(tensor_cmd_layout(...)))
    stat_rd, mov_rd : Out(SBUFReadSignature(rows, sbuf_depth))
    stationary : Out(stream {data: Array(data_width, rows), fmt: 3, last: 1})
        Through a pipeline register (``rtl.bus.pipeline_register``): every signal of it is a
        flip-flop; one cycle from SBUF's port register.
    moving : Out(stream {data: Array(data_width, rows), last: 1})
        Through a pipeline register too.
    result : In(stream {data: Array(32, cols), last: 1})
    psum_wr : Out(stream psum_write_layout(cols, psum_depth))
    psum_wr_int : Out(1)
        With each ``psum_wr`` beat: the command's format is INT8 (PSUM accumulates INT32).
    psum_wr_next : Out(psum_next_layout(psum_depth, 3))
        The three candidates (all from registers) for the beat ``psum_wr`` offers next cycle if
        it advances in this one, ``sel`` on the one it will offer: the skid register's beat,
        the first beat of a command, a later beat of one (for ``PSUM(lookahead=3)``, whose
        ``wr.ready`` is then a flip-flop).
    done : Out(1)
        One-cycle pulse per completed command with ``sem_en`` set.
    done_sem : Out(sem_bits)
        The semaphore to increment, valid with ``done``.
    busy : Out(1)
        A command is in flight somewhere in the controller.

    Every stream obeys back-pressure. ``psum_wr`` leaves through a pipeline register
    (as ``rtl.bus.pipeline_register.PipelineRegister``: one cycle of latency, ``psum_wr``
    entirely from flip-flops, built here to show the beat it loads next on
    ``psum_wr_next``): a stall on ``psum_wr`` stalls ``result``, and so the engine, one cycle
    later (the beat offered meanwhile waits in the skid register), and ``result.ready`` is a
    function of registers only. ``psum_wr_int`` and the completion
    travel with the beat: ``done`` pulses ``done_delay`` cycles after PSUM accepted the
    command's last beat.
    """

    def __init__(self, rows, cols, sbuf_depth, psum_depth, *, data_width=16, n_bits=16,
                 sem_bits=4, queue_depth=2, done_delay=0):
        check_int("rows", rows, 1, 1024)
        check_int("cols", cols, 1, 1024)
        check_int("data_width", data_width, 1, 32)
        check_int("n_bits", n_bits, 1, 32)
        check_int("sem_bits", sem_bits, 1, 16)
        check_int("queue_depth", queue_depth, 1, 16)
        check_int("done_delay", done_delay, 0, 64)
        check_pow2("sbuf_depth", sbuf_depth, 2, 1 << 20)
        check_pow2("psum_depth", psum_depth, 2, 1 << 20)
        self.rows, self.cols = rows, cols
        self.sbuf_depth, self.psum_depth = sbuf_depth, psum_depth
        self.data_width, self.n_bits, self.sem_bits = data_width, n_bits, sem_bits
        self.queue_depth, self.done_delay = queue_depth, done_delay
        self.cmd_layout = tensor_cmd_layout(rows, cols, sbuf_depth, psum_depth, n_bits,
                                            sem_bits)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "stat_rd": Out(SBUFReadSignature(rows, sbuf_depth)),
            "mov_rd": Out(SBUFReadSignature(rows, sbuf_depth)),
            "stationary": Out(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(data_width, rows), "fmt": 3, "last": 1}))),
            "moving": Out(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(data_width, rows), "last": 1}))),
            "result": In(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(32, cols), "last": 1}))),
            "psum_wr": Out(stream.Signature(psum_write_layout(cols, psum_depth))),
            "psum_wr_int": Out(1),
            "psum_wr_next": Out(psum_next_layout(psum_depth, 3)),
            "done": Out(1),
            "done_sem": Out(sem_bits),
            "busy": Out(1),
        })

    def _issuer(self, m, name, q, rd, out, count, addr, stride, with_fmt):
        """SBUF address generator feeding one engine stream (read latency 1, no bubbles).

        The SBUF read port's output register is the pipeline register: it is only enabled when
        the stream can advance, so a stalled stream keeps its data there.
        """
        rows = self.rows
        active = Signal(name=f"{name}_active")
        a = Signal(ceil_log2(self.sbuf_depth), name=f"{name}_addr")
        st = Signal(ceil_log2(self.sbuf_depth), name=f"{name}_stride")
        left = Signal(self.n_bits, name=f"{name}_left")
        # ``left == 1``, kept beside ``left`` (loaded with it, and ``left == 2`` as it counts
        # down), so the wide compare is not in front of the queue's ``ready`` and the clock
        # enables behind it.
        left_1 = Signal(name=f"{name}_left_1")
        mask = Signal(rows, name=f"{name}_mask")
        fmt = Signal(3, name=f"{name}_fmt")
        s1_valid = Signal(name=f"s1_{name}_valid")
        s1_last = Signal(name=f"s1_{name}_last")
        s1_mask = Signal(rows, name=f"s1_{name}_mask")
        s1_fmt = Signal(3, name=f"s1_{name}_fmt")
        advance = Signal(name=f"{name}_advance")

        m.d.comb += [
            advance.eq(~s1_valid | out.ready),
            out.valid.eq(s1_valid),
            out.p.last.eq(s1_last),
            rd.addr.eq(a),
            rd.en.eq(advance),
        ]
        for r in range(rows):
            m.d.comb += out.p.data[r].eq(Mux(s1_mask[r], rd.data[r][:self.data_width], 0))
        if with_fmt:
            m.d.comb += out.p.fmt.eq(s1_fmt)
        with m.If(advance):
            m.d.sync += s1_valid.eq(active)
            with m.If(active):
                m.d.sync += [
                    s1_last.eq(left_1),
                    s1_mask.eq(mask),
                    s1_fmt.eq(fmt),
                    a.eq(a + st),
                    left.eq(left - 1),
                    left_1.eq(left == 2),
                ]
                with m.If(left_1):
                    m.d.sync += active.eq(0)
        m.d.comb += q.ready.eq(~active | (advance & left_1))
        with m.If(q.valid & q.ready):
            c = q.payload
            m.d.sync += [
                active.eq(getattr(c, count) != 0),
                a.eq(getattr(c, addr)),
                st.eq(getattr(c, stride)),
                left.eq(getattr(c, count)),
                left_1.eq(getattr(c, count) == 1),
                fmt.eq(c.fmt),
            ]
            m.d.sync += [mask[r].eq(c.k > r) for r in range(rows)]
        return active | s1_valid

    def elaborate(self, platform):
        m = Module()
        width = self.cmd_layout.size
        queues = {}
        for qname in ("stat", "mov", "cpl"):
            f = fifo.SyncFIFOBuffered(width=width, depth=self.queue_depth)
            m.submodules[f"{qname}_q"] = f
            queues[qname] = f
        all_ready = queues["stat"].w_rdy & queues["mov"].w_rdy & queues["cpl"].w_rdy
        m.d.comb += self.cmd.ready.eq(all_ready)
        for f in queues.values():
            m.d.comb += [f.w_data.eq(self.cmd.payload.as_value()),
                         f.w_en.eq(self.cmd.valid & all_ready)]

        def view(f):
            s = stream.Signature(self.cmd_layout).create()
            m.d.comb += [s.payload.eq(f.r_data), s.valid.eq(f.r_rdy), f.r_en.eq(s.ready)]
            return s

        # The stationary and moving words leave through pipeline registers: SBUF's block RAM
        # output (the issuer's port register) then reaches a register here, not the array's
        # registers across the chip (a PE's weight register, the skew registers): the block
        # RAM's clock-to-out and the mask share no cycle with a route across the array. One
        # cycle more before a tile's weights and its first column.
        def registered(name, out):
            """The stream an issuer drives into ``out`` through a pipeline register, and
            the register's ``full``."""
            inner = stream.Signature(out.payload.shape()).create()
            reg = m.submodules[f"{name}_reg"] = PipelineRegister(out.payload.shape())
            wiring.connect(m, reg.o, wiring.flipped(out))
            m.d.comb += [reg.i.valid.eq(inner.valid), reg.i.payload.eq(inner.payload),
                         inner.ready.eq(reg.i.ready)]
            return inner, reg.full

        stat_s, stat_full = registered("stat", self.stationary)
        mov_s, mov_full = registered("mov", self.moving)
        stat_busy = self._issuer(m, "stat", view(queues["stat"]), self.stat_rd,
                                 stat_s, "m", "stat_addr", "stat_stride", True) | stat_full
        mov_busy = self._issuer(m, "mov", view(queues["mov"]), self.mov_rd, mov_s,
                                "n", "mov_addr", "mov_stride", False) | mov_full

        # Completion: tag result beats with their PSUM address, count commands out. The tagged
        # beat leaves through a pipeline register, so PSUM's ready (its read-after-write hazard
        # compare) reaches only a register here, not the engine's pipeline advance, and the
        # address adder here does not reach PSUM's hazard compare and write (one cycle); the beat
        # carries its command's INT flag and semaphore, and the completion counts from PSUM's
        # acceptance of the last beat, so it still waits for the data to be written.
        cpl = view(queues["cpl"])
        # The result beat's PSUM address without an adder in front of PSUM's lookahead
        # compare: ``psum_addr`` for a command's first beat, else ``addr_next`` (the previous
        # beat's + 1, registered), as ``psum_addr + beat`` did.
        first = Signal(init=1, name="beat_first")
        addr_next = Signal(len(cpl.payload.psum_addr), name="beat_addr_next")
        tagged = data.StructLayout({
            "w": psum_write_layout(self.cols, self.psum_depth),
            "int": 1, "sem": self.sem_bits, "sem_en": 1,
        })
        # The beat leaves through a pipeline register whose skid register (``skid_valid``,
        # ``skid_payload``) says which beat its output register loads next: that one, or the
        # beat offered now. With the offered beat's candidates (a command's first beat, a
        # later one), it drives ``psum_wr_next``: PSUM then computes its hazard a cycle ahead
        # and ``psum_wr.ready`` comes from a flip-flop, so that PSUM's compare of the output
        # register with its stages does not come back here to the register's clock enables.
        m.submodules.psum_skid = skid = PipelineRegister(tagged)
        inc = skid.i.payload
        # A beat offered to the pipeline register, on one kept net: the register's valid bits
        # are then 4-input functions of it, their own state and ``psum_wr.ready``, one LUT
        # each after it.
        offer = Signal(attrs={"keep": 1})
        m.d.comb += offer.eq(self.result.valid & cpl.valid)
        m.d.comb += [
            skid.i.valid.eq(offer),
            inc.w.data.eq(self.result.p.data),
            inc.w.addr.eq(Mux(first, cpl.payload.psum_addr, addr_next)),
            inc.w.accumulate.eq(cpl.payload.accumulate),
            inc.w.last.eq(self.result.p.last),
            inc.int.eq(cpl.payload.fmt == 6),
            inc.sem.eq(cpl.payload.sem),
            inc.sem_en.eq(cpl.payload.sem_en),
            self.result.ready.eq(skid.i.ready & cpl.valid),
            self.psum_wr.valid.eq(skid.o.valid),
            self.psum_wr.payload.eq(skid.o.p.w),
            self.psum_wr_int.eq(skid.o.p.int),
            skid.o.ready.eq(self.psum_wr.ready),
        ]
        s_valid, s_data = skid.skid_valid, skid.skid_payload
        for c, sel, addr, acc in zip(
                self.psum_wr_next,
                (s_valid, ~s_valid & first, ~s_valid & ~first),
                (s_data.w.addr, cpl.payload.psum_addr, addr_next),
                (s_data.w.accumulate, cpl.payload.accumulate, cpl.payload.accumulate)):
            m.d.comb += [c.sel.eq(sel), c.addr.eq(addr), c.accumulate.eq(acc)]
        with m.If(self.result.valid & self.result.ready):
            m.d.sync += [first.eq(self.result.p.last), addr_next.eq(inc.w.addr + 1)]
            with m.If(self.result.p.last):
                m.d.comb += cpl.ready.eq(1)
        # ``fin``: PSUM accepts a command's last beat. The first delay stage keeps
        # ``psum_wr.ready`` (PSUM's hazard decision; with a standalone-mode PSUM its compare,
        # the deepest input here) apart from the beat's own terms, each in a flip-flop
        # (``done_d0`` is their AND), so it reaches a D input through no LUT of this controller.
        fin_beat = Signal()
        m.d.comb += fin_beat.eq(skid.o.valid & skid.o.p.w.last & skid.o.p.sem_en)

        pend = Signal()
        d_valid, d_sem = fin_beat & skid.o.ready, skid.o.p.sem
        for i in range(self.done_delay):
            nv, ns = Signal(name=f"done_d{i}"), Signal(self.sem_bits, name=f"done_sem_d{i}")
            if i == 0:
                beat_d0 = Signal(name="done_beat_d0")
                ready_d0 = Signal(name="done_ready_d0")
                m.d.sync += [beat_d0.eq(fin_beat), ready_d0.eq(skid.o.ready)]
                m.d.comb += nv.eq(beat_d0 & ready_d0)
            else:
                m.d.sync += nv.eq(d_valid)
            m.d.sync += ns.eq(d_sem)
            pend = pend | nv
            d_valid, d_sem = nv, ns
        m.d.comb += [
            self.done.eq(d_valid),
            self.done_sem.eq(d_sem),
            self.busy.eq(stat_busy | mov_busy | queues["stat"].r_rdy | queues["mov"].r_rdy |
                         cpl.valid | skid.full | pend),
        ]
        return m
