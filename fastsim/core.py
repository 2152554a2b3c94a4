"""The Python side of the fast backend: a child process running the harness, spoken to over
pipes in a small binary request / response protocol (``docs/simulation.md``).

The model runs in its own process so that a crash, an ``abort()`` or a ``$fatal`` of the
Verilated model ends that process only: the next read of its answer sees the pipe close and
raises :class:`FastSimError` naming the exit status and the request in flight, and every read
has a timeout, so a Python caller never hangs.
"""

import os
import select
import struct
import subprocess
import time

from sim.config import CoreConfig, check_bool, check_choice, check_int
from sim.host import BusError, SyncHost
from sim.memmap import AXI_RESP

__all__ = ["FALLING", "FastCore", "FastSimError", "FastTransport", "FastMemory"]

_OP = {"reset": 1, "write32": 2, "read32": 3, "write_block": 4, "read_block": 5,
       "mem_write": 6, "mem_read": 7, "run": 8, "cycle": 9, "latency": 10, "activity": 11,
       "get_activity": 12, "quit": 13, "irq": 14, "hello": 15, "gate": 16}
_HDR = struct.Struct("<BQQI")
_RESP = struct.Struct("<BI")
_OKAY = AXI_RESP.get("OKAY", 0)
#: How the harness treats the falling clock edge (``FastCore(falling=...)``).
FALLING = ("skip", "eval", "check")
#: Seconds a request may take before the model is declared hung: a floor plus the time of
#: the cycles it runs at a pessimistic 2,000 cycles/s.
_TIMEOUT_FLOOR = 60.0
_TIMEOUT_RATE = 2_000.0


class FastSimError(RuntimeError):
    """The harness process failed: it exited (crash, ``$fatal``), did not answer in time,
    or refused a request."""


