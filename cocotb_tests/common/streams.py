"""Stream testbench components shared by the unit tests: a source, a sink, a protocol monitor
and a scoreboard for Amaranth ``lib.stream`` ports, with seeded random stalls.

An Amaranth stream port ``name`` appears in the generated Verilog as ``name__valid``,
``name__ready`` and ``name__payload``. The components follow one timing discipline: inputs
are set after a rising edge, the handshake is sampled in the ``ReadOnly`` phase before the
next rising edge, and a beat transfers at that edge when ``valid`` and ``ready`` were both 1.

    rng = seeded_rng(dut)                       # logs the seed to replay a failure
    src = StreamSource(dut, "moving", rng=rng, idle_p=0.3)
    sink = StreamSink(dut, "result", rng=rng, ready_p=0.6)
    mon = StreamMonitor(dut, "result")          # valid held and payload stable until taken
    cocotb.start_soon(src.send_all(beats))
    got = await sink.collect(len(beats))
    Scoreboard("result", fmt=hex).compare(got, expected)
    mon.check()

Protocol checked by :class:`StreamMonitor` (the ``amaranth.lib.stream`` contract): once
``valid`` is 1 it stays 1 and ``payload`` keeps its value until the beat is taken.
"""

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common.tb import logged_seed

__all__ = ["seeded_rng", "StreamSource", "StreamSink", "StreamMonitor", "Scoreboard"]


def seeded_rng(dut=None, offset=0):
    """A ``random.Random`` seeded from the run's seed (``COCOTB_RANDOM_SEED``) plus
    ``offset``; the seed and the command line to replay it are logged (:func:`logged_seed`)."""
    return random.Random(logged_seed(dut, offset))


class _StreamPort:
    """The handles of stream port ``name`` (``valid``, ``ready``, ``payload``) and its clock
    (default ``dut.clk``); ``AttributeError`` naming the port if the design has none."""

    def __init__(self, dut, name, clk):
        self.dut, self.name = dut, name
        self.clk = clk if clk is not None else dut.clk
        for suffix in ("valid", "ready", "payload"):
            try:
                setattr(self, suffix, getattr(dut, f"{name}__{suffix}"))
            except AttributeError:
                raise AttributeError(f"the design has no stream port {name!r} "
                                     f"(no signal {name}__{suffix})") from None


class StreamSource(_StreamPort):
    """Drives the input stream ``name``: one beat at a time, ``valid`` held until ``ready``.

    Parameters
    ----------
    dut : cocotb handle
    name : str
        Stream port name (``<name>__valid``, ``__ready``, ``__payload``).
    rng : random.Random
        Source of the idle cycles.
    idle_p : float
        Probability, before each beat and again after each idle cycle, of an idle cycle
        (``valid`` 0) first: 0 sends back to back.
    clk : cocotb handle, optional
        Clock (default ``dut.clk``).
    """

    def __init__(self, dut, name, *, rng, idle_p=0.0, clk=None):
        if not 0.0 <= idle_p < 1.0:
            raise ValueError(f"idle_p must be in [0, 1), not {idle_p!r}")
        super().__init__(dut, name, clk)
        self.rng, self.idle_p = rng, idle_p
        self.sent = 0
        self.cycles = 0          # clock edges spent in send(): idle, waiting and transfer
        self.stall_cycles = 0    # edges with the beat offered and not taken
        self.valid.value = 0

    async def send(self, payload, *, idle=None, **sideband):
        """Offer one beat (after random idle cycles) and return once it is taken.
        ``sideband`` signals (``dut.<key>``) are set with the beat and kept after it.
        ``idle``, if given, is the exact number of idle cycles before the beat instead of
        random ones (nothing is drawn from ``rng``): a caller that decides its own offer
        times, such as an exact-cycle test, keeps them."""
        if idle is None:
            while self.rng.random() < self.idle_p:
                self.valid.value = 0
                await RisingEdge(self.clk)
                self.cycles += 1
        else:
            for _ in range(idle):
                self.valid.value = 0
                await RisingEdge(self.clk)
                self.cycles += 1
        self.payload.value = payload
        for key, value in sideband.items():
            getattr(self.dut, key).value = value
        self.valid.value = 1
        while True:
            await ReadOnly()
            taken = bool(self.ready.value)
            await RisingEdge(self.clk)
            self.cycles += 1
            if taken:
                break
            self.stall_cycles += 1
        self.valid.value = 0
        self.sent += 1

    async def send_all(self, beats):
        """Send every beat of ``beats`` (payload ints, or ``(payload, sideband dict)``)."""
        for beat in beats:
            if isinstance(beat, tuple):
                await self.send(beat[0], **beat[1])
            else:
                await self.send(beat)
        self.valid.value = 0


