"""cocotb tests of ``rtl.arith.int_mac.IntMAC`` (INT8 multiply, INT32 accumulate) against
``sim.formats.int32_add(c, mul_exact(a, b, INT8))``.

Every INT8 x INT8 pair, each with a random INT32 accumulator drawn near the wrap-around
points (+-2**31) or anywhere, plus seeded random vectors; pipelined configurations stall on
random cycles.
"""

import numpy as np

import cocotb

from cocotb_tests.common.config import dut_config
from cocotb_tests.test_arith_common import LANES, check_vectors, seed
from sim.dtypes import Format
from sim.formats import int32_add, mul_exact


@cocotb.test()
async def int_mac_all_pairs(dut):
    cfg = dut_config()
    s = seed()
    rng = np.random.default_rng(s)
    x = np.arange(256, dtype=np.uint32)
    a = np.concatenate([np.repeat(x, 256), rng.integers(0, 256, cfg["n_random"])])
    b = np.concatenate([np.tile(x, 256), rng.integers(0, 256, cfg["n_random"])])
    n = len(a)
    near = rng.choice(np.array([0x7FFFFFFF, 0x80000000, 0, 0xFFFFFFFF], dtype=np.int64), n)
    c = np.where(rng.random(n) < 0.5, near + rng.integers(-20000, 20000, n),
                 rng.integers(0, 1 << 32, n, dtype=np.int64)) & 0xFFFFFFFF
    c = c.astype(np.uint32)
    exp = int32_add(c, mul_exact(a, b, Format.INT8))
    await check_vectors(dut, lanes=cfg["lanes"], stages=cfg["stages"],
                        inputs={"a": (a, 8), "b": (b, 8), "c": (c, 32)}, expected=exp,
                        en_prob=cfg.get("en_prob", 1.0), rng=rng, label=f"seed={s}")
    cocotb.log.info("int_mac: %d vectors, 0 mismatches", n)


def _wrapper(lanes, stages, dsp_regs=False, ecp5=False):
    from rtl.arith.int_mac import IntMAC
    from rtl.arith.lanes import ArithLanes
    lanes = ArithLanes(lambda: IntMAC(stages, dsp_regs=dsp_regs), lanes,
                       inputs={"a": 8, "b": 8, "c": 32}, outputs={"o": 32}, shared={"en": 1})
    if ecp5:
        from cocotb_tests.test_tensor import _OnECP5
        return _OnECP5(lanes)
    return lanes


try:
    import pytest

    from cocotb_tests.common.runner import SIMULATORS, run_cocotb
    from cocotb_tests.test_tensor import MULT18X18D_MODEL

    def _test(simulator, stages, en_prob, n_random, dsp_regs=False, ecp5=False):
        lanes = LANES[simulator]
        cfg = {"lanes": lanes, "stages": stages, "en_prob": en_prob, "n_random": n_random}
        name = f"int_mac_l{lanes}_s{stages}"
        if dsp_regs:
            cfg.update(dsp_regs=True, ecp5=ecp5)
            name += "_dsp" + ("_ecp5" if ecp5 else "")
        run_cocotb(lambda: _wrapper(lanes, stages, dsp_regs, ecp5), name=name,
                   config=cfg, test_module="cocotb_tests.test_arith_int_mac",
                   simulator=simulator, extra_sources=[MULT18X18D_MODEL] if ecp5 else ())

    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_int_mac(simulator):
        """Every INT8 pair plus 40,000 random, 2 stages, en low 30% of cycles."""
        _test(simulator, 2, 0.7, 40_000)

    @pytest.mark.parametrize("simulator", SIMULATORS)
    @pytest.mark.parametrize("ecp5", [False, True], ids=["fabric", "ecp5"])
    @pytest.mark.parametrize("stages", [1, 2])
    def test_int_mac_dsp_regs(simulator, ecp5, stages):
        """``dsp_regs``: every INT8 pair plus 20,000 random, en low 30% of cycles; ``ecp5``
        simulates the ECP5 netlist with the behavioural MULT18X18D."""
        _test(simulator, stages, 0.7, 20_000, dsp_regs=True, ecp5=ecp5)

    def test_int_mac_dsp_regs_parameter():
        import gc
        import warnings
        from amaranth.hdl import UnusedElaboratable
        from rtl.arith.int_mac import IntMAC
        with warnings.catch_warnings():      # (the refused units are never elaborated)
            warnings.simplefilter("ignore", UnusedElaboratable)
            with pytest.raises(TypeError, match=r"^dsp_regs must be a bool, not 1$"):
                IntMAC(2, dsp_regs=1)
            with pytest.raises(ValueError, match=r"^dsp_regs must be False when stages is 0"):
                IntMAC(0, dsp_regs=True)
            mac = IntMAC(1, dsp_regs=True)
            assert (mac.dsp_regs, mac.latency) == (True, 1)
            gc.collect()

    @pytest.mark.long
    @pytest.mark.parametrize("stages", [0, 1])
    @pytest.mark.parametrize("simulator", SIMULATORS)
    def test_int_mac_long(simulator, stages):
        _test(simulator, stages, 0.8, 1_000_000)
except ImportError:  # pragma: no cover - cocotb imports this module without pytest
    pass
