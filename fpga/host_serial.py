"""A serial-port transport for the host driver: read32/write32 over the UART bridge of a board.

The bytes on the wire are those of the bridge protocol in ``docs/fpga.md`` (the RTL is
``rtl/bus/uart_bridge.py``; this module is written from the document, not from the RTL, and the
constants are cross-checked by ``tests/test_fpga_protocol.py``). Pure Python: it imports neither
Amaranth nor cocotb (only ``sim.host`` for its error class, and pyserial when it opens a device
by name).

With the host driver::

    from sim.host import SyncHost
    link = SerialTransport.open("/dev/ttyUSB0")
    host = SyncHost(link, memory=BoardMemory(link))   # same calls as in simulation

Usage::

    from fpga.host_serial import SerialTransport
    with SerialTransport.open("/dev/ttyUSB0", baud=115200) as link:
        link.write32(0x0000_0010, 1)
        print(hex(link.read32(0x0000_0000)))

Any object with pyserial's ``write(bytes)``, ``read(n) -> bytes`` (returning fewer bytes on
time-out) and, optionally, ``reset_input_buffer()`` and ``close()`` can stand in for the port:
the cocotb loopback test (``cocotb_tests/test_uart_bridge.py``) passes one that drives the
simulated UART lines, so the same class runs against simulation and against a board.
"""

import struct
import time

from sim.host import BusError as _HostBusError

__all__ = ["CMD_READ", "CMD_WRITE", "CMD_PING", "REPLY_READ", "REPLY_WRITE", "REPLY_PING",
           "RESP_NAMES", "RAM_WINDOW", "encode_read", "encode_write", "encode_ping", "BusError",
           "LinkError", "SerialTransport", "BoardMemory"]

CMD_READ = 0x52      # 'R' addr[4]            -> 0xB0|resp data[4]
CMD_WRITE = 0x57     # 'W' addr[4] data[4]    -> 0xA0|resp
CMD_PING = 0x50      # 'P'                    -> 0xC0|version
REPLY_READ = 0xB0
REPLY_WRITE = 0xA0
REPLY_PING = 0xC0
RESP_NAMES = {0: "OKAY", 1: "EXOKAY", 2: "SLVERR", 3: "DECERR"}
#: Where a board top maps its on-chip RAM (the DMA's external memory) in the bridge's address
#: space (``fpga/top.py``); the core's registers are below it.
RAM_WINDOW = 0x8000_0000


def _check_word(name, value):
    if not isinstance(value, int) or not 0 <= value < 1 << 32:
        raise ValueError(f"{name} must be an integer from 0 to 0xFFFFFFFF, not {value!r}")


def encode_read(addr):
    """The bytes of a READ32 command."""
    _check_word("addr", addr)
    return struct.pack("<BI", CMD_READ, addr)


def encode_write(addr, value):
    """The bytes of a WRITE32 command."""
    _check_word("addr", addr)
    _check_word("value", value)
    return struct.pack("<BII", CMD_WRITE, addr, value)


def encode_ping():
    """The byte of a PING command."""
    return bytes([CMD_PING])


class LinkError(IOError):
    """The device did not answer, or answered with bytes that are not a reply."""


class BusError(_HostBusError):
    """The AXI4-Lite transaction completed with a SLVERR or DECERR response (a
    :class:`sim.host.BusError`, so the host driver handles it like any transport's)."""

    def __init__(self, op, addr, resp):
        super().__init__(addr, resp, op == "write")
        self.op = op