class StreamSink(_StreamPort):
    """Takes beats from the output stream ``name`` with a random ``ready``.

    Parameters
    ----------
    dut : cocotb handle
    name : str
        Stream port name.
    rng : random.Random
        Source of the back-pressure.
    ready_p : float
        Probability of ``ready`` = 1 in a cycle (1.0: always ready).
    clk : cocotb handle, optional
    """

    def __init__(self, dut, name, *, rng, ready_p=1.0, clk=None):
        if not 0.0 < ready_p <= 1.0:
            raise ValueError(f"ready_p must be in (0, 1], not {ready_p!r}")
        super().__init__(dut, name, clk)
        self.rng, self.ready_p = rng, ready_p
        self.cycle = 0
        self.ready.value = 0

    async def collect(self, count, *, timeout=None, times=None):
        """Return the next ``count`` payloads (ints) in order; ``times`` (a list) gets the
        cycle of each, counted from this call. Raises ``AssertionError`` after ``timeout``
        cycles (default ``200_000 + 50 * count``) naming how many beats arrived."""
        timeout = 200_000 + 50 * count if timeout is None else timeout
        out, cycle = [], 0
        while len(out) < count:
            self.ready.value = int(self.ready_p >= 1.0 or self.rng.random() < self.ready_p)
            await ReadOnly()
            if self.valid.value and self.ready.value:
                out.append(self.payload.value.to_unsigned())
                if times is not None:
                    times.append(cycle)
            await RisingEdge(self.clk)
            cycle += 1
            if cycle > timeout:
                raise AssertionError(f"stream {self.name}: timeout after {cycle} cycles, "
                                     f"{len(out)} of {count} beats received")
        self.ready.value = 0
        self.cycle += cycle
        return out

    async def serve(self, on_beat, *, ready=None):
        """Take beats for as long as the test runs (start it with ``cocotb.start_soon``):
        ``on_beat(payload, cycle)`` for each beat taken (in the ``ReadOnly`` phase before the
        edge that transfers it), ``cycle`` counted in clock edges from this call.
        ``ready(cycle) -> bool`` decides ``ready`` at the start of every cycle (default: with
        probability ``ready_p``); a model may drive its other inputs of that cycle there, as
        both then count the same cycles."""
        cycle = 0
        while True:
            if ready is not None:
                r = bool(ready(cycle))
            else:
                r = self.ready_p >= 1.0 or self.rng.random() < self.ready_p
            self.ready.value = int(r)
            await ReadOnly()
            if r and self.valid.value:
                on_beat(self.payload.value.to_unsigned(), cycle)
            await RisingEdge(self.clk)
            cycle += 1
            self.cycle += 1


class StreamMonitor(_StreamPort):
    """Checks the stream protocol of port ``name`` every cycle, in the background: once
    ``valid`` is 1 it stays 1 with an unchanged ``payload`` until ``ready``. Counts the
    beats transferred. :meth:`check` raises ``AssertionError`` with the first violations.

    ``on_beat(payload)``, if given, is called with every beat transferred, in the
    ``ReadOnly`` phase before the edge that transfers it (a model fed in transfer order)."""

    def __init__(self, dut, name, *, clk=None, max_report=5, on_beat=None):
        super().__init__(dut, name, clk)
        self.max_report = max_report
        self.on_beat = on_beat
        self.beats = 0
        self.violations = []
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        held, cycle = None, 0
        while True:
            await ReadOnly()
            valid = bool(self.valid.value)
            payload = self.payload.value.to_unsigned() if valid and \
                self.payload.value.is_resolvable else None
            if held is not None and len(self.violations) < self.max_report:
                if not valid:
                    self.violations.append(f"cycle {cycle}: valid dropped before the beat "
                                           f"0x{held:x} was taken")
                elif payload != held:
                    self.violations.append(f"cycle {cycle}: payload changed from 0x{held:x} "
                                           f"to 0x{payload:x} while waiting for ready")
            taken = valid and bool(self.ready.value)
            self.beats += taken
            if taken and self.on_beat is not None:
                self.on_beat(payload)
            held = payload if valid and not taken else None
            await RisingEdge(self.clk)
            cycle += 1

    def stop(self):
        self._task.cancel()

    def check(self):
        """Raise ``AssertionError`` listing the protocol violations seen so far, if any."""
        assert not self.violations, (f"stream {self.name}: protocol violations:\n"
                                     + "\n".join(self.violations))


class Scoreboard:
    """Compares received items with expected ones in order.

    Parameters
    ----------
    name : str
        What is compared (named in the failure message).
    fmt : callable, optional
        Formats an item for the message (default ``repr``).
    describe : callable, optional
        ``describe(index)`` adds context to a mismatch (operands, instruction).
    max_report : int
        Mismatches listed in the failure message.
    """

    def __init__(self, name, *, fmt=repr, describe=None, max_report=5):
        self.name, self.fmt, self.describe, self.max_report = name, fmt, describe, max_report

    def compare(self, got, expected):
        """Raise ``AssertionError`` if ``got`` and ``expected`` differ in length or in any
        item; return the number of items compared."""
        got, expected = list(got), list(expected)
        lines, n_bad = [], 0
        for i, (g, e) in enumerate(zip(got, expected)):
            if g != e:
                n_bad += 1
                if len(lines) < self.max_report:
                    extra = f"; {self.describe(i)}" if self.describe else ""
                    lines.append(f"item {i}: got {self._fmt(g)}, expected {self._fmt(e)}{extra}")
        if len(got) != len(expected):
            lines.insert(0, f"{len(got)} items received, {len(expected)} expected")
        assert not lines, (f"{self.name}: {n_bad} of {min(len(got), len(expected))} items "
                           "differ:\n" + "\n".join(lines))
        return len(expected)

    def _fmt(self, item):
        if isinstance(item, (list, tuple)):
            return "[" + ", ".join(self._fmt(x) for x in item) + "]"
        return self.fmt(item)
