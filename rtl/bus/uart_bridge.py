"""A UART-to-AXI4-Lite bridge: a host reads and writes 32-bit words over a serial line.

Protocol (documented for users in ``docs/fpga.md``; the host side is ``fpga/host_serial.py``).
Multi-byte fields are little-endian.

===========  ==========================================  ===================================
command      host to device                              device to host
===========  ==========================================  ===================================
READ32       ``0x52`` ('R'), addr[4]                     ``0xB0 | resp``, data[4]
WRITE32      ``0x57`` ('W'), addr[4], data[4]            ``0xA0 | resp``
PING         ``0x50`` ('P')                              ``0xC0 | PROTOCOL_VERSION``
===========  ==========================================  ===================================

``resp`` is the AXI response of the transaction (0 OKAY, 1 EXOKAY, 2 SLVERR, 3 DECERR); a read
sends its data bytes whatever the response. Any other command byte is ignored, so a host can
flush a half-sent frame by waiting for the frame timeout (below) and re-synchronise with PING.
Commands are executed in order and the host may send the next command before the previous
reply has arrived (the bridge buffers ``rx_depth`` received bytes and ``tx_depth`` reply bytes);
the serial line has no flow control, so a host must not have more unanswered READ32 commands
in flight than fit these buffers (``fpga/host_serial.py`` keeps to this).
"""

from amaranth.hdl import Module, Signal, Cat
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_int, check_pow2

from .axi import AXI4LiteSignature
from .uart import UartRx, UartTx, _check_divisor

__all__ = ["CMD_READ", "CMD_WRITE", "CMD_PING", "REPLY_READ", "REPLY_WRITE", "REPLY_PING",
           "PROTOCOL_VERSION", "StreamBridge", "UartBridge"]

CMD_READ = 0x52
CMD_WRITE = 0x57
CMD_PING = 0x50
REPLY_WRITE = 0xA0
REPLY_READ = 0xB0
REPLY_PING = 0xC0
PROTOCOL_VERSION = 1


def _check_engine(addr_width, timeout):
    check_int("addr_width", addr_width, 1, 32)
    check_int("timeout", timeout, 0, (1 << 32) - 1)


