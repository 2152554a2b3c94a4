"""An 8N1 UART: a transmitter and a receiver with byte streams, for the FPGA host link.

Both halves count ``divisor`` clock cycles per bit (``divisor = round(clk_freq / baud)``, see
:func:`uart_divisor`). The line idles high; a frame is one start bit (0), eight data bits, least
significant first, and one stop bit (1).
"""

from amaranth.hdl import Module, Signal, Cat, Const
from amaranth.lib import cdc, stream, wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int

__all__ = ["UartTx", "UartRx", "uart_divisor", "MIN_DIVISOR"]

#: The receiver samples in the middle of a bit, found by counting half a bit after the start
#: edge; below 4 cycles per bit the two-flop synchroniser's delay is a large part of a bit.
MIN_DIVISOR = 4


def _check_divisor(divisor):
    return check_int("divisor", divisor, MIN_DIVISOR, (1 << 32) - 1)


def uart_divisor(clk_freq, baud, *, tolerance=0.02):
    """Return the integer number of clock cycles per bit for ``baud`` at ``clk_freq`` Hz.

    Raises
    ------
    ValueError
        If the rate error of the rounded divisor exceeds ``tolerance`` (2% by default, a safe
        share of the about 5% that an 8N1 frame tolerates between both ends), or if the
        divisor would be below :data:`MIN_DIVISOR`.
    """
    if not isinstance(baud, (int, float)) or baud <= 0:
        raise ValueError(f"baud must be a positive number, not {baud!r}")
    if not isinstance(clk_freq, (int, float)) or clk_freq <= 0:
        raise ValueError(f"clk_freq must be a positive number, not {clk_freq!r}")
    divisor = round(clk_freq / baud)
    if divisor < MIN_DIVISOR:
        raise ValueError(f"baud must be at most clk_freq / {MIN_DIVISOR} = "
                         f"{clk_freq / MIN_DIVISOR:.0f}, not {baud}")
    error = abs(clk_freq / divisor - baud) / baud
    if error > tolerance:
        raise ValueError(f"baud must be within {tolerance:.0%} of clk_freq / divisor, not "
                         f"{baud} ({error:.1%} off with a divisor of {divisor} at "
                         f"{clk_freq / 1e6:g} MHz)")
    return divisor


class UartTx(wiring.Component):
    """UART transmitter.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least :data:`MIN_DIVISOR`.

    Members
    -------
    i : In(stream.Signature(8))
        Bytes to send. ``ready`` is high while the transmitter is idle and in the last cycle of
        a stop bit; a byte offered while a frame is on the line waits. Back-to-back bytes are
        sent without idle time between the stop bit and the next start bit (10 bit times per
        byte).
    tx : Out(1)
        The serial line, registered (no glitches); high while idle and during reset.
    busy : Out(1)
        High while a frame is on the line.
    """

    def __init__(self, divisor):
        self._divisor = _check_divisor(divisor)
        super().__init__({
            "i": In(stream.Signature(8)),
            "tx": Out(1, init=1),
            "busy": Out(1),
        })

    divisor = property(lambda self: self._divisor)

    def elaborate(self, platform):
        m = Module()
        # Frame bits still to send, LSB first; the stop bit is 1 so the line rests high.
        shift = Signal(9, init=0x1FF)
        bits_left = Signal(range(11))
        timer = Signal(range(self._divisor))

        # tick: the timer is at 0 (the compare is registered one cycle ahead, which keeps it
        # off the enable path of the shift register).
        tick = Signal()
        m.d.sync += tick.eq((timer == 1) & (bits_left != 0))
        # A new byte may start in the last cycle of the previous stop bit, so back-to-back
        # frames are exactly 10 bit times apart.
        last_cycle = (bits_left == 1) & tick
        m.d.comb += [self.i.ready.eq((bits_left == 0) | last_cycle),
                     self.busy.eq(bits_left != 0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                self.tx.eq(0),                    # start bit
                shift.eq(Cat(self.i.payload, Const(1, 1))),
                bits_left.eq(10),
                timer.eq(self._divisor - 1),
                tick.eq(0),
            ]
        with m.Elif(bits_left != 0):
            with m.If(tick):
                m.d.sync += [
                    timer.eq(self._divisor - 1),
                    bits_left.eq(bits_left - 1),
                ]
                with m.If(bits_left != 1):
                    m.d.sync += [self.tx.eq(shift[0]), shift.eq(Cat(shift[1:], Const(1, 1)))]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m


class UartRx(wiring.Component):
    """UART receiver.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least :data:`MIN_DIVISOR`.

    Members
    -------
    rx : In(1)
        The serial line (asynchronous: it passes a two-flop synchroniser, which adds two
        cycles of latency). Idle high.
    o : Out(stream.Signature(8))
        Received bytes. A byte is offered from the middle of its stop bit and held until taken.
        The line has no flow control: if the previous byte has not been taken when the next
        one completes, the new byte is dropped and ``overrun`` pulses.
    overrun : Out(1)
        One-cycle pulse per dropped byte (registered: the cycle after the stop bit's sample).
    frame_error : Out(1)
        One-cycle pulse (registered) when a stop bit reads 0; the byte is dropped and the
        receiver waits for the line to return high before looking for the next start bit.

    Sampling: the start edge is confirmed half a bit later (shorter low pulses are ignored as
    glitches), then each bit is sampled once in its middle.
    """

    def __init__(self, divisor):
        self._divisor = _check_divisor(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(8)),
            "overrun": Out(1),
            "frame_error": Out(1),
        })

    divisor = property(lambda self: self._divisor)

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = cdc.FFSynchronizer(self.rx, rx, init=1)

        timer = Signal(range(self._divisor))
        shift = Signal(8)
        bit = Signal(range(9))

        m.d.sync += [self.overrun.eq(0), self.frame_error.eq(0)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(self._divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(rx):
                        m.next = "IDLE"                       # a glitch, not a start bit
                    with m.Else():
                        m.d.sync += [timer.eq(self._divisor - 1), bit.eq(0)]
                        m.next = "DATA"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [
                        timer.eq(self._divisor - 1),
                        shift.eq(Cat(shift[1:], rx)),
                        bit.eq(bit + 1),
                    ]
                    with m.If(bit == 7):
                        m.next = "STOP"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(rx):
                        with m.If(self.o.valid & ~self.o.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.o.payload.eq(shift), self.o.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += self.frame_error.eq(1)
                        m.next = "BREAK"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
            with m.State("BREAK"):
                with m.If(rx):
                    m.next = "IDLE"
        return m
