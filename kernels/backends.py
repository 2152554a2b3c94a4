"""Where a compiled kernel runs: every backend takes a ``sim.image.Image`` and returns a
``sim.image.Outcome`` (and an engine timeline where it records one).

* ``refsim``: ``sim.image.run_refsim`` (numpy golden models), with the race checker
  (``sim.races``) on: a program in which two engines can touch the same word unordered
  raises ``sim.races.RaceError``.
* ``rtl``: the RTL of the core. The fast Verilator harness (``fastsim.FastCore``) when it is
  available, otherwise a cocotb run of :mod:`kernels.cocotb_image` (Icarus by default,
  ``simulator="verilator"``).
* ``fpga``: a board over its UART link: pass ``host=`` a ``sim.host.SyncHost`` (for a board,
  ``SyncHost(SerialTransport.open(port), memory=BoardMemory(link))`` from
  ``fpga/host_serial.py``); any ``SyncHost`` works, which is how it is tested without a board.
"""

import json
import os
import pathlib
import tempfile

__all__ = ["BACKENDS", "run", "run_refsim", "run_rtl", "run_fpga", "fast_backend"]

BACKENDS = ("refsim", "rtl", "fpga")


def run(backend, config, image, *, races=True, **options):
    """Run ``image`` on ``backend``; returns ``(outcome, timeline)``."""
    if backend == "refsim":
        return run_refsim(config, image, races=races), None
    if backend == "rtl":
        return run_rtl(config, image, **options)
    if backend == "fpga":
        return run_fpga(config, image, **options), None
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")


def run_refsim(config, image, races=True):
    """The reference simulator; with ``races`` the race checker must find nothing."""
    from sim.image import run_refsim as _run
    out = _run(config, image, races=races)
    if races:
        err = out.refsim.races_error()
        if err is not None:
            raise err
    return out


def fast_backend():
    """``fastsim`` when its ``FastCore`` is importable and its toolchain is installed."""
    try:
        import fastsim
    except ImportError:
        return None
    if not hasattr(fastsim, "FastCore"):
        return None
    avail = getattr(fastsim, "available", None)
    if avail is not None and not avail():
        return None
    return fastsim


def run_rtl(config, image, *, simulator=None, fast=None):
    """The RTL: ``fastsim.FastCore(config).run_image(image)`` if available (and ``fast`` is
    not False), else cocotb on ``simulator`` (``icarus`` by default)."""
    fs = fast_backend() if fast is not False else None
    if fs is not None and simulator is None:
        core = _FAST.get(config)
        if core is None:
            core = _FAST[config] = fs.FastCore(config)
        try:
            core.record_activity(True)
            out = core.run_image(image)
            samples = core.activity()
            core.record_activity(False)
        except BaseException:
            # A core left running (a time-out) refuses the next program: start afresh.
            _FAST.pop(config, None)
            core.close()
            raise
        out.backend = "rtl-fast"
        return out, timeline(samples)
    return _run_cocotb(config, image, simulator or "icarus"), None


#: Open fast cores by configuration (a harness process each, reused across kernel calls).
_FAST = {}

#: Bits of the core's ``activity`` port, bit 0 first (``cocotb_tests/test_core_profile.py``).
ACTIVITY_FIELDS = ("running", "seq_busy", "dma", "tensor", "vector", "aborting", "seq_wait")


def timeline(samples):
    """The engine timeline of a run from its per-cycle ``activity`` samples: ``samples``
    (the ints), and per field of :data:`ACTIVITY_FIELDS` its busy cycles and the intervals
    ``[(first, last), ...]`` it was busy."""
    out = {"samples": samples, "busy": {}, "intervals": {}}
    for bit, name in enumerate(ACTIVITY_FIELDS):
        on = [s >> bit & 1 for s in samples]
        out["busy"][name] = sum(on)
        iv, start = [], None
        for i, v in enumerate(on + [0]):
            if v and start is None:
                start = i
            elif not v and start is not None:
                iv.append((start, i - 1))
                start = None
        out["intervals"][name] = iv
    return out


def _image_to_json(image):
    d = dict(image.__dict__)
    d["memory"] = [(a, bytes(b).hex()) for a, b in image.memory]
    return json.dumps(d)


def core_factory(config):
    """A callable building ``rtl.core.top.NeuronCore`` for ``config`` (a ``CoreConfig``)."""
    def make():
        from rtl.core.top import NeuronCore
        if hasattr(NeuronCore, "from_config"):
            return NeuronCore.from_config(config)
        return NeuronCore(**config.__dict__)
    return make


def _run_cocotb(config, image, simulator):
    """One cocotb run of :mod:`kernels.cocotb_image` on the core of ``config``."""
    from cocotb_tests.common.runner import run_cocotb
    from sim.host import AcceleratorError
    from sim.image import Outcome
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "image.json"
        dst = pathlib.Path(tmp) / "outcome.json"
        src.write_text(_image_to_json(image))
        run_cocotb(core_factory(config), name=f"kern-{config.rows}x{config.cols}",
                   config=config.to_dict(), test_module="kernels.cocotb_image",
                   simulator=simulator, extra_env={"KERNEL_IMAGE": str(src),
                                                   "KERNEL_OUTCOME": str(dst)})
        d = json.loads(dst.read_text())
    err = None
    if d["error"] is not None:
        err = AcceleratorError(*d["error"])
    return Outcome(memory=[bytes.fromhex(m) for m in d["memory"]], error=err,
                   cycles=d["cycles"], counters=d["counters"], backend=f"rtl-{simulator}")


