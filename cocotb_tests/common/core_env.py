"""Test environment of the whole core under cocotb: clock, reset, an AXI4-Lite master for the
host, an AXI RAM (cocotbext-axi) as the external memory with random latency, back-pressure and
error regions, and the host driver on top.

    env = CoreEnv(dut, seed=seed, latency=(0, 6), pause=0.3)
    await env.reset()
    host = env.host()            # sim.host driver over the cocotb AXI-Lite transport

The AXI memory model records every access (``env.accesses``: (kind, byte address, length)) so
tests can check that nothing outside the allowed windows is touched.
"""

import random

import numpy as np

from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from .axi_transport import axi_models
from .clock import reset as _reset
from .clock import settle_comb, start_clock

__all__ = ["CoreEnv", "pause_pattern", "AXIL_PREFIX", "AXI_PREFIX"]

#: Generated port prefixes of the core's buses (``<port>__<member>``).
AXIL_PREFIX = "axil_"
AXI_PREFIX = "axi_"


def pause_pattern(rng, probability):
    """An endless generator of pause flags: True with ``probability`` (a back-pressure or idle
    pattern for a cocotbext-axi channel)."""
    while True:
        yield rng.random() < probability


class CoreEnv:
    """Everything a core test needs around the DUT.

    Parameters
    ----------
    dut : the cocotb handle of the generated core (top ``top``).
    seed : int
        Seeds the latency and pause patterns (log it).
    mem_size : int
        Bytes of external memory.
    latency : (int, int)
        Each read beat / write beat of the AXI RAM waits a random number of cycles in this range.
    pause : float
        Probability that a channel of the AXI RAM pauses on a cycle (back-pressure on AR/AW/W,
        idle cycles on R/B).
    """

    def __init__(self, dut, *, seed=0, mem_size=1 << 20, latency=(0, 0), pause=0.0):
        self.dut = dut
        self.seed = seed
        self.rng = random.Random(seed)
        self.latency = latency
        self.error_ranges = []
        self.accesses = []
        self.mem_size = mem_size
        self.pause = pause
        self.axil = None
        self.ram = None
        start_clock(dut)
        dut.rst.value = 1
        dut._log.info("CoreEnv seed=%d latency=%s pause=%s", seed, latency, pause)

    def _make_models(self):
        # Created while reset is visibly asserted, so that the models wait for its release
        # instead of sampling the not-yet-reset (X) outputs.
        dut = self.dut
        # Quiet unless AXI_LOG=1 (``axi_transport.axi_models``).
        self.axil, self.ram = axi_models(dut, lambda: (
            AxiLiteMaster(AxiLiteBus.from_prefix(dut, AXIL_PREFIX), dut.clk, dut.rst),
            AxiRam(AxiBus.from_prefix(dut, AXI_PREFIX), dut.clk, dut.rst, size=self.mem_size)))
        self._hook_ram()
        self.set_pause(self.pause)

    def set_pause(self, probability):
        """Random back-pressure / idle cycles on every channel of the AXI RAM."""
        for ch in (self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                   self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                   self.ram.write_if.b_channel):
            if probability > 0:
                ch.set_pause_generator(pause_pattern(random.Random(self.rng.random()),
                                                     probability))
            else:
                ch.clear_pause_generator()

    def _in_error(self, addr, length):
        return any(lo < addr + length and addr < hi for lo, hi in self.error_ranges)

    def _hook_ram(self):
        env, ram = self, self.ram
        clk = self.dut.clk

        async def delay():
            lo, hi = env.latency
            if hi > 0:
                n = env.rng.randint(lo, hi)
                if n:
                    await ClockCycles(clk, n)

        async def read(address, length):
            await delay()
            address %= ram.size
            env.accesses.append(("r", address, length))
            if env._in_error(address, length):
                raise IOError(f"read error at {address:#x}")
            return ram.read(address, length)

        async def write(address, data):
            await delay()
            address %= ram.size
            env.accesses.append(("w", address, len(data)))
            if env._in_error(address, len(data)):
                raise IOError(f"write error at {address:#x}")
            ram.write(address, data)

        ram.read_if._read = read
        ram.write_if._write = write

    async def reset(self, cycles=4):
        """Synchronous reset of the core (the AXI models reset with it; created on the first
        call)."""
        if self.ram is None:
            self.dut.rst.value = 1
            await settle_comb(self.dut)
            await ClockCycles(self.dut.clk, 2)
            self._make_models()
        await _reset(self.dut, cycles)

    async def cycles(self, n):
        await ClockCycles(self.dut.clk, n)

    def host(self, **kwargs):
        """The host driver (``sim.host``) over the cocotb AXI-Lite transport; external memory
        is the AXI RAM."""
        from sim.host import Host
        from .axi_transport import AxiLiteTransport
        return Host(AxiLiteTransport(self.dut, master=self.axil, irq="irq"), memory=self.ram,
                    **kwargs)

    # External memory helpers (byte addresses, little-endian).
    def write_mem(self, addr, data):
        self.ram.write(addr, bytes(data))

    def read_mem(self, addr, length):
        return self.ram.read(addr, length)


