"""The NeuronCore-style core: sequencer, DMA, tensor engine + PSUM, vector engine, SBUF, the
AXI4-Lite register block, error status, watchdog and interrupt, wired into one component.

    core = NeuronCore(rows=4, cols=4, sbuf_depth=256, psum_depth=64)
    core.describe()        # JSON-able configuration, ports and memory map

See ``docs/core.md`` for the block diagram, the window layouts and the abort protocol.
"""

from amaranth.hdl import (Cat, ClockDomain, ClockSignal, Const, DomainRenamer,
                          Module, Mux, ResetInserter, Signal, Value)
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sim import isa
from sim.config import ENGINE_FORMATS, CoreConfig, check_formats, check_int, check_pow2
from sim.errors import SEQUENCER_ERROR_MAP, ErrorCode
from sim.memmap import (CTRL_ABORT, CTRL_CLEAR, CTRL_CLEAR_COUNTERS, build_memory_map)

from .global_buffer import global_buffer
from .sbuf import SBUF
from .tensor_ctrl import TensorController
from .tensor_record import TensorRecordAdapter
from .vector_ctrl import VectorController
from .vector_record import VectorRecordAdapter

__all__ = ["NeuronCore", "ACTIVITY_LAYOUT", "UCODE_MAP_BASE", "PSUM_ADD_STAGES"]

#: Per-cycle activity of the engines (for the profiler): the ``activity`` port
#: (not ``trace``, which Verilator reserves).
ACTIVITY_LAYOUT = data.StructLayout({
    "running": 1,       # a program runs (START .. end of the program or of an abort)
    "seq_busy": 1,      # the sequencer is executing (not done)
    "dma": 1,           # the DMA engine has work
    "tensor": 1,        # the tensor controller or array has work
    "vector": 1,        # the vector controller or engine has work
    "aborting": 1,
    "seq_wait": 1,      # the sequencer waited on a semaphore in the last 4 cycles (with an
                        # engine idle): sampled from its performance counters in turn
})

#: UCODE window word address of opcode-map entry 0 (entries 0..255 follow).
UCODE_MAP_BASE = 2048

#: FP32 adder stages of PSUM's read-add-write pipeline (write latency ``1 + PSUM_ADD_STAGES``).
#: Three, so that no block-RAM output reaches a register through a whole FP32 add.
PSUM_ADD_STAGES = 3