def run_fpga(config, image, *, host=None):
    """A board (or anything else behind a ``sim.host.SyncHost``) through ``run_host``."""
    from sim.image import run_host
    if host is None:
        raise ValueError("backend 'fpga' needs host= a sim.host.SyncHost (fpga/host_serial.py "
                         "SerialTransport and BoardMemory for a board)")
    out = run_host(host, image)
    out.backend = "fpga"
    return out


class BridgeLoopback:
    """A serial port (pyserial's ``write``/``read``) in front of the board's UART bridge
    protocol (``docs/fpga.md``, ``fpga/host_serial.py``) served by a fast core: the bytes
    ``SerialTransport`` writes are parsed into READ32 / WRITE32 / PING frames, executed on the
    core's AXI4-Lite port (addresses below ``0x10000``) or its external memory (from
    ``RAM_WINDOW``; anything else answers DECERR), and answered with the bridge's reply bytes.
    The core runs ``clocks_per_byte`` cycles per byte on the line (both directions), so time
    passes while the host polls, as on a board.

    Parameters
    ----------
    core : fastsim.FastCore
    clocks_per_byte : int
        Core cycles per byte on the line (10 bits; 160 is about 3 Mbaud at 50 MHz).
    rx_depth : int
        The bridge's receive buffer: more unanswered command bytes is an ``OverflowError``
        (the line has no flow control, so the host must never send more).
    """

    def __init__(self, core, *, clocks_per_byte=160, rx_depth=64):
        from sim.config import check_int
        check_int("clocks_per_byte", clocks_per_byte, 1, 1 << 20)
        check_int("rx_depth", rx_depth, 9, 1 << 16)
        self.core, self.clocks_per_byte, self.rx_depth = core, clocks_per_byte, rx_depth
        self.pending, self.replies = bytearray(), bytearray()
        self.bytes_in = self.bytes_out = 0

    def write(self, data):
        self.pending += data
        self.bytes_in += len(data)
        if len(self.pending) > self.rx_depth:
            raise OverflowError(f"{len(self.pending)} unanswered command bytes overflow the "
                                f"bridge's {self.rx_depth}-byte receive buffer")
        return len(data)

    def read(self, n):
        while len(self.replies) < n and self._execute_one():
            pass
        out, self.replies = bytes(self.replies[:n]), self.replies[n:]
        self.bytes_out += len(out)
        return out

    def _access(self, write, addr, value=0):
        from fpga.host_serial import RAM_WINDOW
        from sim.host import BusError
        try:
            if addr >= RAM_WINDOW:
                if write:
                    self.core.memory.write(addr - RAM_WINDOW, value.to_bytes(4, "little"))
                    return 0, 0
                return 0, int.from_bytes(self.core.memory.read(addr - RAM_WINDOW, 4),
                                         "little")
            if addr >= 0x10000:
                return 3, 0
            if write:
                self.core.transport.write32(addr, value)
                return 0, 0
            return 0, self.core.transport.read32(addr)
        except BusError as e:
            return e.resp, 0

    def _execute_one(self):
        import struct
        from fpga import host_serial as hs
        if not self.pending:
            return False
        cmd = self.pending[0]
        need = {hs.CMD_READ: 5, hs.CMD_WRITE: 9}.get(cmd, 1)
        if len(self.pending) < need:
            return False
        frame, self.pending = bytes(self.pending[:need]), self.pending[need:]
        if cmd == hs.CMD_READ:
            resp, value = self._access(False, struct.unpack("<I", frame[1:5])[0])
            reply = struct.pack("<BI", hs.REPLY_READ | resp, value)
        elif cmd == hs.CMD_WRITE:
            addr, value = struct.unpack("<II", frame[1:9])
            reply = bytes([hs.REPLY_WRITE | self._access(True, addr, value)[0]])
        elif cmd == hs.CMD_PING:
            reply = bytes([hs.REPLY_PING | 1])
        else:                              # the bridge drops a byte that starts no frame
            return True
        self.core.run((len(frame) + len(reply)) * self.clocks_per_byte)
        self.replies += reply
        return True


def loopback_host(config, **options):
    """A ``sim.host.SyncHost`` that drives a fast core of ``config`` through the board's
    serial protocol, byte by byte (``fpga/host_serial.py`` ``SerialTransport`` and
    ``BoardMemory`` over a :class:`BridgeLoopback`): the ``fpga`` backend without a board.
    ``options`` go to :class:`BridgeLoopback`. Close it with ``host.port.core.close()``."""
    import fastsim
    from fpga.host_serial import BoardMemory, SerialTransport
    from sim.host import SyncHost
    port = BridgeLoopback(fastsim.FastCore(config), **options)
    link = SerialTransport(port)
    host = SyncHost(link, memory=BoardMemory(link))
    host.port = port
    return host
