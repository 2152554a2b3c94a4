"""Clock generation for the board tops: PLL parameter search (as ``ecppll``/``icepll`` do it)
and the Elaboratables that turn a board oscillator into the ``sync`` domain.

The searches are plain Python so that build plans need no tool; ``tests/test_fpga_plan.py``
checks the VCO/PFD ranges of the results, and the fpga_build test cross-checks them against
``yowasp-ecppll``/``yowasp-icepll``.
"""

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Elaboratable, Instance, Module, ResetSignal, Signal
from amaranth.lib.cdc import AsyncFFSynchronizer, ResetSynchronizer

from rtl.core.global_buffer import global_buffer

__all__ = ["ECP5PLLParams", "ICE40PLLParams", "ecp5_pll", "ice40_pll", "ECP5ClockGen",
           "ICE40ClockGen"]


@dataclass(frozen=True)
class ECP5PLLParams:
    fin: float
    fout: float
    clki_div: int
    clkfb_div: int
    clkop_div: int

    @property
    def fvco(self):
        return self.fout * self.clkop_div


@dataclass(frozen=True)
class ICE40PLLParams:
    fin: float
    fout: float
    divr: int
    divf: int
    divq: int
    filter_range: int

    @property
    def fvco(self):
        return self.fin / (self.divr + 1) * (self.divf + 1)


def ecp5_pll(fin, fout):
    """Dividers of an ECP5 EHXPLLL (feedback from CLKOP) giving ``fout`` Hz from ``fin`` Hz.

    Constraints (ECP5 datasheet, as ``ecppll`` applies them): PFD ``fin/CLKI_DIV`` 3.125 to
    400 MHz, VCO ``fout*CLKOP_DIV`` 400 to 800 MHz, output 3.125 to 400 MHz. Among the exact or
    nearest solutions the one with the VCO closest to 600 MHz wins.
    """
    if not 3.125e6 <= fout <= 400e6:
        raise ValueError(f"freq must be from 3.125 to 400 MHz on ECP5, not {fout / 1e6:g} MHz")
    best = None
    for clki_div in range(1, 129):
        fpfd = fin / clki_div
        if not 3.125e6 <= fpfd <= 400e6:
            continue
        for clkfb_div in range(1, 81):
            f = fpfd * clkfb_div
            for clkop_div in range(1, 129):
                fvco = f * clkop_div
                if not 400e6 <= fvco <= 800e6:
                    continue
                key = (abs(f - fout), abs(fvco - 600e6))
                if best is None or key < best[0]:
                    best = (key, ECP5PLLParams(fin, f, clki_div, clkfb_div, clkop_div))
    if best is None or best[0][0] > 0.01 * fout:
        raise ValueError(f"freq {fout / 1e6:g} MHz is not reachable from {fin / 1e6:g} MHz")
    return best[1]


def ice40_pll(fin, fout):
    """Dividers of an iCE40 SB_PLL40 in SIMPLE feedback giving ``fout`` Hz from ``fin`` Hz.

    ``fout = fin * (DIVF+1) / ((DIVR+1) * 2**DIVQ)``; PFD 10 to 133 MHz, VCO 533 to 1066 MHz,
    output 16 to 275 MHz (iCE40 family handbook, as ``icepll`` applies them).
    """
    if not 16e6 <= fout <= 275e6:
        raise ValueError(f"freq must be from 16 to 275 MHz on iCE40, not {fout / 1e6:g} MHz")
    best = None
    for divr in range(16):
        fpfd = fin / (divr + 1)
        if not 10e6 <= fpfd <= 133e6:
            continue
        for divf in range(128):
            fvco = fpfd * (divf + 1)
            if not 533e6 <= fvco <= 1066e6:
                continue
            for divq in range(1, 7):
                f = fvco / 2 ** divq
                key = abs(f - fout)
                if best is None or key < best[0]:
                    best = (key, divr, divf, divq, f, fpfd)
    if best is None or best[0] > 0.01 * fout:
        raise ValueError(f"freq {fout / 1e6:g} MHz is not reachable from {fin / 1e6:g} MHz")
    _, divr, divf, divq, f, fpfd = best
    filter_range = next(i + 1 for i, lim in enumerate((17e6, 26e6, 44e6, 66e6, 101e6, 1e12))
                        if fpfd < lim)
    return ICE40PLLParams(fin, f, divr, divf, divq, filter_range)


class ECP5ClockGen(Elaboratable):
    """``sync`` at ``params.fout`` from the oscillator through an EHXPLLL; reset held until the
    PLL locks (and while ``ext_rst`` is high), released synchronously.

    The synchronised reset reaches the flip-flops through a DCCA, on one of the global
    networks the clock uses: nextpnr promotes only clocks to them by itself, and the reset's
    fan-out (every flip-flop with a reset) is too wide for general routing in one cycle."""

    def __init__(self, params, *, clk_pin="clk25", ext_rst=None):
        self.params = params
        self.clk_pin = clk_pin
        self.ext_rst = ext_rst

    def elaborate(self, platform):
        m = Module()
        p = self.params
        clk_in = platform.request(self.clk_pin, dir="i").i
        locked = Signal()
        # The ``sync`` domain itself is defined by the board top (Amaranth 0.6 wants domains
        # defined above their users); this drives its clock and reset.
        clk = Signal()
        m.d.comb += ClockSignal("sync").eq(clk)
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{p.fin / 1e6:g}",
            a_FREQUENCY_PIN_CLKOP=f"{p.fout / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p.clki_div, p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p.clkop_div,
            p_CLKOP_CPHASE=p.clkop_div - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=p.clkfb_div,
            i_RST=0, i_STDBY=0, i_CLKI=clk_in, o_CLKOP=clk, i_CLKFB=clk,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked,
        )
        rst = ~locked if self.ext_rst is None else (~locked | self.ext_rst)
        # Asserted asynchronously, released on a clock edge (what ResetSynchronizer does), then
        # onto a global network.
        rst_local = Signal(init=1)
        m.submodules.rst_sync = AsyncFFSynchronizer(rst, rst_local, o_domain="sync")
        m.d.comb += ResetSignal("sync").eq(global_buffer(m, "rst_buf", rst_local, platform))
        platform.add_clock_constraint(clk, p.fout)
        return m


class ICE40ClockGen(Elaboratable):
    """``sync`` at ``params.fout`` from the oscillator pad through an SB_PLL40_PAD."""

    def __init__(self, params, *, clk_pin="clk12", ext_rst=None):
        self.params = params
        self.clk_pin = clk_pin
        self.ext_rst = ext_rst

    def elaborate(self, platform):
        m = Module()
        p = self.params
        clk_pad = platform.request(self.clk_pin, dir="-")
        locked = Signal()
        clk = Signal()
        m.d.comb += ClockSignal("sync").eq(clk)
        m.submodules.pll = Instance(
            "SB_PLL40_PAD",
            p_FEEDBACK_PATH="SIMPLE", p_DIVR=p.divr, p_DIVF=p.divf, p_DIVQ=p.divq,
            p_FILTER_RANGE=p.filter_range,
            i_PACKAGEPIN=clk_pad.io, i_RESETB=1, i_BYPASS=0,
            o_PLLOUTGLOBAL=clk, o_LOCK=locked,
        )
        rst = ~locked if self.ext_rst is None else (~locked | self.ext_rst)
        m.submodules.rst_sync = ResetSynchronizer(rst, domain="sync")
        platform.add_clock_constraint(clk, p.fout)
        return m
