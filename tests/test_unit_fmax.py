"""scripts.unit_fmax: the register harness passes every port bit through its chains, bad
options are refused, and (marked fpga_build) a small unit places and routes."""

import gc
import warnings

import pytest
from amaranth.hdl import Module, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from scripts.unit_fmax import PRESETS, RegisteredPorts, _factory, main, unit_fmax


class _Xor(wiring.Component):
    """o = a ^ b, plus a 1-bit output: a known function to see through the harness."""

    def __init__(self):
        super().__init__({"a": In(5), "b": In(3), "o": Out(5), "p": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.o.eq(self.a ^ self.b), self.p.eq(self.a.xor())]
        return m


def test_harness_shifts_inputs_in_and_outputs_out():
    dut = _Xor()
    top = RegisteredPorts(dut)
    a, b = 0b10110, 0b011
    # Input chain = Cat(a, b) (a low); din enters bit 0 and moves up, so the last bit shifted
    # in ends at bit 0: shift the 8 bits most significant first.
    word = a | b << 5
    seen = []

    async def bench(ctx):
        for i in reversed(range(8)):
            ctx.set(top.din, (word >> i) & 1)
            await ctx.tick()
        assert ctx.get(dut.a) == a and ctx.get(dut.b) == b
        await ctx.tick()                    # outputs captured
        ctx.set(top.load, 1)
        await ctx.tick()                    # copied into the output chain
        ctx.set(top.load, 0)
        for _ in range(6):
            seen.append(ctx.get(top.dout))
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    expect = (a ^ b) | (bin(a).count("1") & 1) << 5
    assert sum(bit << i for i, bit in enumerate(seen)) == expect


def test_bad_options():
    with warnings.catch_warnings():          # the refused harness is never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(TypeError, match="Component"):
            RegisteredPorts(object())
        gc.collect()
    with pytest.raises(ValueError, match="freq"):
        unit_fmax(_Xor, "xor", freq=0)
    with pytest.raises(ValueError, match="seed"):
        unit_fmax(_Xor, "xor", seed=-1)
    with pytest.raises(ValueError, match="router must be one of router1, router2"):
        unit_fmax(_Xor, "xor", router="router3")
    with pytest.raises(ValueError, match="module:Class"):
        _factory("rtl.arith.fp32_add", {})
    with pytest.raises(SystemExit):
        main([])                            # neither a component nor a preset


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_elaborate(preset):
    from amaranth.back import rtlil
    make, _ = _factory(*PRESETS[preset])
    top = RegisteredPorts(make())
    assert "module \\top" in rtlil.convert(top, name="top", ports=top.ports())


@pytest.mark.fpga_build
def test_place_and_route_small_unit(tmp_path):
    from rtl.arith.fp32_add import FP32Adder
    report = unit_fmax(lambda: FP32Adder(stages=4), "fp32_add4_test")
    assert report["fmax_mhz"] > 20
    assert report["critical_path"]["total_ns"] > 0
    assert report["resources"]["TRELLIS_FF"] > 64