# ---------------------------------------------------------------------------------------------
# Programs (assembly text for sim.asm) shared by the core tests, the benchmark and the profiler
# ---------------------------------------------------------------------------------------------

def _li(reg, value):
    return f"li r{reg}, {int(value) & 0xFFFFFFFF:#x}"


def _tiled_matmuls(*, P, C, KT, MT, N, fmt, w_sb, x_sb):
    """The matmuls of M tile ``mt`` accumulate K tile ``t`` (W at ``w_sb + t*MT*C + mt*C``, X
    at ``x_sb + t*N``) into PSUM ``mt*N`` (semaphore 1); the first M tile's wait for each K
    tile's two loads (semaphore 0). ``r20`` holds N."""
    L = []
    for mt in range(MT):
        for t in range(KT):
            if mt == 0:
                L.append(f"waiti 0, {2 * (t + 1)}")
            L += [_li(12, w_sb + t * MT * C + mt * C), _li(13, x_sb + t * N), _li(14, mt * N),
                  f"matmul r14, r12, r13, r20, k={P}, m={C}, fmt={fmt}, "
                  f"accumulate={int(t > 0)}, sem=1, sem_en=1"]
    return L


def gemm_program(*, P, C, KT, MT, N, fmt="bf16", eb=2, w_ext, x_ext, o_ext, w_sb=0,
                 x_sb=None, o_sb=None):
    """``O[MT*C, N] = W[KT*P, MT*C].T @ X[KT*P, N]`` on a ``P x C`` array, tiled: K tiles
    accumulate in PSUM (first overwrites), M tiles go to separate PSUM regions.

    External memory (row-major, ``eb`` bytes per element): W at ``w_ext``, X at ``x_ext``,
    O (FP32) at ``o_ext``. SBUF: W tile t at ``w_sb + t*MT*C`` (partition = row within the
    tile), X tile t at ``x_sb + t*N``, O at ``o_sb + mt*N``. The loads of all tiles are issued
    first; each matmul waits only for the tiles it needs, so DMA and matmuls overlap; each
    copy waits for its M tile's matmuls, each store for its copy.
    """
    M = MT * C
    x_sb = KT * M if x_sb is None else x_sb
    o_sb = x_sb + KT * N if o_sb is None else o_sb
    L = [_li(2, eb), _li(3, 0), _li(20, N)]
    # Loads: W tile t then X tile t (sem 0 counts both), so tile t is in after 2(t+1).
    for t in range(KT):
        L += [_li(1, M | 1 << 16), _li(4, M * eb), _li(10, w_ext + t * P * M * eb),
              _li(11, w_sb + t * M),
              f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt={fmt}, sem=0, sem_en=1"]
        L += [_li(1, N | 1 << 16), _li(4, N * eb), _li(10, x_ext + t * P * N * eb),
              _li(11, x_sb + t * N),
              f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt={fmt}, sem=0, sem_en=1"]
    L += _tiled_matmuls(P=P, C=C, KT=KT, MT=MT, N=N, fmt=fmt, w_sb=w_sb, x_sb=x_sb)
    L += [_li(1, N | 1 << 16), _li(2, 4), _li(4, N * 4)]
    for mt in range(MT):
        L += [f"waiti 1, {(mt + 1) * KT}", _li(15, mt * N), _li(16, o_sb + mt * N),
              "copy r16, r15, r0, r20, a_space=psum, in_fmt=fp32, out_fmt=fp32, sem=2, sem_en=1",
              f"waiti 2, {mt + 1}", _li(10, o_ext + mt * C * N * 4), _li(11, o_sb + mt * N),
              f"dma_st r1, r10, r11, part_start=0, part_count={C}, fmt=fp32, sem=3, sem_en=1"]
    L += [f"waiti 3, {MT}", "halt"]
    return "\n".join(L) + "\n"


def split_words(program):
    """64-bit instruction words to the PROG window's 32-bit words (low word first)."""
    out = []
    for w in program:
        out += [int(w) & 0xFFFFFFFF, (int(w) >> 32) & 0xFFFFFFFF]
    return out


async def run_program(env, host, words, *, timeout=200_000, windows=((0, None, True, True),)):
    """Load ``words`` (64-bit), open the DMA windows, start, wait; returns the cycle count."""
    for i, (base, limit, rd, wr) in enumerate(windows):
        await host.set_window(i, base, env.ram.size - 1 if limit is None else limit, rd, wr)
    await host.load_program_words(split_words(words))
    await host.start(0)
    st = await host.wait(timeout_cycles=timeout, poll_cycles=32)
    return st


def f32_bits(x):
    import struct
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def table_words(name, bank, depth):
    """The (address, data) cfg writes of a shipped LUT table for ``bank``, flattened as the
    TABLE record reads them from SBUF partition 0 (address, data, address, data...)."""
    from sim.tables import table
    out = []
    for a, d in table(name, depth).writes(bank):
        out += [int(a), int(d) & 0xFFFFFFFF]
    return out


def _load_table(L, *, ext, sb, nwords, sem):
    """DMA ``nwords`` 32-bit words from ``ext`` into SBUF partition 0 at ``sb``, then TABLE."""
    L += [_li(1, nwords | 1 << 16), _li(2, 4), _li(3, 0), _li(4, 0), _li(10, ext), _li(11, sb),
          f"dma_ld r1, r10, r11, part_start=0, part_count=1, fmt=int32, sem={sem}, sem_en=1",
          f"waiti {sem}, 1", _li(30, sb), _li(31, nwords // 2),
          f"table_ld r30, r31, sem={sem}, sem_en=1", f"waiti {sem}, 2", f"semset {sem}, 0"]


def mlp_program(*, P, C, KT, MT, N, t_ext, t_words, w_ext, x_ext, b_ext, y_ext, seed,
                sbuf_depth):
    """``Y^T = gelu(W^T X^T + b)``: W [KT*P, MT*C] BF16, X^T [KT*P, N] BF16, b [MT*C] FP32,
    Y^T [MT*C, N] BF16 with stochastic rounding (seeded). The gelu table (``t_words`` words at
    ``t_ext``) is loaded into LUT bank 0 by TABLE_LD; the bias is broadcast along N by a DMA
    with a zero inner stride, added by TT, then ACT applies gelu and rounds to BF16 (SR).

    Order for overlap: the operand loads go first, then the table's DMA; every matmul only
    waits for its own tiles, and the table is written into the LUT while the matmuls run.
    SBUF: table at the top of partition 0, W/X tiles from 0, then bias, H (FP32), Y.
    """
    M = MT * C
    t_sb = sbuf_depth - t_words
    w_sb, x_sb = 0, KT * M
    b_sb = x_sb + KT * N
    h_sb = b_sb + MT * N
    y_sb = h_sb + MT * N
    assert y_sb + MT * N <= t_sb, "SBUF too small for this MLP"
    L = [_li(2, 2), _li(3, 0), _li(20, N)]
    for t in range(KT):
        L += [_li(1, M | 1 << 16), _li(4, M * 2), _li(10, w_ext + t * P * M * 2),
              _li(11, w_sb + t * M),
              f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=0, sem_en=1"]
        L += [_li(1, N | 1 << 16), _li(4, N * 2), _li(10, x_ext + t * P * N * 2),
              _li(11, x_sb + t * N),
              f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=0, sem_en=1"]
    # Bias tile mt: SBUF[m][b_sb + mt*N + n] = b[mt*C + m] (inner stride 0 broadcasts).
    L += [_li(1, N | 1 << 16), _li(2, 0), _li(4, 4)]
    for mt in range(MT):
        L += [_li(10, b_ext + mt * C * 4), _li(11, b_sb + mt * N),
              f"dma_ld r1, r10, r11, part_start=0, part_count={C}, fmt=fp32, sem=5, sem_en=1"]
    L += [_li(1, t_words | 1 << 16), _li(2, 4), _li(4, 0), _li(10, t_ext), _li(11, t_sb),
          "dma_ld r1, r10, r11, part_start=0, part_count=1, fmt=int32, sem=4, sem_en=1"]
    L += _tiled_matmuls(P=P, C=C, KT=KT, MT=MT, N=N, fmt="bf16", w_sb=w_sb, x_sb=x_sb)
    L += ["waiti 4, 1", _li(30, t_sb), _li(31, t_words // 2), "table_ld r30, r31",
          _li(30, seed), "seed_ld r30",
          _li(1, N | 1 << 16), _li(2, 2), _li(4, N * 2), _li(26, f32_bits(1.0)), _li(27, 0),
          f"waiti 5, {MT}"]
    for mt in range(MT):
        # AluOp.ADD = 1 (sim.vector.AluOp; the vector engine's code, see docs/isa.md).
        L += [f"waiti 1, {(mt + 1) * KT}", _li(15, mt * N), _li(16, h_sb + mt * N),
              _li(17, b_sb + mt * N),
              "tt r16, r15, r17, r20, alu=1, a_space=psum, b_space=sbuf, in_fmt=fp32, "
              "out_fmt=fp32, sem=2, sem_en=1",
              f"waiti 2, {2 * mt + 1}", _li(18, y_sb + mt * N),
              "act r18, r16, r26, r20, func=0, in_fmt=fp32, out_fmt=bf16, rnd=sr, sem=2, "
              "sem_en=1",
              f"waiti 2, {2 * mt + 2}", _li(10, y_ext + mt * C * N * 2), _li(11, y_sb + mt * N),
              f"dma_st r1, r10, r11, part_start=0, part_count={C}, fmt=bf16, sem=3, sem_en=1"]
    L += [f"waiti 3, {MT}", "halt"]
    return "\n".join(L) + "\n"


def attention_program(*, P, C, KT, d, e_ext, e_words, r_ext, r_words, qt_ext, kt_ext, v_ext,
                      tmp_ext, o_ext, sbuf_depth):
    """One attention head, ``O = softmax(Q K^T / sqrt(d)) V``, S_q = C queries, S_k = KT*P
    keys, head size d (<= C). Inputs in external memory (BF16): Q^T [d, S_q], K^T [d, S_k],
    V [S_k, d]; output O^T [d, S_q] in FP32.

    Scores land in PSUM with one query per partition; ACT applies exp (LUT bank 0) with the
    1/sqrt(d) scale and accumulates the row sums; ACC_RD reads them, ACT with the reciprocal
    table (bank 1) inverts them; the per-query factor is broadcast along the keys by a DMA
    round trip through ``tmp_ext`` (zero inner stride), TT multiplies, rounding P to BF16;
    a DMA round trip transposes P so the keys are on partitions for ``P @ V`` (K tiles
    accumulate in PSUM); COPY and DMA store O^T.
    """
    Sq, Sk = C, KT * P
    e_sb = sbuf_depth - e_words
    r_sb = e_sb - r_words
    qt_sb, kt_sb = 0, C
    v_sb = kt_sb + Sk
    ex_sb = v_sb + KT * d
    sum_sb = ex_sb + Sk
    rc_sb = sum_sb + 1
    rb_sb = rc_sb + 1
    p_sb = rb_sb + Sk
    pt_sb = p_sb + Sk
    o_sb = pt_sb + KT * Sq
    assert o_sb + Sq <= r_sb, "SBUF too small for this attention head"
    P_TMP, R_TMP = tmp_ext, tmp_ext + 0x1000
    L = []
    _load_table(L, ext=e_ext, sb=e_sb, nwords=e_words, sem=4)
    _load_table(L, ext=r_ext, sb=r_sb, nwords=r_words, sem=4)
    L += [_li(2, 2), _li(3, 0)]
    L += [_li(1, Sq | 1 << 16), _li(4, Sq * 2), _li(10, qt_ext), _li(11, qt_sb),
          f"dma_ld r1, r10, r11, part_start=0, part_count={d}, fmt=bf16, sem=0, sem_en=1",
          _li(1, Sk | 1 << 16), _li(4, Sk * 2), _li(10, kt_ext), _li(11, kt_sb),
          f"dma_ld r1, r10, r11, part_start=0, part_count={d}, fmt=bf16, sem=0, sem_en=1",
          _li(1, d | 1 << 16), _li(4, d * 2)]
    for t in range(KT):
        L += [_li(10, v_ext + t * P * d * 2), _li(11, v_sb + t * d),
              f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=0, sem_en=1"]
    L += [f"waiti 0, {2 + KT}",
          _li(12, qt_sb), _li(13, kt_sb), _li(14, 0), _li(20, Sk),
          f"matmul r14, r12, r13, r20, k={d}, m={Sq}, fmt=bf16, accumulate=0, sem=1, sem_en=1",
          "waiti 1, 1",
          _li(26, f32_bits(1.0 / np.sqrt(d))), _li(27, 0), _li(16, ex_sb),
          "act r16, r14, r26, r20, func=0, a_space=psum, in_fmt=fp32, out_fmt=fp32, acc=1, "
          "sem=2, sem_en=1",
          "waiti 2, 1", _li(17, sum_sb),
          "acc_rd r17, out_fmt=fp32, sem=2, sem_en=1", "waiti 2, 2",
          _li(26, f32_bits(1.0)), _li(18, rc_sb), _li(21, 1),
          "act r18, r17, r26, r21, func=1, in_fmt=fp32, out_fmt=fp32, sem=2, sem_en=1",
          "waiti 2, 3",
          # Broadcast 1/sum along the keys through external memory.
          _li(1, 1 | 1 << 16), _li(2, 4), _li(4, 4), _li(10, R_TMP), _li(11, rc_sb),
          f"dma_st r1, r10, r11, part_start=0, part_count={Sq}, fmt=fp32, sem=3, sem_en=1",
          "waiti 3, 1",
          _li(1, Sk | 1 << 16), _li(2, 0), _li(11, rb_sb),
          f"dma_ld r1, r10, r11, part_start=0, part_count={Sq}, fmt=fp32, sem=3, sem_en=1",
          "waiti 3, 2", _li(19, p_sb), _li(22, rb_sb),
          # AluOp.MUL = 4 (sim.vector.AluOp).
          "tt r19, r16, r22, r20, alu=4, in_fmt=fp32, out_fmt=bf16, rnd=rne, sem=2, sem_en=1",
          "waiti 2, 4",
          # Transpose P through external memory: keys onto partitions.
          _li(1, Sk | 1 << 16), _li(2, 2), _li(4, Sk * 2), _li(10, P_TMP), _li(11, p_sb),
          f"dma_st r1, r10, r11, part_start=0, part_count={Sq}, fmt=bf16, sem=3, sem_en=1",
          "waiti 3, 3", _li(1, Sq | 1 << 16), _li(2, Sk * 2), _li(4, 2)]
    for t in range(KT):
        L += [_li(10, P_TMP + t * P * 2), _li(11, pt_sb + t * Sq),
              f"dma_ld r1, r10, r11, part_start=0, part_count={P}, fmt=bf16, sem=3, sem_en=1"]
    L += [f"waiti 3, {3 + KT}", _li(14, Sk), _li(20, Sq)]
    for t in range(KT):
        L += [_li(12, v_sb + t * d), _li(13, pt_sb + t * Sq),
              f"matmul r14, r12, r13, r20, k={P}, m={d}, fmt=bf16, accumulate={int(t > 0)}, "
              f"sem=1, sem_en=1"]
    L += [f"waiti 1, {1 + KT}", _li(16, o_sb),
          "copy r16, r14, r0, r20, a_space=psum, in_fmt=fp32, out_fmt=fp32, sem=2, sem_en=1",
          "waiti 2, 5",
          _li(1, Sq | 1 << 16), _li(2, 4), _li(4, Sq * 4), _li(10, o_ext), _li(11, o_sb),
          f"dma_st r1, r10, r11, part_start=0, part_count={d}, fmt=fp32, sem=3, sem_en=1",
          f"waiti 3, {4 + KT}", "halt"]
    return "\n".join(L) + "\n"
