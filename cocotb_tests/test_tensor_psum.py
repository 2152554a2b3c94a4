"""The tensor engine feeding PSUM: K = 3 x rows computed as three matmuls, the first
overwriting and the next two accumulating into the same PSUM words, for every configured format;
bit-exact against ``sim.tensor`` (``column_sums`` + ``PsumModel``), with random idles on the
inputs. A small wrapper (below) tags each result beat with its PSUM address the way the core's
tensor controller does: one ``tag`` per moving group, consumed with the group's last beat.
"""

import random

import numpy as np

import cocotb

from cocotb_tests.common.clock import reset, start_clock
from cocotb_tests.common.psum_readback import readback
from cocotb_tests.common.streams import StreamSource
from cocotb_tests.common.tb import logged_seed
from cocotb_tests.test_tensor import (Instr, _cfg, drive_moving,
                                      drive_stationary)
from sim.dtypes import Format
from sim.tensor import PsumModel, column_sums, random_operands


def _tag_payload(addr, acc, is_int, abits):
    return addr | (int(acc) << abits) | (int(is_int) << (abits + 1))


async def drive_tags(dut, tags, abits, rnd, idle_p=0.0):
    """The output tag of every tile, ``(address, accumulate, is_int)``, with random idles."""
    src = StreamSource(dut, "tag", rng=rnd, idle_p=idle_p)
    await src.send_all([_tag_payload(addr, acc, is_int, abits) for addr, acc, is_int in tags])


@cocotb.test()
async def test_split_k_accumulation(dut):
    """Each job: K = 3 x rows as three tiles into one PSUM region (overwrite, accumulate,
    accumulate), jobs back to back in rotating formats; then read all of PSUM back."""
    cfg = _cfg()
    rows, cols, depth = cfg["rows"], cfg["cols"], cfg["psum_depth"]
    abits = (depth - 1).bit_length()
    seed = logged_seed(dut)
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    start_clock(dut)
    for name in ("stationary__valid", "moving__valid", "moving_keep", "tag__valid",
                 "rd__en"):
        getattr(dut, name).value = 0
    await reset(dut)

    model = PsumModel(cols, depth)
    prog, tags = [], []
    for j, fmt in enumerate(cfg["formats"] * 2):
        K, M = 3 * rows, int(rng.integers(1, cols + 1))
        N = int(rng.integers(1, 3 * rows + 1))
        addr = int(rng.integers(0, depth))
        mode = "normal" if j < len(cfg["formats"]) else "special"
        st = random_operands(rng, fmt, (K, M), mode)
        mv = random_operands(rng, fmt, (K, N), mode)
        for t in range(3):
            sl = slice(t * rows, (t + 1) * rows)
            prog.append(Instr(fmt, st[sl], mv[sl], mode=mode))
            tags.append((addr, t > 0, fmt == Format.INT8))
            model.write(addr, column_sums(st[sl], mv[sl], fmt, rows=rows, cols=cols), t > 0,
                        fmt)
    cocotb.start_soon(drive_stationary(dut, cfg, prog, random.Random(seed + 1), 0.2))
    cocotb.start_soon(drive_moving(dut, cfg, prog, random.Random(seed + 2), 0.2))
    await drive_tags(dut, tags, abits, random.Random(seed + 3), 0.2)
    # Wait until the engine and PSUM are empty, then read every word.
    bad = await readback(dut, model)
    assert not bad, f"seed {seed}: {len(bad)} PSUM words differ:\n" + "\n".join(bad[:8])
    dut._log.info(f"seed {seed}: {len(prog) // 3} split-K jobs ({len(prog)} matmuls, "
                  f"{sum(i.N for i in prog)} beats) bit-exact in PSUM")


try:
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    from amaranth.hdl import Module, Mux, Signal
    from amaranth.lib import data, stream, wiring
    from amaranth.lib.wiring import In, Out

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb

    class EnginePsum(wiring.Component):
        """Test wrapper: TensorEngine -> PSUM, one ``tag`` {addr, accumulate, int} per group."""

        def __init__(self, rows, cols, formats, mul_stages, add_stages, psum_depth):
            from rtl.tensor.engine import TensorEngine, moving_layout, stationary_layout
            from rtl.tensor.psum import PSUM, PSUMReadSignature
            self.engine = TensorEngine(rows, cols, formats, mul_stages=mul_stages,
                                       add_stages=add_stages)
            self.psum = PSUM(cols, psum_depth, banks=2, add_stages=add_stages)
            abits = (psum_depth - 1).bit_length()
            super().__init__({
                "stationary": In(stream.Signature(stationary_layout(rows))),
                "moving": In(stream.Signature(moving_layout(rows))),
                "moving_keep": In(1),
                "tag": In(stream.Signature(data.StructLayout(
                    {"addr": abits, "accumulate": 1, "int": 1}))),
                "rd": In(PSUMReadSignature(cols, psum_depth)),
                "idle": Out(1),
            })

        def elaborate(self, platform):
            m = Module()
            m.submodules.engine = e = self.engine
            m.submodules.psum = p = self.psum
            wiring.connect(m, wiring.flipped(self.stationary), e.stationary)
            wiring.connect(m, wiring.flipped(self.moving), e.moving)
            wiring.connect(m, wiring.flipped(self.rd), p.rd)
            m.d.comb += e.moving_keep.eq(self.moving_keep)
            beat = Signal(p.wr.p.addr.shape())
            r, t = e.result, self.tag
            m.d.comb += [
                p.wr.valid.eq(r.valid & t.valid),
                p.wr.p.data.eq(r.p.data),
                p.wr.p.addr.eq(t.p.addr + beat),
                p.wr.p.accumulate.eq(t.p.accumulate),
                p.wr.p.last.eq(r.p.last),
                p.wr_int.eq(t.p.int),
                r.ready.eq(p.wr.ready & t.valid),
                t.ready.eq(r.valid & r.ready & r.p.last),
                self.idle.eq(p.idle & ~e.busy & ~t.valid),
            ]
            with m.If(r.valid & r.ready):
                m.d.sync += beat.eq(Mux(r.p.last, 0, beat + 1))
            return m

    CONFIGS = {
        "4x4": (4, 4, ["INT8", "FP8_E4M3", "FP8_E5M2", "FP8_E3M4", "BF16", "FP16"], 1, 2, ()),
        "8x8": (8, 8, ["INT8", "BF16", "FP8_E4M3"], 1, 1, (pytest.mark.long,)),
    }

    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("name", [pytest.param(n, marks=c[5]) for n, c in CONFIGS.items()])
    def test_tensor_psum(simulator, name):
        rows, cols, formats, ms, as_, _ = CONFIGS[name]
        cfg = {"rows": rows, "cols": cols, "formats": formats, "mul_stages": ms,
               "add_stages": as_, "psum_depth": 64}

        def make():
            return EnginePsum(rows, cols, {Format[f] for f in formats}, ms, as_, 64)
        run_cocotb(make, name=f"tensor_psum_{name}", config=cfg,
                   test_module="cocotb_tests.test_tensor_psum", simulator=simulator)