class StreamBridge(wiring.Component):
    """The protocol engine: a byte stream of commands in, AXI4-Lite transactions, a byte stream
    of replies out. :class:`UartBridge` puts a UART in front of it.

    Parameters
    ----------
    addr_width : int
        Width of the AXI addresses (1..32); the upper bytes of a received address are dropped.
    timeout : int
        Clock cycles without a byte after which a half-received frame is discarded; 0 never.

    Members
    -------
    i : In(stream.Signature(8))
        Command bytes. Taken at one byte per cycle while a frame is being parsed, not while a
        transaction or its reply is in progress.
    o : Out(stream.Signature(8))
        Reply bytes, one per cycle when ``ready`` allows.
    bus : Out(AXI4LiteSignature(addr_width=addr_width))
        The AXI4-Lite master. A write raises ``awvalid`` and ``wvalid`` together (``wstrb``
        all ones, ``awprot = arprot = 0``); one transaction is outstanding at a time.
        ``awaddr`` and ``araddr`` are the same register, stable from a frame's last byte until
        its reply has been handed to ``o`` (an address decoder may use it without looking at
        the valids). A slave
        that never responds stalls the bridge (there is no AXI time-out).
    busy : Out(1)
        High from the first byte of a frame until its reply has been handed to ``o``.
    """

    def __init__(self, *, addr_width=32, timeout=0):
        _check_engine(addr_width, timeout)
        self._addr_width = addr_width
        self._timeout = timeout
        super().__init__({
            "i": In(stream.Signature(8)),
            "o": Out(stream.Signature(8)),
            "bus": Out(AXI4LiteSignature(addr_width=addr_width)),
            "busy": Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def timeout(self):
        return self._timeout

    def elaborate(self, platform):
        m = Module()
        bus = self.bus

        cmd = Signal(8)
        addr = Signal(32)
        data = Signal(32)
        count = Signal(range(9))          # bytes of the frame after the command byte
        args = Signal(64)
        reply = Signal(40)                # status byte then data, LSB first
        reply_len = Signal(range(6))
        aw_done = Signal()
        w_done = Signal()

        idle_timer = Signal(range(max(self._timeout, 1) + 1))
        in_frame = Signal()

        m.d.comb += [
            bus.awaddr.eq(addr), bus.araddr.eq(addr), bus.wdata.eq(data),
            bus.wstrb.eq(0xF),
            self.o.payload.eq(reply[:8]),
        ]

        with m.FSM():
            with m.State("CMD"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += cmd.eq(self.i.payload)
                    with m.Switch(self.i.payload):
                        with m.Case(CMD_READ):
                            m.d.sync += count.eq(4)
                            m.next = "ARGS"
                        with m.Case(CMD_WRITE):
                            m.d.sync += count.eq(8)
                            m.next = "ARGS"
                        with m.Case(CMD_PING):
                            m.d.sync += [reply.eq(REPLY_PING | PROTOCOL_VERSION),
                                         reply_len.eq(1)]
                            m.next = "REPLY"
            with m.State("ARGS"):
                m.d.comb += [self.i.ready.eq(1), in_frame.eq(1)]
                with m.If(self.i.valid):
                    # Bytes enter at the top of a 64-bit shift register, so after the last
                    # byte a write's address is in args[8:40] and its data in args[40:] + byte,
                    # a read's address in args[40:] + byte.
                    m.d.sync += [args.eq(Cat(args[8:], self.i.payload)), count.eq(count - 1)]
                    with m.If(count == 1):
                        with m.If(cmd == CMD_READ):
                            m.d.sync += addr.eq(Cat(args[40:], self.i.payload))
                            m.next = "AR"
                        with m.Else():
                            m.d.sync += [addr.eq(args[8:40]),
                                         data.eq(Cat(args[40:], self.i.payload)),
                                         aw_done.eq(0), w_done.eq(0)]
                            m.next = "AW"
                with m.Elif((self._timeout != 0) & (idle_timer == self._timeout)):
                    m.next = "CMD"
            with m.State("AR"):
                m.d.comb += bus.arvalid.eq(1)
                with m.If(bus.arready):
                    m.next = "R"
            with m.State("R"):
                m.d.comb += bus.rready.eq(1)
                with m.If(bus.rvalid):
                    m.d.sync += [reply.eq(Cat(REPLY_READ | bus.rresp, bus.rdata)),
                                 reply_len.eq(5)]
                    m.next = "REPLY"
            with m.State("AW"):
                m.d.comb += [bus.awvalid.eq(~aw_done), bus.wvalid.eq(~w_done)]
                with m.If(bus.awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(bus.wready):
                    m.d.sync += w_done.eq(1)
                with m.If((aw_done | bus.awready) & (w_done | bus.wready)):
                    m.next = "B"
            with m.State("B"):
                m.d.comb += bus.bready.eq(1)
                with m.If(bus.bvalid):
                    m.d.sync += [reply.eq(REPLY_WRITE | bus.bresp), reply_len.eq(1)]
                    m.next = "REPLY"
            with m.State("REPLY"):
                m.d.comb += self.o.valid.eq(1)
                with m.If(self.o.ready):
                    m.d.sync += [reply.eq(reply >> 8), reply_len.eq(reply_len - 1)]
                    with m.If(reply_len == 1):
                        m.next = "CMD"

        if self._timeout:
            with m.If(in_frame & ~self.i.valid):
                with m.If(idle_timer != self._timeout):
                    m.d.sync += idle_timer.eq(idle_timer + 1)
            with m.Else():
                m.d.sync += idle_timer.eq(0)

        m.d.comb += self.busy.eq(~self.i.ready | in_frame)
        return m


class UartBridge(wiring.Component):
    """The bridge with its UART: serial lines on one side, an AXI4-Lite master on the other.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (see :func:`rtl.bus.uart.uart_divisor`).
    addr_width : int
        AXI address width, 1..32.
    rx_depth, tx_depth : int
        Bytes buffered between the UART and the protocol engine in each direction (powers of
        two, at least 2).
    timeout : int
        Clock cycles of silence after which a partial frame is discarded (0: never). Choose it
        longer than the gaps a USB-serial adapter leaves between its packets (milliseconds).

    Members
    -------
    rx : In(1)
        Serial line from the host (idle high).
    tx : Out(1)
        Serial line to the host (idle high).
    bus : Out(AXI4LiteSignature(addr_width=addr_width))
        AXI4-Lite master.
    overrun : Out(1)
        Pulses when a received byte was dropped because the receive buffer was full.
    frame_error : Out(1)
        Pulses on a received byte with a bad stop bit.
    busy : Out(1)
        A frame is being handled.
    """

    def __init__(self, *, divisor, addr_width=32, rx_depth=16, tx_depth=16, timeout=0):
        check_pow2("rx_depth", rx_depth, 2, 65536)
        check_pow2("tx_depth", tx_depth, 2, 65536)
        self._divisor = divisor
        self._addr_width = addr_width
        self._rx_depth = rx_depth
        self._tx_depth = tx_depth
        self._timeout = timeout
        # Check the remaining parameters now, with the sub-components' own messages.
        _check_divisor(divisor)
        _check_engine(addr_width, timeout)
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "bus": Out(AXI4LiteSignature(addr_width=addr_width)),
            "overrun": Out(1),
            "frame_error": Out(1),
            "busy": Out(1),
        })

    @property
    def divisor(self):
        return self._divisor

    @property
    def rx_depth(self):
        return self._rx_depth

    @property
    def tx_depth(self):
        return self._tx_depth

    def elaborate(self, platform):
        m = Module()
        m.submodules.uart_rx = uart_rx = UartRx(self._divisor)
        m.submodules.uart_tx = uart_tx = UartTx(self._divisor)
        m.submodules.rx_fifo = rx_fifo = fifo.SyncFIFOBuffered(width=8, depth=self._rx_depth)
        m.submodules.tx_fifo = tx_fifo = fifo.SyncFIFOBuffered(width=8, depth=self._tx_depth)
        m.submodules.engine = engine = StreamBridge(addr_width=self._addr_width,
                                                    timeout=self._timeout)

        m.d.comb += [
            uart_rx.rx.eq(self.rx),
            self.tx.eq(uart_tx.tx),
            self.overrun.eq(uart_rx.overrun),
            self.frame_error.eq(uart_rx.frame_error),
            self.busy.eq(engine.busy),
        ]
        wiring.connect(m, uart_rx.o, rx_fifo.w_stream)
        wiring.connect(m, rx_fifo.r_stream, engine.i)
        wiring.connect(m, engine.o, tx_fifo.w_stream)
        wiring.connect(m, tx_fifo.r_stream, uart_tx.i)
        wiring.connect(m, engine.bus, wiring.flipped(self.bus))
        return m
