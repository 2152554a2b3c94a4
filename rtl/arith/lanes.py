"""Many copies of an arithmetic block side by side with packed ports: the throughput wrapper of
the testbenches (``cocotb_tests/test_arith_*.py``), which drive one wide integer per port per
cycle instead of many small signals."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int

__all__ = ["ArithLanes", "MAX_LANES"]

#: The most copies of one block (the testbenches' throughput wrapper).
MAX_LANES = 1024


class ArithLanes(wiring.Component):
    """``lanes`` instances of ``factory()`` with every port packed, lane 0 in the low bits.

    Parameters
    ----------
    factory : callable
        Returns one block (an arithmetic component of ``rtl.arith``).
    lanes : int
        Number of copies, at least 1.
    inputs, outputs : dict of str to int
        Per-lane data ports and their widths; each becomes one packed port of
        ``width * lanes`` bits with the same name.
    shared : dict of str to int
        Ports driven by one signal for all lanes (e.g. ``{"en": 1}``).

    Members
    -------
    One port per name in ``inputs``, ``outputs`` and ``shared`` (``en`` defaults to 1).
    """

    def __init__(self, factory, lanes, *, inputs, outputs, shared=None):
        check_int("lanes", lanes, 1, MAX_LANES)
        self._factory = factory
        self._lanes = lanes
        self._inputs = dict(inputs)
        self._outputs = dict(outputs)
        self._shared = dict(shared or {})
        sig = {n: In(w * lanes) for n, w in self._inputs.items()}
        sig.update({n: In(w, init=1 if n == "en" else 0) for n, w in self._shared.items()})
        sig.update({n: Out(w * lanes) for n, w in self._outputs.items()})
        super().__init__(sig)

    @property
    def lanes(self):
        return self._lanes

    def elaborate(self, platform):
        m = Module()
        for i in range(self._lanes):
            unit = m.submodules[f"lane{i}"] = self._factory()
            for n, w in self._inputs.items():
                m.d.comb += getattr(unit, n).eq(getattr(self, n)[w * i:w * (i + 1)])
            for n in self._shared:
                m.d.comb += getattr(unit, n).eq(getattr(self, n))
            for n, w in self._outputs.items():
                m.d.comb += getattr(self, n)[w * i:w * (i + 1)].eq(getattr(unit, n))
        return m