class FastCore:
    """A Verilated core with the C++ harness, driven at the transaction level.

    Parameters
    ----------
    config : sim.config.CoreConfig
        The core to build (cached per configuration under ``build/fastsim/``).
    waves : str or path, optional
        Write an FST waveform there (uses a separate build with tracing).
    wave_window : (int, int), optional
        Harness cycles ``[start, end)`` to trace (default: all).
    cxx_opt : str, optional
        C++ optimisation of the build (``fastsim.build.CXX_OPTS``).
    threads : int
        Verilator threads of the model (1 or 2).
    pgo : bool, optional
        Profile-guided optimisation of the build (default ``fastsim.build.DEFAULT_PGO``).
    compiler : str, optional
        ``"gcc"`` or ``"clang"`` (default ``fastsim.build.default_compiler``).
    hier : str, optional
        Structure of the model (``fastsim.build.HIER``; default
        ``fastsim.build.DEFAULT_HIER``): identical modules merged, hierarchy blocks.
    exe : str or path, optional
        A harness executable built by ``fastsim.build.build`` for ``config`` to run instead
        of building one (the build options above are then ignored).
    latency : (int, int)
        Cycles each read beat / write of the external memory waits (0, 0: AxiRam's timing).
    timeout : float, optional
        Seconds a request may take (default: 60 s plus the cycles it runs at 2,000/s).
    falling : str
        The falling clock edge (:data:`FALLING`): ``"skip"`` (default) does not evaluate the
        model there (the core is clocked by the rising edge only and no output of it is a
        combinational function of its inputs, so nothing the harness reads changes);
        ``"eval"`` evaluates it; ``"check"`` evaluates it and stops the harness with
        ``FastSimError`` if an output changed. A traced build always evaluates it.
    gate : sequence of str, optional
        Engines whose clocks the build gates (``fastsim.build.build(gate=)``; default
        ``fastsim.build.default_gate``).

    Members
    -------
    cycle : int
        Clock cycles simulated since the process started (reset included).
    memory : FastMemory
        The external memory (``read(addr, n)``, ``write(addr, data)``).
    transport : FastTransport
        The AXI4-Lite transport of ``sim.host`` (sync).
    """

    def __init__(self, config, *, waves=None, wave_window=None, cxx_opt=None, threads=1,
                 pgo=None, compiler=None, hier=None, exe=None, latency=(0, 0), timeout=None,
                 falling="skip", gate=None):
        if not isinstance(config, CoreConfig):
            raise TypeError(f"config must be a sim.config.CoreConfig, not "
                            f"{type(config).__name__}")
        if wave_window is not None:
            if waves is None:
                raise ValueError("wave_window needs waves= (the FST file to write)")
            if (not isinstance(wave_window, (tuple, list)) or len(wave_window) != 2 or
                    not all(isinstance(x, int) and x >= 0 for x in wave_window) or
                    wave_window[0] >= wave_window[1]):
                raise ValueError(f"wave_window must be (start, end) cycles with 0 <= start < "
                                 f"end, not {wave_window!r}")
        self._check_latency(latency)
        check_choice("falling", falling, FALLING)
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        from fastsim.build import build
        self.config = config
        self._timeout = timeout
        self._proc = None
        self._last = None
        if exe is None:
            exe = build(config, cxx_opt=cxx_opt, threads=threads, trace=waves is not None,
                        pgo=pgo, compiler=compiler, hier=hier, gate=gate)
        elif not os.access(exe, os.X_OK):
            raise ValueError(f"exe must be an executable harness, not {os.fspath(exe)!r}")
        self.exe = exe
        args = [str(self.exe)]
        if waves is not None:
            start, end = wave_window or (0, 1 << 62)
            args += ["--waves", os.fspath(waves), "--wave-start", str(start),
                     "--wave-end", str(end)]
        if falling != "skip":
            args += [f"--{falling}-falling"]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      bufsize=0)
        self._out = self._proc.stdout.fileno()
        magic, traced = struct.unpack("<II", self._request("hello"))
        if magic != 0x4E43464D:
            raise FastSimError(f"{self.exe} is not a fastsim harness (answered {magic:#x})")
        self.memory = FastMemory(self)
        self.transport = FastTransport(self)
        self.set_latency(*latency)
        self.reset()

    # -- protocol --------------------------------------------------------------------------
    def _request(self, op, a=0, b=0, payload=b"", cycles=0):
        if self._proc is None:
            raise FastSimError("FastCore is closed")
        self._last = f"{op}(0x{a:x}, {b})"
        try:
            self._proc.stdin.write(_HDR.pack(_OP[op], a, b, len(payload)) + payload)
        except (BrokenPipeError, OSError):
            self._died()
        timeout = self._timeout or _TIMEOUT_FLOOR + cycles / _TIMEOUT_RATE
        status, n = _RESP.unpack(self._read(_RESP.size, timeout))
        data = self._read(n, timeout) if n else b""
        if status:
            raise FastSimError(f"fastsim harness refused {self._last}: {data.decode()}")
        return data

    def _read(self, n, timeout):
        chunks = []
        deadline = time.monotonic() + timeout
        while n:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._out], [], [], max(left, 0))
            if not ready:
                self._kill()
                raise FastSimError(f"fastsim harness did not answer {self._last} within "
                                   f"{timeout:.0f} s (killed)")
            chunk = os.read(self._out, n)
            if not chunk:
                self._died()
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _died(self):
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self._proc.returncode
        self._proc = None
        what = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
        raise FastSimError(f"fastsim harness exited with {what} during {self._last}")

    def _kill(self):
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    # -- control -----------------------------------------------------------------------------
    @staticmethod
    def _check_latency(latency):
        if not (isinstance(latency, (tuple, list)) and len(latency) == 2):
            raise ValueError(f"latency must be (read, write) cycles, not {latency!r}")
        for name, v in zip(("read latency", "write latency"), latency):
            check_int(name, v, 0, 1 << 16)

    def set_latency(self, read, write):
        """Cycles each read beat / each write of the external memory waits (as
        ``CoreEnv(latency=(n, n))``); 0, 0 is cocotbext-axi AxiRam's timing."""
        self._check_latency((read, write))
        self._request("latency", read, write)

    def reset(self, cycles=4):
        """Synchronous reset of the core and the memory's channels (memory contents kept)."""
        check_int("cycles", cycles, 1, 1 << 20)
        self._request("reset", cycles, cycles=cycles)

    def gate(self, enabled=None, drain=None):
        """The gated engine clocks of the model (``fastsim.gate``): set them when ``enabled``
        is given, and return their state.

        Parameters
        ----------
        enabled : bool, optional
            False clocks every engine at every edge (the ungated behaviour, same executable).
        drain : int, optional
            With ``enabled``: replace the model's drain counts (cycles a gated clock runs
            after its gate falls) by this one, 0 to 2**32 - 2; None keeps the model's. For
            tests: a drain shorter than the engine's own is not exact.

        Returns
        -------
        dict
            ``engines`` (the gated engines), ``enabled``, ``drain`` and ``edges`` (per gated
            engine: its drain count and the edges its clock rose at) and ``cycles``.
        """
        if enabled is not None:
            check_bool("enabled", enabled)
            if drain is not None:
                check_int("drain", drain, 0, (1 << 32) - 2)
            self._request("gate", 1 | int(enabled) << 1, (1 << 32) - 1 if drain is None
                          else drain)
        elif drain is not None:
            raise ValueError("drain needs enabled= (True or False)")
        mask, dv, dt, ev, et, cycles = struct.unpack("<IIIQQQ", self._request("gate"))
        names = [e for i, e in enumerate(("vector", "tensor")) if mask >> i & 1]
        drains, edges = {"vector": dv, "tensor": dt}, {"vector": ev, "tensor": et}
        return {"engines": names, "enabled": bool(mask & 4),
                "drain": {e: drains[e] for e in names}, "edges": {e: edges[e] for e in names},
                "cycles": cycles}

    @property
    def cycle(self):
        """Clock cycles simulated so far."""
        return struct.unpack("<Q", self._request("cycle"))[0]

    @property
    def irq(self):
        """The interrupt line now."""
        return bool(struct.unpack("<I", self._request("irq"))[0])

    def run(self, cycles, *, until_irq=False):
        """Run up to ``cycles`` cycles (stopping at a rising edge of ``irq`` if
        ``until_irq``); return the cycles run."""
        check_int("cycles", cycles, 0, (1 << 63) - 1)
        done, _ = struct.unpack("<QI", self._request("run", cycles, int(until_irq),
                                                     cycles=cycles))
        return done

    def record_activity(self, on=True):
        """Start (or stop) recording the ``activity`` port once per cycle (clears the
        record); :meth:`activity` returns it."""
        self._request("activity", int(bool(on)))

    def activity(self):
        """The ``activity`` samples recorded since the last call (one int per cycle)."""
        return list(self._request("get_activity"))

    def host(self):
        """The host driver (``sim.host.SyncHost``) over this core's transport and memory."""
        return SyncHost(self.transport, self.memory, memory_map=self.memory_map)

    @property
    def memory_map(self):
        from sim.memmap import build_memory_map
        return build_memory_map(self.config.dma_windows)

    def run_image(self, image):
        """Run a ``sim.image.Image``; return its ``Outcome`` (``backend="fastsim"``)."""
        from sim.image import run_host
        out = run_host(self.host(), image)
        out.backend = "fastsim"
        return out

    def close(self):
        """End the harness process (idempotent)."""
        if self._proc is None:
            return
        try:
            self._proc.stdin.write(_HDR.pack(_OP["quit"], 0, 0, 0))
            self._proc.stdin.close()
            self._proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._kill()
        finally:
            if self._proc is not None and self._proc.stdout:
                self._proc.stdout.close()
            self._proc = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class FastTransport:
    """The synchronous AXI4-Lite transport ``sim.host.SyncHost`` takes."""

    def __init__(self, core):
        self._core = core

    def read32(self, addr):
        data, resp = struct.unpack("<II", self._core._request("read32", _addr(addr)))
        if resp != _OKAY:
            raise BusError(addr, resp, write=False)
        return data

    def write32(self, addr, value):
        (resp,) = struct.unpack("<I", self._core._request("write32", _addr(addr),
                                                          int(value) & 0xFFFFFFFF))
        if resp != _OKAY:
            raise BusError(addr, resp, write=True)

    def read_block(self, addr, nwords):
        check_int("nwords", nwords, 0, 1 << 16)
        data = self._core._request("read_block", _addr(addr), nwords, cycles=16 * nwords)
        resp, bad = struct.unpack_from("<II", data)
        if resp != _OKAY:
            raise BusError(addr + 4 * bad, resp, write=False)
        return list(struct.unpack_from(f"<{nwords}I", data, 8))

    def write_block(self, addr, words):
        words = [int(w) & 0xFFFFFFFF for w in words]
        data = struct.pack(f"<{len(words)}I", *words)
        resp, bad = struct.unpack("<II", self._core._request(
            "write_block", _addr(addr), 0, data, cycles=16 * len(words)))
        if resp != _OKAY:
            raise BusError(addr + 4 * bad, resp, write=True)

    def wait_cycles(self, n):
        """Run ``n`` cycles, or fewer if the interrupt rises (the host then polls at once)."""
        self._core.run(int(n), until_irq=True)


def _addr(addr):
    return check_int("addr", addr, 0, 0xFFFF)


class FastMemory:
    """The external memory behind the DMA: sparse, byte-addressed, 32-bit addresses."""

    def __init__(self, core):
        self._core = core

    def write(self, addr, data):
        data = bytes(data)
        check_int("addr", addr, 0, 0xFFFFFFFF)
        if addr + len(data) > 1 << 32:
            raise ValueError(f"{len(data)} bytes at 0x{addr:x} run past the 32-bit space")
        for off in range(0, len(data), 1 << 24):
            self._core._request("mem_write", addr + off, 0, data[off:off + (1 << 24)])

    def read(self, addr, n):
        check_int("addr", addr, 0, 0xFFFFFFFF)
        check_int("n", n, 0, (1 << 32) - addr)
        out = []
        for off in range(0, n, 1 << 24):
            out.append(self._core._request("mem_read", addr + off, min(n - off, 1 << 24)))
        return b"".join(out)
