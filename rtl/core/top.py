"""The NeuronCore-style core: sequencer, DMA, tensor engine + PSUM, vector engine, SBUF, the
AXI4-Lite register block, error status, watchdog and interrupt, wired into one component.

    core = NeuronCore(rows=4, cols=4, sbuf_depth=256, psum_depth=64)
    core.describe()        # JSON-able configuration, ports and memory map

See ``docs/core.md`` for the block diagram, the window layouts and the abort protocol.
"""

from amaranth.hdl import (ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetInserter,
                          Value)
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sim import isa
from sim.config import (ACCUMULATE, ENGINE_FORMATS, CoreConfig, check_bool, check_choice,
                        check_formats, check_int, check_pow2)
from sim.memmap import build_memory_map

from .code_windows import UCODE_MAP_BASE, CodeWindows
from .counters import CoreCounters
from .engine_reset import EngineReset
from .lut_window import LutWindow
from .record_check import RECORD_TERMS, RecordCheck
from .run_control import RunControl
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
    tensor_accumulate : str
        The tensor engine's column accumulation, ``"fp32"`` (default) or ``"fused"``
        (``docs/tensor.md``).
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
                 tensor_accumulate="fp32", engine_domain=None):
        # The checks and their wording are sim.config's (CoreConfig checks the same ranges).
        check_int("rows", rows, 2, 128)
        cols = rows if cols is None else cols
        check_int("cols", cols, 2, rows)
        for name, value in (("partitions", partitions), ("lanes", lanes)):
            if value is not None:
                check_choice(name, value, (rows,))     # (the architecture ties them)
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
        self._tensor_accumulate = check_choice("tensor_accumulate", tensor_accumulate,
                                               ACCUMULATE)
        if vector_units is not None:
            check_int("vector_units", vector_units, 1, rows)
            if rows % vector_units:
                raise ValueError(f"vector_units must be a divisor of rows ({rows}), "
                                 f"not {vector_units}")
        self._vector_units = vector_units
        if engine_domain is not None:
            check_bool("engine_domain", engine_domain)
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
                "tensor_accumulate": self._tensor_accumulate,
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

    def elaborate(self, platform):
        from rtl.bus.axi_lite import AXI4LiteRegisters
        from rtl.bus.pipeline_register import PipelineRegister
        from rtl.bus.skid import SkidBuffer
        from rtl.control.sequencer import Sequencer
        from rtl.dma.dma import DMA
        from rtl.tensor.engine import TensorEngine
        from rtl.tensor.psum import PSUM, psum_formats
        from rtl.vector.engine import CMD_LAYOUT, VectorEngine

        m = Module()
        P, C = self._rows, self._cols

        # ---- program control and the soft reset of the engines -----------------------------
        run = m.submodules.run_control = RunControl()
        use_engine = platform is not None if self._engine_domain is None else self._engine_domain
        ereset = m.submodules.engine_reset = EngineReset(use_engine)
        m.d.comb += [ereset.aborting.eq(run.aborting),
                     ereset.aborting_next.eq(run.aborting_next)]
        if use_engine:
            # The same clock, no domain reset: the units are reset by ``ereset.reset`` alone.
            m.domains.engine = ClockDomain("engine", reset_less=True, local=True)
            m.d.comb += ClockSignal("engine").eq(ClockSignal("sync"))

        def soft_reset(name, comp):
            wrapped = ResetInserter(ereset.reset)(comp)
            if use_engine:
                wrapped = DomainRenamer({"sync": "engine"})(wrapped)
            m.submodules[name] = wrapped
            return comp

        # ---- units --------------------------------------------------------------------------
        regs = m.submodules.regs = AXI4LiteRegisters(self._mm)
        seq = soft_reset("seq", Sequencer(pmem_depth=self._pmem_depth,
                                          check_terms=self._RECORD_TERMS))
        dma = m.submodules.dma = DMA(partitions=P, sbuf_depth=self._sbuf_depth,
                                     data_width=self._dma_data_width,
                                     max_burst=self._max_burst, windows=self._dma_windows)
        sbuf = m.submodules.sbuf = SBUF(P, self._sbuf_depth)
        te = soft_reset("tensor", TensorEngine(P, C, self._formats,
                                               mul_stages=self._tensor_mul_stages,
                                               add_stages=self._tensor_add_stages,
                                               accumulate=self._tensor_accumulate))
        # (``done_delay``: the done pulse waits for PSUM's write latency; ``lookahead``:
        # PSUM's ``wr.ready`` from a flip-flop, the controller shows the beat it loads next)
        psum = soft_reset("psum", PSUM(C, self._psum_depth, add_stages=PSUM_ADD_STAGES,
                                       lookahead=3, formats=psum_formats(self._formats)))
        tctrl = soft_reset("tensor_ctrl", TensorController(
            P, C, self._sbuf_depth, self._psum_depth, data_width=16,
            done_delay=psum.latency, queue_depth=2))
        # The engine's streams pass through skid buffers, so that its stall (``result.ready``,
        # the clock enable of its data path) and the MOV issuer's advance each come from a
        # flip-flop, not from the other side's logic. Same beats, same cycles.
        res_skid = soft_reset("tensor_result", SkidBuffer(te.result.payload.shape()))
        mov_skid = soft_reset("tensor_moving", SkidBuffer(te.moving.payload.shape()))
        ve = soft_reset("vector", VectorEngine(P, depth=self._lut_entries, n_rand=self._n_rand,
                                                  units=self._vector_units))
        # The LUT configuration reaches the engine through a pipeline register: the TABLE
        # streamer's output and the window's multiplexer do not reach the LUT's RAM write
        # enables in the same cycle.
        cfg_reg = soft_reset("vector_cfg", PipelineRegister(ve.cfg.payload.shape()))
        vctrl = soft_reset("vector_ctrl", VectorController(
            P, C, self._sbuf_depth, self._psum_depth, CMD_LAYOUT, queue_depth=2))
        code = m.submodules.code_windows = CodeWindows(self._pmem_depth)
        lutw = m.submodules.lut_window = LutWindow()
        counters = m.submodules.counters = CoreCounters()

        wiring.connect(m, wiring.flipped(self.axil), regs.axil)
        wiring.connect(m, wiring.flipped(self.axi), dma.axi)

        # ---- SBUF ports ---------------------------------------------------------------------
        wiring.connect(m, dma.sbuf_r, sbuf.r_dma)
        wiring.connect(m, dma.sbuf_w, sbuf.w_dma)
        wiring.connect(m, tctrl.stat_rd, sbuf.r_tensor_stat)
        wiring.connect(m, tctrl.mov_rd, sbuf.r_tensor_mov)
        wiring.connect(m, vctrl.a_sbuf, sbuf.r_vector_a)
        wiring.connect(m, vctrl.b_sbuf, sbuf.r_vector_b)
        wiring.connect(m, vctrl.o_sbuf, sbuf.w_vector)

        # ---- tensor path --------------------------------------------------------------------
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

        # ---- vector path --------------------------------------------------------------------
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
        vrec = m.submodules.vector_record = VectorRecordAdapter(P, vctrl.cmd_layout, CMD_LAYOUT)
        wiring.connect(m, seq.vector, vrec.rec)
        wiring.connect(m, vrec.cmd, vctrl.cmd)
        m.d.comb += seq.vector_done.eq(vctrl.done)
        self._record_check(m, seq)
        # The LUT window and the TABLE records share the engine's configuration port.
        wiring.connect(m, regs.lut, lutw.window)
        m.d.comb += lutw.page.eq(regs.lut_page)
        wiring.connect(m, vctrl.cfg, lutw.table)
        wiring.connect(m, lutw.cfg, cfg_reg.i)
        wiring.connect(m, cfg_reg.o, ve.cfg)
        wiring.connect(m, ve.rdata, lutw.rdata)
        # Seeds: SEED records, or the SEED register, written or at START: every program
        # starts with the lane generators of the host's seed (docs/memory_map.md, SEED), as a
        # fresh reference simulator does. (The engine is idle at START; a stochastic-rounding
        # beat waits until the reseeding is done.)
        m.d.comb += [
            ve.seed.eq(Mux(vctrl.seed_load, vctrl.seed, regs.seed)),
            ve.seed_load.eq(vctrl.seed_load | regs.seed_we | run.start),
        ]

        # ---- DMA ----------------------------------------------------------------------------
        m.d.comb += [
            dma.cmd.valid.eq(seq.dma.valid),
            # Zero while invalid: the queue memory's output is X in simulation until written,
            # and the DMA decodes the payload combinationally (X would reach the AXI ports).
            dma.cmd.payload.eq(Mux(seq.dma.valid, seq.dma.payload, 0)),
            seq.dma.ready.eq(dma.cmd.ready),
            seq.dma_done.eq(dma.done),
            dma.abort.eq(run.aborting),
        ]
        m.d.comb += [getattr(dma.windows[i], f).eq(getattr(regs, f"dma_win{i}_{f}"))
                     for i in range(self._dma_windows) for f in ("base", "limit", "perm")]

        # ---- sequencer: program, control store, start ---------------------------------------
        wiring.connect(m, regs.prog, code.prog)
        wiring.connect(m, regs.ucode, code.ucode)
        m.d.comb += [getattr(seq, n).eq(getattr(code, n)) for n in (
            "pmem_wr_addr", "pmem_wr_data", "pmem_wr_en", "ucode_wr_addr", "ucode_wr_data",
            "ucode_wr_en", "map_wr_addr", "map_wr_data", "map_wr_en")]
        m.d.comb += [seq.start.eq(run.start), seq.start_pc.eq(regs.start_pc)]

        # ---- run control, errors, status, counters -------------------------------------------
        te_busy = te.busy | res_skid.full | mov_skid.full   # (or a beat in a skid buffer)
        tensor_busy, vector_busy = tctrl.busy | te_busy | ~psum.idle, vctrl.busy | ve.busy
        m.d.comb += [
            run.ctrl.eq(regs.ctrl), run.ctrl_we.eq(regs.ctrl_we),
            run.irq_enable.eq(regs.irq_enable), run.watchdog_limit.eq(regs.watchdog_limit),
            run.seq_error.eq(seq.error), run.seq_err_status.eq(seq.err_status),
            run.seq_err_pc.eq(seq.err_pc), run.seq_done.eq(seq.done), run.seq_busy.eq(seq.busy),
            run.dma_error.valid.eq(dma.err_valid), run.dma_error.code.eq(dma.err_code),
            run.dma_error.addr.eq(dma.err_addr), run.dma_error.info.eq(dma.err_info),
            run.lut_error.eq(ve.error),
            run.engines_idle.eq(~dma.busy & ~tctrl.busy & ~te_busy & psum.idle & ~vctrl.busy &
                                ~ve.busy),
            run.dma_busy.eq(dma.busy),
            regs.busy.eq(run.running),
            *(getattr(regs, n).eq(getattr(run, n))
              for n in ("status", "err_code", "err_addr", "err_info", "err_count")),
            self.irq.eq(run.irq),
            regs.config0.eq(self._config_words()[0]),
            regs.config1.eq(self._config_words()[1]),
            counters.start.eq(run.start), counters.clear.eq(run.clear_counters),
            counters.running.eq(run.running),
            counters.tensor_busy.eq(tensor_busy), counters.vector_busy.eq(vector_busy),
            counters.dma_busy.eq(dma.busy),
            seq.dbg_addr.eq(counters.dbg_addr), counters.dbg_data.eq(seq.dbg_data),
            dma.clear_counters.eq(run.clear_counters | run.start),
            regs.perf_cycles_lo.eq(counters.cycles[:32]),
            regs.perf_cycles_hi.eq(counters.cycles[32:]),
            regs.perf_tensor_busy.eq(counters.tensor_cycles),
            regs.perf_vector_busy.eq(counters.vector_cycles),
            regs.perf_dma_busy.eq(counters.dma_cycles),
            regs.perf_dma_rd_bytes.eq(dma.rd_bytes),
            regs.perf_dma_wr_bytes.eq(dma.wr_bytes),
            regs.perf_instret.eq(counters.instret),
            regs.perf_sem_wait.eq(counters.sem_wait),
        ]

        # ---- activity -----------------------------------------------------------------------
        m.d.comb += [
            self.activity.running.eq(run.running),
            self.activity.seq_busy.eq(seq.busy),
            self.activity.dma.eq(dma.busy),
            self.activity.tensor.eq(tensor_busy),
            self.activity.vector.eq(vector_busy),
            self.activity.aborting.eq(run.aborting),
            self.activity.seq_wait.eq(counters.seq_wait),
        ]
        return m

    def _config_words(self):
        """The ``CONFIG0`` and ``CONFIG1`` register values (``sim/memmap.py``'s fields)."""
        fmask = sum(1 << int(f) for f in self._formats)
        return (self._rows | (self._cols << 8) | (self._dma_windows << 16) | (fmask << 24),
                ceil_log2(self._sbuf_depth) | (ceil_log2(self._psum_depth) << 8) |
                (ceil_log2(2 * self._pmem_depth) << 16) | (ceil_log2(2 * isa.UCODE_DEPTH) << 24))

    #: Record-check terms per slot (``Sequencer.check_terms``, ``RecordCheck.terms``).
    _RECORD_TERMS = RECORD_TERMS

    def _record_check(self, m, seq):
        """Add this core's :class:`RecordCheck` to ``m`` (submodule ``record_check``), wired
        to the sequencer ``seq``: an EMIT of an invalid TENSOR or VECTOR record traps
        ``ILLEGAL_FIELD`` (reported as ``ILLEGAL_INSTRUCTION`` at the instruction's PC) and
        nothing reaches the engines."""
        chk = m.submodules.record_check = RecordCheck(self._rows, self._cols, self._formats,
                                                      terms=self._RECORD_TERMS)
        m.d.comb += chk.slot_data.eq(seq.slot_data)
        for name in ("tensor", "vector"):
            m.d.comb += [
                getattr(seq, name + "_slot_terms").eq(getattr(chk, name + "_slot_terms")),
                getattr(seq, name + "_blank_terms").eq(getattr(chk, name + "_blank_terms")),
                getattr(chk, name + "_terms").eq(getattr(seq, name + "_terms")),
                getattr(seq, name + "_illegal").eq(getattr(chk, name + "_illegal")),
            ]
