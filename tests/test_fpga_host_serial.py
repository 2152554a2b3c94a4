"""fpga/host_serial.py against a Python model of the bridge written from docs/fpga.md (pure
pytest): exact bytes of each command, the pipelining window (the model's receive buffer
overflows if the host ever exceeds it), errors, BoardMemory's unaligned read-modify-write, and
the driver sim.host.SyncHost running over the serial transport."""

import random
import struct

import pytest

from fpga import host_serial as hs


def test_protocol_constants_match_rtl():
    from rtl.bus import uart_bridge as ub
    assert (hs.CMD_READ, hs.CMD_WRITE, hs.CMD_PING) == (ub.CMD_READ, ub.CMD_WRITE, ub.CMD_PING)
    assert (hs.REPLY_READ, hs.REPLY_WRITE, hs.REPLY_PING) == \
        (ub.REPLY_READ, ub.REPLY_WRITE, ub.REPLY_PING)


def test_encodings():
    assert hs.encode_read(0x12345678) == bytes([0x52, 0x78, 0x56, 0x34, 0x12])
    assert hs.encode_write(0x10, 0xA1B2C3D4) == bytes([0x57, 0x10, 0, 0, 0,
                                                       0xD4, 0xC3, 0xB2, 0xA1])
    assert hs.encode_ping() == b"P"
    with pytest.raises(ValueError, match="addr must be an integer from 0 to 0xFFFFFFFF"):
        hs.encode_read(-1)
    with pytest.raises(ValueError, match="value must be an integer from 0 to 0xFFFFFFFF"):
        hs.encode_write(0, 1 << 32)


class ModelPort:
    """A pyserial-like port in front of a model bridge: bytes are parsed as the protocol says,
    the receive buffer holds ``rx_depth`` bytes of commands not yet answered (overflow is a
    test failure), replies queue until read."""

    def __init__(self, rx_depth=64, resp_of=lambda addr: 0):
        self.rx_depth = rx_depth
        self.resp_of = resp_of
        self.mem = {}
        self.pending = bytearray()
        self.replies = bytearray()
        self.unanswered = 0
        self.max_unanswered = 0
        self.log = []

    def write(self, data):
        self.pending += data
        self.unanswered += len(data)
        self.max_unanswered = max(self.max_unanswered, self.unanswered)
        assert self.unanswered <= self.rx_depth, "host overflowed the bridge's receive buffer"
        return len(data)

    def _execute_one(self):
        if not self.pending:
            return False
        cmd = self.pending[0]
        need = {hs.CMD_READ: 5, hs.CMD_WRITE: 9, hs.CMD_PING: 1}.get(cmd, 1)
        if len(self.pending) < need:
            return False
        frame, self.pending = bytes(self.pending[:need]), self.pending[need:]
        self.unanswered -= need
        if cmd == hs.CMD_PING:
            self.replies.append(0xC1)
        elif cmd == hs.CMD_READ:
            addr = struct.unpack("<I", frame[1:5])[0]
            resp = self.resp_of(addr)
            self.replies += struct.pack("<BI", 0xB0 | resp, self.mem.get(addr, 0) if resp == 0
                                        else 0)
            self.log.append(("R", addr))
        elif cmd == hs.CMD_WRITE:
            addr, value = struct.unpack("<II", frame[1:9])
            resp = self.resp_of(addr)
            if resp == 0:
                self.mem[addr] = value
            self.replies.append(0xA0 | resp)
            self.log.append(("W", addr, value))
        return True

    def read(self, n):
        while len(self.replies) < n and self._execute_one():
            pass
        out, self.replies = bytes(self.replies[:n]), self.replies[n:]
        return out


def test_rw_and_pipelined_blocks():
    rng = random.Random(1)
    port = ModelPort(rx_depth=64)
    link = hs.SerialTransport(port, window=64)
    assert link.ping() == 1
    link.write32(0x40, 0xDEADBEEF)
    assert link.read32(0x40) == 0xDEADBEEF
    words = [rng.randrange(1 << 32) for _ in range(100)]
    link.write_block(0x1000, words)
    assert link.read_block(0x1000, 100) == words
    assert port.max_unanswered <= 64
    assert port.max_unanswered >= 45, "the window should keep several commands in flight"


def test_window_never_exceeded_with_small_buffer():
    port = ModelPort(rx_depth=16)
    link = hs.SerialTransport(port, window=16)
    link.write_block(0, list(range(20)))
    assert link.read_block(0, 20) == list(range(20))
    assert port.max_unanswered <= 16
    with pytest.raises(ValueError, match="window must be an integer of at least 9"):
        hs.SerialTransport(port, window=8)


def test_bus_errors_are_host_bus_errors():
    from sim.host import BusError as HostBusError
    port = ModelPort(resp_of=lambda a: 2 if a >= 0xE000_0000 else (3 if a >= 0x9000 else 0))
    link = hs.SerialTransport(port)
    with pytest.raises(HostBusError, match="answered SLVERR") as e:
        link.write32(0xE000_0004, 1)
    assert (e.value.op, e.value.addr, e.value.resp, e.value.write) == \
        ("write", 0xE000_0004, 2, True)
    with pytest.raises(hs.BusError, match="answered DECERR"):
        link.read32(0x9000)
    # A block with an error in the middle still consumes every reply (the link stays in sync).
    with pytest.raises(hs.BusError):
        link.write_block(0x8FF8, [1, 2, 3, 4])
    assert link.ping() == 1


class SilentPort:
    def __init__(self, reply=b""):
        self.reply = reply

    def write(self, data):
        return len(data)

    def read(self, n):
        out, self.reply = self.reply[:n], self.reply[n:]
        return out


def test_link_errors():
    with pytest.raises(hs.LinkError, match="timed out waiting for the reply to read"):
        hs.SerialTransport(SilentPort()).read32(0)
    with pytest.raises(hs.LinkError, match="bad reply 0x41 to write"):
        hs.SerialTransport(SilentPort(b"A")).write32(0, 0)
    with pytest.raises(hs.LinkError, match="timed out waiting for read data"):
        hs.SerialTransport(SilentPort(b"\xb0\x01")).read32(0)


def test_board_memory_unaligned():
    rng = random.Random(2)
    port = ModelPort()
    link = hs.SerialTransport(port)
    mem = hs.BoardMemory(link)
    model = bytearray(256)
    for _ in range(30):
        addr = rng.randrange(0, 200)
        n = rng.randrange(0, 40)
        data = rng.randbytes(n)
        mem.write(addr, data)
        model[addr:addr + n] = data
        a2, n2 = rng.randrange(0, 200), rng.randrange(0, 50)
        assert mem.read(a2, n2) == bytes(model[a2:a2 + n2])
    assert all(a >= hs.RAM_WINDOW for op, a, *_ in port.log)


def test_sync_host_over_serial():
    """The host driver runs unchanged over the serial transport (register reads)."""
    from sim.host import SyncHost
    from sim.memmap import MEMORY_MAP
    port = ModelPort()
    reg = MEMORY_MAP.registers[0]
    port.mem[reg.offset] = 0x1234_5678
    host = SyncHost(hs.SerialTransport(port), memory=None)
    assert host.read(reg.name) == 0x1234_5678