class SerialTransport:
    """read32/write32 (and pipelined block transfers) over a serial port.

    Parameters
    ----------
    port : pyserial-like object
        Already open; see the module docstring.
    window : int
        Command bytes the host may have sent without having their reply: the bridge's receive
        buffer (``rx_depth``), so a stalled bus can never overflow it (the serial line has no
        flow control).
    frame_timeout : float
        Seconds of silence after which the bridge discards a partial frame (its ``timeout``);
        :meth:`resync` waits this long.
    """

    def __init__(self, port, *, window=64, frame_timeout=0.05):
        if not isinstance(window, int) or window < 9:
            raise ValueError(f"window must be an integer of at least 9 (one WRITE32), "
                             f"not {window!r}")
        self.port = port
        self.window = window
        self.frame_timeout = frame_timeout

    @classmethod
    def open(cls, device, baud=115200, *, timeout=1.0, **kwargs):
        """Open ``device`` (e.g. ``/dev/ttyUSB0``) at ``baud``, 8N1, no flow control."""
        import serial
        port = serial.Serial(device, baudrate=baud, bytesize=8, parity="N", stopbits=1,
                             timeout=timeout, rtscts=False, xonxoff=False)
        return cls(port, **kwargs)

    def close(self):
        close = getattr(self.port, "close", None)
        if close is not None:
            close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- wire -------------------------------------------------------------------------------

    def _read_exact(self, n, what):
        data = self.port.read(n)
        if len(data) != n:
            raise LinkError(f"timed out waiting for {what}: got {len(data)} of {n} bytes "
                            f"({bytes(data).hex()})")
        return bytes(data)

    def _reply(self, op, addr):
        """Read one reply to ``op`` ('read', 'write', 'ping'); return (resp, value)."""
        status = self._read_exact(1, f"the reply to {op}")[0]
        expect = {"read": REPLY_READ, "write": REPLY_WRITE, "ping": REPLY_PING}[op]
        if status & 0xF0 != expect:
            raise LinkError(f"bad reply 0x{status:02x} to {op} (expected 0x{expect:02x}|x); "
                            f"call resync()")
        if op == "read":
            value = struct.unpack("<I", self._read_exact(4, "read data"))[0]
            return status & 3, value
        return status & 0xF, None

    def _run(self, commands):
        """Send ``commands`` [(op, addr, bytes)], keeping at most ``window`` unanswered bytes
        in flight, and return their replies in order."""
        results = []
        in_flight = []          # (op, addr, length) sent, reply not yet read
        pending = 0
        pos = 0
        while pos < len(commands) or in_flight:
            batch = b""
            while pos < len(commands) and pending + len(commands[pos][2]) <= self.window:
                op, addr, frame = commands[pos]
                batch += frame
                in_flight.append((op, addr, len(frame)))
                pending += len(frame)
                pos += 1
            if batch:
                self.port.write(batch)
            op, addr, length = in_flight.pop(0)
            results.append((op, addr) + self._reply(op, addr))
            pending -= length
        return results

    @staticmethod
    def _check(results):
        for op, addr, resp, _ in results:
            if op != "ping" and resp >= 2:
                raise BusError(op, addr, resp)

    # --- the driver's interface -------------------------------------------------------------

    def ping(self):
        """Return the bridge's protocol version."""
        return self._run([("ping", 0, encode_ping())])[0][2]

    def resync(self):
        """After an error: let the bridge drop any partial frame, drain the input, ping."""
        time.sleep(self.frame_timeout * 2)
        reset = getattr(self.port, "reset_input_buffer", None)
        if reset is not None:
            reset()
        return self.ping()

    def read32(self, addr):
        """Read the 32-bit word at byte address ``addr``."""
        results = self._run([("read", addr, encode_read(addr))])
        self._check(results)
        return results[0][3]

    def write32(self, addr, value):
        """Write the 32-bit ``value`` at byte address ``addr``."""
        results = self._run([("write", addr, encode_write(addr, value))])
        self._check(results)

    def write_block(self, addr, words):
        """Write ``words`` to consecutive word addresses from ``addr``, pipelined."""
        results = self._run([("write", addr + 4 * i, encode_write(addr + 4 * i, int(w)))
                             for i, w in enumerate(words)])
        self._check(results)

    def read_block(self, addr, count):
        """Read ``count`` consecutive words from ``addr``, pipelined; return a list."""
        results = self._run([("read", addr + 4 * i, encode_read(addr + 4 * i))
                             for i in range(count)])
        self._check(results)
        return [r[3] for r in results]


class BoardMemory:
    """The board's on-chip RAM (the DMA's external memory) as the host driver's ``memory``
    object: ``read(addr, n) -> bytes`` and ``write(addr, data)`` at DMA addresses, carried as
    word accesses to ``RAM_WINDOW + addr`` over the link (read-modify-write at unaligned
    edges)."""

    def __init__(self, link, base=RAM_WINDOW):
        self.link = link
        self.base = base

    def read(self, addr, n):
        first, end = addr & ~3, (addr + n + 3) & ~3
        words = self.link.read_block(self.base + first, (end - first) // 4)
        data = b"".join(struct.pack("<I", w) for w in words)
        return data[addr - first:addr - first + n]

    def write(self, addr, data):
        data = bytes(data)
        if not data:
            return
        first, end = addr & ~3, (addr + len(data) + 3) & ~3
        buf = bytearray(end - first)
        if first != addr or end != addr + len(data):
            buf[:4] = self.read(first, 4)
            buf[-4:] = self.read(end - 4, 4)
        buf[addr - first:addr - first + len(data)] = data
        words = struct.unpack(f"<{len(buf) // 4}I", bytes(buf))
        self.link.write_block(self.base + first, words)