class NeuronCore(wiring.Component):
    """One core.

    Parameters
    ----------
    rows : int
        Tensor-array rows = SBUF partitions = vector lanes (P), 2 to 128.
    cols : int
        Tensor-array columns = PSUM partitions, 2 to ``rows``.
    partitions, lanes : int, optional
        Must equal ``rows`` when given (the architecture ties them together).
    sbuf_depth : int
        Words per SBUF partition, a power of two from 16 to 65536.
    psum_depth : int
        Words per PSUM partition, a power of two from 16 to 65536.
    formats : collection of Format
        Tensor-engine input formats, a subset of ``sim.config.ENGINE_FORMATS`` (INT8,
        FP8_E4M3, FP8_E5M2, FP8_E3M4, BF16, FP16).
    lut_entries : int
        Vector-engine LUT entries per bank, a power of two from 8 to 1024.
    n_rand : int
        Random bits per stochastic-rounding decision, 1 to 23.
    pmem_depth : int
        Program-memory instructions (64-bit), a power of two from 16 to 2048 (the PROG window
        holds 4096 32-bit words).
    dma_windows : int
        DMA address windows, 1 to 8.
    max_burst : int
        Longest AXI burst of the DMA in beats (power of two, 1 to 256).
    dma_data_width : int
        The DMA's AXI4 data width in bits, a power of two from 32 to 512 (``docs/dma.md``).
    tensor_add_stages : int
        FP32 adder stages of each tensor PE, 1 to 4 (the array's row delay for FP formats).
        1 by default; 2 splits the PE's FP32 add across two registers but lengthens the
        array's drain, so 8x8 tiles of 32 columns no longer stream back to back. The FPGA
        configuration ``core2`` uses 2.
    tensor_mul_stages : int
        Multiplier stages of each tensor PE, 1 to 4. Adds to the array's latency once (not per
        row), so tiles still stream back to back; 2 puts a register between the PE's weight
        and its product; 4 feeds the DSP multiplier from registers (``FPMultiplier``). 1 by
        default; the FPGA configuration ``core2`` uses 4.
    engine_domain : bool or None
        How the soft reset (abort) reaches the units it resets. False: they stay in ``sync``
        under a ``ResetInserter``, so each of their registers resets on ``rst | abort``.
        True: they run in a local domain ``engine`` (the same clock, no domain reset), reset
        by one flip-flop that the reset sets and that otherwise follows the abort, through a
        DCCA global buffer on an ECP5 platform: on an FPGA the OR of the first form is one
        LUT driving every such register's reset. The behaviour is the same (the units are
        also held in reset for one cycle after ``rst`` falls). None (default): True when
        elaborated for a platform (an FPGA build), False otherwise; Amaranth's simulator
        does not support the ``engine`` domain (its clock is assigned from ``sync``, which
        its delta cycles make racy), Verilog simulators do.

    Members
    -------
    axil : In(AXI4LiteSignature(addr_width=16, data_width=32))
        Host port: registers and windows of ``sim.memmap.build_memory_map(dma_windows)``.
    axi : Out(AXI4Signature(addr_width=32, data_width=dma_data_width, id_width=1))
        DMA master to external memory.
    irq : Out(1)
        Interrupt (level): DONE and/or ERROR per ``IRQ_ENABLE``.
    activity : Out(ACTIVITY_LAYOUT)
        Per-cycle engine activity for the profiler.

    Abort: ``CTRL.abort``, a watchdog timeout or any latched error stop the program: the
    sequencer, the engine controllers, the tensor and vector engines and PSUM's pipeline are
    held in reset while the DMA drains its bursts in flight (AXI transactions are always
    completed), then the core is idle with DONE set. Memories keep their contents.
    """

    def __init__(self, rows=4, cols=None, *, partitions=None, lanes=None, sbuf_depth=256,
                 psum_depth=64, formats=ENGINE_FORMATS, lut_entries=64, n_rand=8,
                 pmem_depth=256, dma_windows=4, max_burst=16, dma_data_width=32,
                 tensor_add_stages=1, tensor_mul_stages=1, vector_units=None,
                 engine_domain=None):
        # The checks and their wording are sim.config's (CoreConfig checks the same ranges).
        check_int("rows", rows, 2, 128)
        cols = rows if cols is None else cols
        check_int("cols", cols, 2, rows)
        for name, value in (("partitions", partitions), ("lanes", lanes)):
            if value is not None:
                check_int(name, value, 1, 1024)
                if value != rows:
                    raise ValueError(f"{name} must equal rows ({rows}), not {value}")
        check_pow2("sbuf_depth", sbuf_depth, 16, 65536)
        check_pow2("psum_depth", psum_depth, 16, 65536)
        formats = check_formats(formats, names=False)
        check_pow2("lut_entries", lut_entries, 8, 1024)
        check_int("n_rand", n_rand, 1, 23)
        check_pow2("pmem_depth", pmem_depth, 16, 2048)
        check_int("dma_windows", dma_windows, 1, 8)
        check_pow2("max_burst", max_burst, 1, 256)
        self._dma_data_width = check_pow2("dma_data_width", dma_data_width, 32, 512)
        check_int("tensor_add_stages", tensor_add_stages, 1, 4)
        self._tensor_add_stages = tensor_add_stages
        check_int("tensor_mul_stages", tensor_mul_stages, 1, 4)
        self._tensor_mul_stages = tensor_mul_stages
        if vector_units is not None:
            check_int("vector_units", vector_units, 1, rows)
            if rows % vector_units:
                raise ValueError(f"vector_units must be a divisor of rows ({rows}), "
                                 f"not {vector_units}")
        self._vector_units = vector_units
        if engine_domain is not None and not isinstance(engine_domain, bool):
            raise TypeError(f"engine_domain must be True, False or None, not {engine_domain!r}")
        self._engine_domain = engine_domain
        self._rows, self._cols = rows, cols
        self._sbuf_depth, self._psum_depth = sbuf_depth, psum_depth
        self._formats = tuple(sorted(set(formats)))
        self._lut_entries, self._n_rand = lut_entries, n_rand
        self._pmem_depth, self._dma_windows, self._max_burst = pmem_depth, dma_windows, max_burst
        self._mm = build_memory_map(dma_windows)

        from rtl.bus.axi import AXI4LiteSignature, AXI4Signature
        super().__init__({
            "axil": In(AXI4LiteSignature(addr_width=self._mm.addr_width, data_width=32)),
            "axi": Out(AXI4Signature(addr_width=32, data_width=dma_data_width, id_width=1)),
            "irq": Out(1),
            "activity": Out(ACTIVITY_LAYOUT),
        })

    @classmethod
    def from_config(cls, config, *, engine_domain=None):
        """The core of a ``sim.config.CoreConfig`` (the object that also builds the reference
        simulator, ``config.refsim``), so the model and the RTL share every parameter."""
        if not isinstance(config, CoreConfig):
            raise TypeError(f"config must be a sim.config.CoreConfig, not {config!r}")
        kw = config.to_dict()
        kw["formats"] = config.formats
        return cls(**kw, engine_domain=engine_domain)

    def core_config(self):
        """This core's parameters as a ``sim.config.CoreConfig``."""
        kw = self.config()
        del kw["engine_domain"]
        return CoreConfig.from_dict(kw)

    rows = property(lambda self: self._rows)
    cols = property(lambda self: self._cols)
    partitions = property(lambda self: self._rows)
    sbuf_depth = property(lambda self: self._sbuf_depth)
    psum_depth = property(lambda self: self._psum_depth)
    formats = property(lambda self: self._formats)
    lut_entries = property(lambda self: self._lut_entries)
    n_rand = property(lambda self: self._n_rand)
    pmem_depth = property(lambda self: self._pmem_depth)
    dma_windows = property(lambda self: self._dma_windows)
    dma_data_width = property(lambda self: self._dma_data_width)
    memory_map = property(lambda self: self._mm)

    def config(self):
        """The constructor arguments (JSON-able)."""
        return {"rows": self._rows, "cols": self._cols, "sbuf_depth": self._sbuf_depth,
                "psum_depth": self._psum_depth,
                "formats": [f.name.lower() for f in self._formats],
                "lut_entries": self._lut_entries, "n_rand": self._n_rand,
                "pmem_depth": self._pmem_depth, "dma_windows": self._dma_windows,
                "max_burst": self._max_burst, "dma_data_width": self._dma_data_width,
                "tensor_add_stages": self._tensor_add_stages,
                "tensor_mul_stages": self._tensor_mul_stages,
                "vector_units": self._vector_units,
                "engine_domain": self._engine_domain}

    def describe(self):
        """A JSON-able description: configuration, top-level ports, memory map, windows."""
        ports = []
        for path, member, value in self.signature.flatten(self):
            ports.append({"name": "__".join(str(p) for p in path),
                          "dir": "in" if member.flow.value == "In" else "out",
                          "width": Value.cast(value).shape().width})
        return {
            "config": self.config(),
            "ports": ports,
            "memory_map": self._mm.to_dict(),
            "windows": {
                "PROG": "instruction i = words 2i (bits 31..0) and 2i+1 (bits 63..32); the "
                        "instruction is written when word 2i+1 is written; reads return 0",
                "UCODE": f"control-store word u = words 2u (low) and 2u+1 (high, commits); "
                         f"opcode-map entry o at word {UCODE_MAP_BASE} + o (bits 9..0); "
                         f"reads return 0",
                "LUT": "vector-engine cfg address: word a -> region a[9:8] (0 coef, 1 desc, "
                       "2 hdr, 3 status), bank a[10], index LUT_PAGE << 8 | a[7:0]",
            },
            "sbuf_bytes": self._rows * self._sbuf_depth * 4,
            "psum_bytes": self._cols * self._psum_depth * 4,
        }

    # -------------------------------------------------------------------------------------
    def elaborate(self, platform):
        from rtl.bus.axi_lite import AXI4LiteRegisters
        from rtl.bus.pipeline_register import PipelineRegister
        from rtl.bus.skid import SkidBuffer
        from rtl.control.sequencer import DBG, Sequencer
        from rtl.core.status import ErrorReport, ErrorStatus
        from rtl.core.watchdog import Watchdog
        from rtl.dma.dma import DMA
        from rtl.tensor.engine import TensorEngine
        from rtl.tensor.psum import PSUM
        from rtl.vector.engine import CMD_LAYOUT, VectorEngine

        m = Module()
        P, C = self._rows, self._cols
        mm = self._mm

        # Soft reset of everything that must return to idle on an abort (``engine_domain``).
        # Without the engine domain the units stay in ``sync`` under a
        # ``ResetInserter(aborting)``, so their registers reset on ``rst | aborting``: on an
        # FPGA one LUT then drives the reset of every such register over general routing.
        # With it the units run in ``engine``: the same clock, no
        # domain reset, reset by one flip-flop (``soft_ff``) that the reset sets and that
        # follows ``aborting`` after it, through a DCCA onto a global network on the ECP5
        # (``soft``; nextpnr-ice40 promotes resets itself).
        aborting = Signal()
        use_engine = platform is not None if self._engine_domain is None else self._engine_domain
        if not use_engine:
            def soft_reset(name, comp):
                m.submodules[name] = ResetInserter(aborting)(comp)
                return comp
        else:
            soft_ff = Signal(init=1)
            soft = Signal()
            m.domains.engine = ClockDomain("engine", reset_less=True, local=True)
            m.d.comb += ClockSignal("engine").eq(ClockSignal("sync"))
            m.d.comb += soft.eq(global_buffer(m, "soft_buf", soft_ff, platform))

            def soft_reset(name, comp):
                m.submodules[name] = DomainRenamer({"sync": "engine"})(ResetInserter(soft)(comp))
                return comp

        regs = m.submodules.regs = AXI4LiteRegisters(mm)
        seq = soft_reset("seq", Sequencer(pmem_depth=self._pmem_depth,
                                          check_terms=self._RECORD_TERMS))
        dma = m.submodules.dma = DMA(partitions=P, sbuf_depth=self._sbuf_depth,
                                     data_width=self._dma_data_width,
                                     max_burst=self._max_burst, windows=self._dma_windows)
        sbuf = m.submodules.sbuf = SBUF(P, self._sbuf_depth)
        te = soft_reset("tensor", TensorEngine(P, C, self._formats,
                                               mul_stages=self._tensor_mul_stages,
                                               add_stages=self._tensor_add_stages))
        # The done pulse waits for PSUM's write latency (done_delay).
        # PSUM's ``wr.ready`` from a flip-flop: the controller shows the beat it loads next.
        psum = soft_reset("psum", PSUM(C, self._psum_depth, add_stages=PSUM_ADD_STAGES,
                                       lookahead=3))
        tctrl = soft_reset("tensor_ctrl", TensorController(
            P, C, self._sbuf_depth, self._psum_depth, data_width=16,
            done_delay=psum.latency, queue_depth=2))
        # The tensor engine's results reach the controller through a skid buffer: the engine's
        # stall (``result.ready``, the clock enable of its whole data path and its
        # ``moving.ready``) then comes from a flip-flop, not from the controller's PSUM write
        # register through the completion queue, so that no PSUM write register -> tensor
        # stall -> moving stream -> MOV issuer's clock enable chain crosses the chip.
        res_skid = soft_reset("tensor_result", SkidBuffer(te.result.payload.shape()))
        # The moving stream reaches the engine through a skid buffer too: the MOV issuer's
        # advance (its queue's ``ready`` and its registers' clock enables) then comes from a
        # flip-flop, not from the engine's stall (``valid_d<L-1>``/bank flags -> ``moving.ready``,
        # placed far from the controller). The engine sees the same beats in the same cycles.
        mov_skid = soft_reset("tensor_moving", SkidBuffer(te.moving.payload.shape()))
        # The engine, or a result or moving beat in a skid buffer.
        te_busy = te.busy | res_skid.full | mov_skid.full
        ve = soft_reset("vector", VectorEngine(P, depth=self._lut_entries, n_rand=self._n_rand,
                                                  units=self._vector_units))
        cfg_reg = soft_reset("vector_cfg", PipelineRegister(ve.cfg.payload.shape()))
        vctrl = soft_reset("vector_ctrl", VectorController(
            P, C, self._sbuf_depth, self._psum_depth, CMD_LAYOUT, queue_depth=2))
        status = m.submodules.status = ErrorStatus(sources=4)
        wd = m.submodules.watchdog = Watchdog(32)

        wiring.connect(m, wiring.flipped(self.axil), regs.axil)
        wiring.connect(m, wiring.flipped(self.axi), dma.axi)

        # ---- SBUF ports -------------------------------------------------------------------
        wiring.connect(m, dma.sbuf_r, sbuf.r_dma)
        wiring.connect(m, dma.sbuf_w, sbuf.w_dma)
        wiring.connect(m, tctrl.stat_rd, sbuf.r_tensor_stat)
        wiring.connect(m, tctrl.mov_rd, sbuf.r_tensor_mov)
        wiring.connect(m, vctrl.a_sbuf, sbuf.r_vector_a)
        wiring.connect(m, vctrl.b_sbuf, sbuf.r_vector_b)
        wiring.connect(m, vctrl.o_sbuf, sbuf.w_vector)

        # ---- tensor path ------------------------------------------------------------------
        wiring.connect(m, tctrl.stationary, te.stationary)
        wiring.connect(m, tctrl.moving, mov_skid.i)
        wiring.connect(m, mov_skid.o, te.moving)
        wiring.connect(m, te.result, res_skid.i)
        wiring.connect(m, res_skid.o, tctrl.result)
        m.d.comb += [
            psum.wr.valid.eq(tctrl.psum_wr.valid),
            psum.wr.payload.eq(tctrl.psum_wr.payload),
            tctrl.psum_wr.ready.eq(psum.wr.ready),
            psum.wr_int.eq(tctrl.psum_wr_int),
            psum.wr_next.eq(tctrl.psum_wr_next),
        ]
        trec = m.submodules.tensor_record = TensorRecordAdapter(tctrl.cmd_layout)
        wiring.connect(m, seq.tensor, trec.rec)
        wiring.connect(m, trec.cmd, tctrl.cmd)
        m.d.comb += seq.tensor_done.eq(tctrl.done)

        # ---- vector path ------------------------------------------------------------------
        wiring.connect(m, vctrl.e_cmd, ve.cmd)
        wiring.connect(m, vctrl.e_a, ve.a)
        wiring.connect(m, vctrl.e_b, ve.b)
        wiring.connect(m, ve.o, vctrl.e_o)
        m.d.comb += [
            # (the LUT configuration register's beat folded into the engine's registered
            # idle flag: full now, or filling now, covers full in the next cycle)
            ve.idle_hold.eq(cfg_reg.full | (cfg_reg.i.valid & cfg_reg.i.ready)),
            vctrl.e_idle.eq(ve.idle_q),
            vctrl.a_psum.data.eq(psum.rd.data),
            psum.rd.addr.eq(vctrl.a_psum.addr),
            psum.rd.en.eq(vctrl.a_psum.en),
        ]
        # VECTOR records become the controller's commands in the vector path's adapter.
        vrec = m.submodules.vector_record = VectorRecordAdapter(P, vctrl.cmd_layout, CMD_LAYOUT)
        wiring.connect(m, seq.vector, vrec.rec)
        wiring.connect(m, vrec.cmd, vctrl.cmd)
        m.d.comb += seq.vector_done.eq(vctrl.done)
        self._record_check(m, seq)

        # ---- DMA --------------------------------------------------------------------------
        m.d.comb += [
            dma.cmd.valid.eq(seq.dma.valid),
            # Zero while invalid: the queue memory's output is X in simulation until written,
            # and the DMA decodes the payload combinationally (X would reach the AXI ports).
            dma.cmd.payload.eq(Mux(seq.dma.valid, seq.dma.payload, 0)),
            seq.dma.ready.eq(dma.cmd.ready),
            seq.dma_done.eq(dma.done),
        ]
        for i in range(self._dma_windows):
            m.d.comb += [
                dma.windows[i].base.eq(getattr(regs, f"dma_win{i}_base")),
                dma.windows[i].limit.eq(getattr(regs, f"dma_win{i}_limit")),
                dma.windows[i].perm.eq(getattr(regs, f"dma_win{i}_perm")),
            ]

        # ---- program control, abort, status -------------------------------------------------
        ctrl = regs.ctrl
        ctrl_we = regs.ctrl_we
        running = Signal()
        start = Signal()
        finish = Signal()
        engines_idle = Signal()
        m.d.comb += [
            engines_idle.eq(~dma.busy & ~tctrl.busy & ~te_busy & psum.idle & ~vctrl.busy &
                            ~ve.busy),
            start.eq(ctrl_we & ctrl[0] & ~running),
        ]
        # Errors: sequencer traps, DMA errors, watchdog, LUT configuration errors.
        seq_err_prev = Signal()
        lut_err_prev = Signal()
        m.d.sync += [seq_err_prev.eq(seq.error), lut_err_prev.eq(ve.error)]
        seq_code = Signal(4)
        es = seq.err_status
        # sim.errors.SEQUENCER_ERROR_MAP: the lowest set ErrorBit decides.
        m.d.comb += seq_code.eq(0)
        for bit in reversed(isa.ErrorBit):
            with m.If(es[int(bit)]):
                m.d.comb += seq_code.eq(SEQUENCER_ERROR_MAP[bit.name])
        # The reports reach the status block through a register: its count and first-error
        # selection then start at flip-flops instead of behind the sources' decodes (such as
        # the sequencer's err_status -> code). Errors are latched one cycle later; the abort below
        # still reacts to the reports themselves, and a program's DONE comes at least a cycle after
        # it.
        rep = Signal(data.ArrayLayout(ErrorReport, 4))
        m.d.sync += status.report.eq(rep)
        m.d.comb += [
            rep[0].valid.eq(seq.error & ~seq_err_prev & running),
            rep[0].code.eq(seq_code), rep[0].addr.eq(seq.err_pc), rep[0].info.eq(es),
            rep[1].valid.eq(dma.err_valid), rep[1].code.eq(dma.err_code),
            rep[1].addr.eq(dma.err_addr), rep[1].info.eq(dma.err_info),
            rep[2].valid.eq(wd.timeout), rep[2].code.eq(ErrorCode.WATCHDOG),
            rep[2].addr.eq(wd.count), rep[2].info.eq(regs.watchdog_limit),
            rep[3].valid.eq(ve.error & ~lut_err_prev), rep[3].code.eq(ErrorCode.LUT_INDEX),
        ]
        abort_req = Signal()
        m.d.comb += abort_req.eq(running & ~aborting & (
            (ctrl_we & (ctrl & CTRL_ABORT).any()) | wd.timeout | status.error |
            rep[0].valid | rep[1].valid | rep[3].valid))
        with m.If(start):
            m.d.sync += running.eq(1)
        # ``aborting`` and its copy ``soft_ff`` (the soft reset; the reset sets it) load the
        # same next value: the latter then equals ``aborting`` from a cycle after the reset.
        aborting_next = Signal()
        m.d.comb += aborting_next.eq(aborting | abort_req)
        # The program ends when the sequencer is done and every engine has drained, or when
        # an abort has drained the DMA (the rest is held in reset meanwhile).
        with m.If(running & ~start & ((~aborting & seq.done & ~seq.busy & engines_idle) |
                                      (aborting & ~dma.busy))):
            m.d.comb += [finish.eq(1), aborting_next.eq(0)]
            m.d.sync += running.eq(0)
        m.d.sync += aborting.eq(aborting_next)
        if use_engine:
            m.d.sync += soft_ff.eq(aborting_next)
        m.d.comb += [
            dma.abort.eq(aborting),
            seq.start.eq(start),
            seq.start_pc.eq(regs.start_pc),
            status.done.eq(finish),
            status.start.eq(start),
            status.clear.eq(ctrl_we & (ctrl & CTRL_CLEAR).any()),
            status.busy.eq(running),
            status.irq_enable.eq(regs.irq_enable),
            wd.limit.eq(regs.watchdog_limit),
            wd.start.eq(start),
            wd.running.eq(running & ~aborting),
            wd.clear.eq(ctrl_we & (ctrl & CTRL_CLEAR).any()),
            regs.busy.eq(running),
            regs.status.eq(status.status),
            regs.err_code.eq(status.code),
            regs.err_addr.eq(status.addr),
            regs.err_info.eq(status.info),
            regs.err_count.eq(status.count),
            self.irq.eq(status.irq),
        ]

        # ---- configuration registers ------------------------------------------------------
        fmask = sum(1 << int(f) for f in self._formats)
        m.d.comb += [
            regs.config0.eq(P | (C << 8) | (self._dma_windows << 16) | (fmask << 24)),
            regs.config1.eq(ceil_log2(self._sbuf_depth) | (ceil_log2(self._psum_depth) << 8) |
                            (ceil_log2(2 * self._pmem_depth) << 16) |
                            (ceil_log2(2 * isa.UCODE_DEPTH) << 24)),
        ]

        # ---- performance counters -----------------------------------------------------------
        # One lifetime for every counter (docs/memory_map.md): each restarts at START and
        # CTRL.clear_counters zeroes it, so after a program each holds that program's figure.
        clear_cnt = Signal()
        m.d.comb += [clear_cnt.eq(ctrl_we & (ctrl & CTRL_CLEAR_COUNTERS).any()),
                     dma.clear_counters.eq(clear_cnt | start)]
        cycles = Signal(64)
        counters = {n: Signal(32, name=f"perf_{n}") for n in ("tensor_busy", "vector_busy",
                                                              "dma_busy")}
        busy_now = {"tensor_busy": tctrl.busy | te_busy | ~psum.idle,
                    "vector_busy": vctrl.busy | ve.busy, "dma_busy": dma.busy}
        with m.If(start | clear_cnt):
            m.d.sync += cycles.eq(0)
            m.d.sync += [c.eq(0) for c in counters.values()]
        with m.Elif(running):
            m.d.sync += cycles.eq(cycles + 1)
            for n, c in counters.items():
                with m.If(busy_now[n]):
                    m.d.sync += c.eq(c + 1)
        # Sequencer counters through its debug port, one address per cycle in turn.
        dbg_list = [DBG["retired"], DBG["semwait"] + 0, DBG["semwait"] + 3, DBG["semwait"] + 6]
        dsel = Signal(2)
        m.d.sync += dsel.eq(dsel + 1)
        dvals = [Signal(32, name=f"dbg_val{i}") for i in range(4)]
        seq_wait = Signal()
        with m.Switch(dsel):
            for i, a in enumerate(dbg_list):
                with m.Case(i):
                    m.d.comb += seq.dbg_addr.eq(a)
                    m.d.sync += dvals[i].eq(seq.dbg_data)
                    if i:
                        # A semaphore-wait counter moved since its last sample (4 cycles ago).
                        m.d.sync += seq_wait.eq(seq.dbg_data != dvals[i])
        # The sum of the three semaphore-wait counters is registered (a read sees it a cycle
        # late, as it sees the samples), so no adder sits in front of the read multiplexer.
        sem_wait = Signal(32)
        m.d.sync += sem_wait.eq(dvals[1] + dvals[2] + dvals[3])
        # The sequencer's counters restart at START; CTRL.clear_counters zeroes what the host
        # reads by subtracting a snapshot taken then (a START drops it). The differences are
        # registered, so no subtractor is in front of the read multiplexer.
        instret_base, sem_wait_base = Signal(32), Signal(32)
        instret_q, sem_wait_q = Signal(32), Signal(32)
        with m.If(start):
            m.d.sync += [instret_base.eq(0), sem_wait_base.eq(0)]
        with m.Elif(clear_cnt):
            m.d.sync += [instret_base.eq(dvals[0]), sem_wait_base.eq(sem_wait)]
        m.d.sync += [instret_q.eq(dvals[0] - instret_base),
                     sem_wait_q.eq(sem_wait - sem_wait_base)]
        m.d.comb += [
            regs.perf_cycles_lo.eq(cycles[:32]),
            regs.perf_cycles_hi.eq(cycles[32:]),
            regs.perf_tensor_busy.eq(counters["tensor_busy"]),
            regs.perf_vector_busy.eq(counters["vector_busy"]),
            regs.perf_dma_busy.eq(counters["dma_busy"]),
            regs.perf_dma_rd_bytes.eq(dma.rd_bytes),
            regs.perf_dma_wr_bytes.eq(dma.wr_bytes),
            regs.perf_instret.eq(instret_q),
            regs.perf_sem_wait.eq(sem_wait_q),
        ]

        # ---- windows: program memory, control store + opcode map, LUT ---------------------
        prog = regs.prog
        lo = Signal(32)
        with m.If(prog.we & ~prog.addr[0]):
            m.d.sync += lo.eq(prog.wdata)
        m.d.comb += [
            seq.pmem_wr_addr.eq(prog.addr[1:]),
            seq.pmem_wr_data.eq(Cat(lo, prog.wdata)),
            seq.pmem_wr_en.eq(prog.we & prog.addr[0] &
                              (prog.addr[1:] < self._pmem_depth)),
            prog.rdata.eq(0),
        ]
        uc = regs.ucode
        ulo = Signal(32)
        is_map = uc.addr >= UCODE_MAP_BASE
        with m.If(uc.we & ~uc.addr[0]):
            m.d.sync += ulo.eq(uc.wdata)
        m.d.comb += [
            seq.ucode_wr_addr.eq(uc.addr[1:]),
            seq.ucode_wr_data.eq(Cat(ulo, uc.wdata)),
            seq.ucode_wr_en.eq(uc.we & uc.addr[0] & (uc.addr < 2 * isa.UCODE_DEPTH)),
            seq.map_wr_addr.eq(uc.addr[:8]),
            seq.map_wr_data.eq(uc.wdata),
            seq.map_wr_en.eq(uc.we & is_map & (uc.addr < UCODE_MAP_BASE + 256)),
            uc.rdata.eq(0),
        ]
        # LUT window -> vector engine cfg (shared with TABLE commands; the window is locked
        # while a program runs, so the two never compete in practice: TABLE has priority).
        lut = regs.lut
        pend = Signal()
        pend_addr = Signal(16)
        pend_data = Signal(32)
        pend_write = Signal()
        la = lut.addr
        region = la[8:10]
        # (sim.memmap.lut_cfg_address: LUT_PAGE supplies the cfg index bits above a[7:0])
        index = Cat(la[:8], regs.lut_page)
        cfg_addr = Mux(region == 3, 0x8000 | index, (region << 12) | (la[10] << 14) | index)
        with m.If((lut.we | lut.re) & ~pend):
            m.d.sync += [pend.eq(1), pend_addr.eq(cfg_addr), pend_data.eq(lut.wdata),
                         pend_write.eq(lut.we)]
        lut_rdata = Signal(32)
        # Both reach the engine through a pipeline register (one cycle): the TABLE streamer's
        # output and the window's multiplexer do not reach the LUT's descriptor and
        # coefficient RAM write enables in the same cycle (docs/fpga.md, Goals).
        cfg = cfg_reg.i
        # (``vctrl.cfg.ready`` is the register's ready whether or not the controller offers a
        # word: the controller reads it only with its ``cfg.valid``, so that flip-flop is not
        # in front of the ready either.)
        m.d.comb += vctrl.cfg.ready.eq(cfg.ready)
        with m.If(vctrl.cfg.valid):
            m.d.comb += [cfg.valid.eq(1), cfg.payload.eq(vctrl.cfg.payload)]
        with m.Else():
            m.d.comb += [cfg.valid.eq(pend), cfg.p.addr.eq(pend_addr),
                         cfg.p.data.eq(pend_data), cfg.p.write.eq(pend_write)]
            with m.If(pend & cfg.ready):
                m.d.sync += pend.eq(0)
        wiring.connect(m, cfg_reg.o, ve.cfg)
        m.d.comb += ve.rdata.ready.eq(1)
        with m.If(ve.rdata.valid):
            m.d.sync += lut_rdata.eq(ve.rdata.payload)
        m.d.comb += lut.rdata.eq(lut_rdata)

        # Seeds: SEED records, or the SEED register, written or at START: every program
        # starts with the lane generators of the host's seed (docs/memory_map.md, SEED), as a
        # fresh reference simulator does, whatever earlier programs drew. (The engine is idle
        # at START; a stochastic-rounding beat waits until the reseeding is done.)
        m.d.comb += [
            ve.seed.eq(Mux(vctrl.seed_load, vctrl.seed, regs.seed)),
            ve.seed_load.eq(vctrl.seed_load | regs.seed_we | start),
        ]

        # ---- trace --------------------------------------------------------------------------
        m.d.comb += [
            self.activity.running.eq(running),
            self.activity.seq_busy.eq(seq.busy),
            self.activity.dma.eq(dma.busy),
            self.activity.tensor.eq(busy_now["tensor_busy"]),
            self.activity.vector.eq(busy_now["vector_busy"]),
            self.activity.aborting.eq(aborting),
            self.activity.seq_wait.eq(seq_wait),
        ]
        return m

    #: Record-check terms per slot (``Sequencer.check_terms``): TENSOR slot 3 has the most
    #: (k and m: 2 or 5 each, fmt: 1).
    _RECORD_TERMS = 11

    def _record_check(self, m, seq):
        """``sim.isa.tensor_record_error`` / ``vector_record_error`` on the records the
        sequencer is building: an EMIT of an invalid one traps ``ILLEGAL_FIELD`` (reported as
        ``ILLEGAL_INSTRUCTION`` at the instruction's PC) and nothing reaches the engines.

        The check is split in two: terms of at most 4 bits each of the value written into a
        slot (``seq.slot_data``; the sequencer registers them beside the slot), and the
        verdict, a small function of the terms (``seq.*_terms``, the next cycle's record),
        which the sequencer registers for an EMIT."""
        from rtl.control.layouts import record_layout

        def nibbles(value):
            return [value[i:i + 4] for i in range(0, len(value), 4)]

        def range_terms(value, hi):
            # 1 <= value <= hi for an 8-bit field, from its nibbles h (high) and l (low) and
            # hi's H and L: h < H, h == H, l <= L, h == 0, l == 0 (with H = 0, two terms:
            # h != 0 and l outside 1..L).
            hi = min(hi, 0xFF)
            h, l, hh, ll = value[4:8], value[:4], hi >> 4, hi & 15
            if hh == 0:
                return [h != 0, (l == 0) | (l > ll)]
            return [h < hh, h == hh, l <= ll, h == 0, l == 0]

        def range_bad(terms):
            if len(terms) == 2:
                return terms[0] | terms[1]
            h_lt, h_eq, l_le, h_z, l_z = terms
            return ~(h_lt | h_eq & l_le) | h_z & l_z

        def fmt_ok(fmt):
            return Cat(*[fmt == int(f) for f in self._formats]).any()

        def tensor_terms(word):
            t = data.View(record_layout(isa.Engine.TENSOR), word)
            k, mm = range_terms(t.k, self._rows), range_terms(t.m, self._cols)
            return {2: [n != 0 for n in nibbles(t.n)], 3: k + mm + [~fmt_ok(t.fmt)]}

        def tensor_bad(terms):
            nk = len(range_terms(Const(0, 8), self._rows))
            k, mm = terms[3][:nk], terms[3][nk:-1]
            return ~Cat(*terms[2]).any() | range_bad(k) | range_bad(mm) | terms[3][-1]

        def vector_terms(word):
            v = data.View(record_layout(isa.Engine.VECTOR), word)
            return {0: [v.op > isa.VecOp.ACC_RD,
                        Cat(*[v.op == o for o in isa.VEC_CHECKED_OPS]).any(),
                        v.op == isa.VecOp.REDUCE, v.op == isa.VecOp.TT,
                        v.alu > isa.VEC_ALU_MAX,
                        ~Cat(*[v.alu == a for a in isa.VEC_REDUCE_ALUS]).any(),
                        v.rnd > isa.VEC_RND_MAX, v.b_space == isa.Space.PSUM]}

        def vector_bad(terms):
            op_bad, checked, reduce, tt, alu_bad, alu_nored, rnd_bad, b_psum = terms[0]
            return (op_bad | checked & (alu_bad | rnd_bad) | reduce & alu_nored |
                    tt & b_psum)

        for e, terms_of, bad in ((isa.Engine.TENSOR, tensor_terms, tensor_bad),
                                 (isa.Engine.VECTOR, vector_terms, vector_bad)):
            name = {isa.Engine.TENSOR: "tensor", isa.Engine.VECTOR: "vector"}[e]
            nslots = isa.RECORD_SLOTS[e]
            width = isa.layout_width(isa.RECORDS[e])
            slot_terms = getattr(seq, name + "_slot_terms")
            blank_terms = getattr(seq, name + "_blank_terms")
            # Slot s's terms: the word with ``slot_data`` in slot s (the other slots' bits are
            # not used by slot s's terms).
            for s_ in range(nslots):
                word = Cat(Const(0, 32 * s_), seq.slot_data, Const(0, width - 32 * (s_ + 1)))
                terms = terms_of(word).get(s_, [])
                blank = terms_of(Const(0, width)).get(s_, [])
                assert len(terms) <= self._RECORD_TERMS
                m.d.comb += [slot_terms[s_].eq(Cat(*terms)), blank_terms[s_].eq(Cat(*blank))]
            held = getattr(seq, name + "_terms")
            counts = {s_: len(t) for s_, t in terms_of(Const(0, width)).items()}
            m.d.comb += getattr(seq, name + "_illegal").eq(
                bad({s_: [held[s_][i] for i in range(n)] for s_, n in counts.items()}))

