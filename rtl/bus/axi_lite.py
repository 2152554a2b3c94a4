"""The host's AXI4-Lite port: a subordinate decoding to the registers and memory windows of
``sim/memmap.py``, with the configuration lock.

Nothing about the register set is written here: every register, port and window is generated
from the :class:`sim.memmap.MemoryMap` given to the constructor.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.memmap import MemoryMap, MEMORY_MAP, CTRL_CLEAR_COUNTERS
from rtl.bus.axi import AXI4LiteSignature, RESP_OKAY, RESP_SLVERR, RESP_DECERR
from rtl.bus.axi_lite_read_mux import AXI4LiteReadMux, read_sources

__all__ = ["WindowSignature", "AXI4LiteRegisters"]


class WindowSignature(wiring.Signature):
    """A memory-window port (register block's view: it drives the address).

    Members
    -------
    addr : Out(addr_bits)
        Word address inside the window.
    wdata : Out(32)
    wstrb : Out(4)
        Byte enables of a write (bit i: byte i of ``wdata``).
    we : Out(1)
        One-cycle write strobe.
    re : Out(1)
        One-cycle read strobe; the core presents the word on ``rdata`` the window's
        ``read_latency`` cycles later (``sim.memmap.Window``; 1, the next cycle, by default).
    rdata : In(32)
    """

    def __init__(self, addr_bits):
        self.addr_bits = addr_bits
        super().__init__({
            "addr": Out(max(addr_bits, 1)), "wdata": Out(32), "wstrb": Out(4), "we": Out(1),
            "re": Out(1), "rdata": In(32),
        })


class AXI4LiteRegisters(wiring.Component):
    """AXI4-Lite subordinate with the register block and windows of a memory map.

    Parameters
    ----------
    memory_map : sim.memmap.MemoryMap
        The map (default :data:`sim.memmap.MEMORY_MAP`).

    Members
    -------
    axil : In(AXI4LiteSignature(addr_width=memory_map.addr_width, data_width=32))
        The host port. AW and W are accepted independently (each has a one-entry holding
        register, ``awready``/``wready`` are low while it is full); a write executes once both
        are held and the previous B response has been taken. Reads and writes are served one
        at a time, alternating when both wait. ``awprot``/``arprot`` are ignored.
    busy : In(1)
        The core runs a program: writes to ``locked`` registers and windows answer SLVERR and
        increment ``LOCK_REFUSED``; window reads answer SLVERR (the memories belong to the
        core), not counted. Status, counters and unlocked registers stay accessible.
    <reg> : In(32)
        One input per read-only register without a constant value (``status``, ``err_code``,
        ``perf_cycles_lo``...), sampled two cycles before the read executes.
    <reg> : Out(width), <reg>_we : Out(1)
        One output per RW register (its stored value) and a one-cycle strobe when the host
        wrote it. For write-only registers (``ctrl``), ``<reg>`` carries the written value only
        during the ``<reg>_we`` cycle and is 0 otherwise.
    <window> : Out(WindowSignature(window.addr_bits))
        One port per window (``prog``, ``ucode``, ``lut``).
    lock_refused : Out(32)
        The ``LOCK_REFUSED`` counter (cleared by reset and by ``CTRL.clear_counters``).

    Responses: OKAY; SLVERR for a refused write (lock), a write to a read-only register or a
    window access while busy; DECERR for an unmapped address (a read's data 0). Latency: a
    register read answers 3 cycles after the AR handshake, a window read ``read_latency + 1``
    cycles later; a write takes effect and answers 2 cycles after both AW and W are held, and a
    read waits until 3 cycles after a write took effect.

    The register read multiplexer is :class:`rtl.bus.axi_lite_read_mux.AXI4LiteReadMux`.
    """

    def __init__(self, memory_map=MEMORY_MAP):
        if not isinstance(memory_map, MemoryMap):
            raise TypeError(f"memory_map must be a sim.memmap.MemoryMap, not {memory_map!r}")
        self._mm = memory_map
        members = {
            "axil": In(AXI4LiteSignature(addr_width=memory_map.addr_width, data_width=32)),
            "busy": In(1),
            "lock_refused": Out(32),
        }
        for reg in memory_map.registers:
            if reg.access == "ro" and reg.value is None and not reg.internal:
                members[reg.port] = In(32)
            elif reg.access == "rw":
                members[reg.port] = Out(reg.width, init=reg.reset)
                members[f"{reg.port}_we"] = Out(1)
            elif reg.access == "wo":
                members[reg.port] = Out(32)
                members[f"{reg.port}_we"] = Out(1)
        for win in memory_map.windows:
            members[win.port] = Out(WindowSignature(win.addr_bits))
        super().__init__(members)

    memory_map = property(lambda self: self._mm)

    def elaborate(self, platform):
        m = Module()
        mm = self._mm
        bus = self.axil
        aw = mm.addr_width

        def win_hit(addr, win):
            shift = (4 * win.words - 1).bit_length()
            return addr[shift:aw] == (win.base >> shift)

        # Holding registers: AW, W and AR are taken independently of each other.
        aw_full = Signal()
        aw_addr = Signal(aw)
        w_full = Signal()
        w_data = Signal(32)
        w_strb = Signal(4)
        ar_full = Signal()
        ar_addr = Signal(aw)
        bvalid = Signal()
        bresp = Signal(2)
        rvalid = Signal()
        rresp = Signal(2)
        rdata = Signal(32)

        m.d.comb += [
            bus.awready.eq(~aw_full), bus.wready.eq(~w_full), bus.arready.eq(~ar_full),
            bus.bvalid.eq(bvalid), bus.bresp.eq(bresp),
            bus.rvalid.eq(rvalid), bus.rresp.eq(rresp), bus.rdata.eq(rdata),
        ]
        # The held write address is decoded into registers every cycle: one bit per register
        # and window (``aw_reg``/``aw_win``) and whether the target is locked, so that a
        # write's clock enables, its response and ``LOCK_REFUSED`` come from registered decodes
        # instead of address compares. They are read only in the ``wr_go`` cycle, at least two
        # cycles after the address was captured and before the next one can replace it (below),
        # so decoding ``aw_addr`` rather than the incoming ``awaddr`` adds no latency and keeps
        # the host's address logic (the UART bridge's address register) out of the decodes.
        aw_reg = Signal(len(mm.registers))
        aw_win = Signal(len(mm.windows))
        aw_locked = Signal()          # the target is a locked register or window
        def word_hit(addr, reg):
            return addr[2:aw] == (reg.offset >> 2)
        m.d.sync += [
            aw_reg.eq(Cat(*[word_hit(aw_addr, reg) for reg in mm.registers])),
            aw_win.eq(Cat(*[win_hit(aw_addr, win) for win in mm.windows])),
            aw_locked.eq(Cat(*([word_hit(aw_addr, reg) for reg in mm.registers
                                if reg.locked and reg.access != "ro"] +
                               [win_hit(aw_addr, win) for win in mm.windows
                                if win.locked])).any()),
        ]
        with m.If(bus.awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        with m.If(bus.arvalid & ~ar_full):
            m.d.sync += [ar_full.eq(1), ar_addr.eq(bus.araddr)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bvalid.eq(0)
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += rvalid.eq(0)

        refused = Signal(32)
        m.d.comb += self.lock_refused.eq(refused)

        byte_mask = Cat(*[b.replicate(8) for b in w_strb])
        can_write = aw_full & w_full & ~bvalid
        prefer_read = Signal()      # alternates so that neither direction starves
        do_write = Signal()
        do_read = Signal()
        ar_settled = Signal()       # the held read address has reached r_grp_*/r_mux_resp
        ar_settled2 = Signal()      # ... and r_mux_data (below)
        # A write is decided (``do_write``) in one cycle and carried out in the next
        # (``wr_go``, a flip-flop), from the held address's registered decodes and the held
        # data, which the next AW/W beats replace only at the end of that cycle: the decision's
        # terms are then not in front of the write enables of every register and window. The
        # response follows the write. A read waits out both cycles and the one
        # after (``wrote``, ``wrote2``: the read multiplexer's two levels), so that it sees
        # every earlier write.
        wr_go = Signal()
        wrote = Signal()
        wrote2 = Signal()
        m.d.sync += [ar_settled.eq(ar_full & ~(bus.arvalid & ~ar_full)),
                     ar_settled2.eq(ar_full & ar_settled),
                     wr_go.eq(do_write), wrote.eq(wr_go), wrote2.eq(wrote)]
        can_read = ar_full & ar_settled2 & ~wr_go & ~wrote & ~wrote2 & ~rvalid
        # A window read in flight: re/addr are registered, then the register block waits the
        # window's ``read_latency`` cycles (``window_left`` counts them down) and takes the
        # word; nothing else executes meanwhile.
        max_latency = max((w.read_latency for w in mm.windows), default=1)
        window_left = Signal(range(max_latency + 2))
        window_sel = Signal(range(max(len(mm.windows), 1)))
        # ``window_left != 0`` kept in a flip-flop beside the counter (set with it, cleared as
        # it reaches 0): ``idle`` gates every register's and window's write enable, so no
        # counter compare is in front of that fan-out.
        win_busy = Signal()
        idle = ~win_busy
        m.d.comb += [
            do_write.eq(can_write & idle & ~(can_read & prefer_read)),
            do_read.eq(can_read & idle & ~do_write),
        ]
        with m.If(do_write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), prefer_read.eq(1)]
        with m.If(wr_go):
            m.d.sync += bvalid.eq(1)
        with m.If(do_read):
            m.d.sync += [ar_full.eq(0), prefer_read.eq(0)]
        with m.If(window_left != 0):
            m.d.sync += window_left.eq(window_left - 1)

        # Strobes default to 0; write-only registers show their value only with the strobe.
        for reg in mm.registers:
            if reg.access in ("rw", "wo"):
                m.d.sync += getattr(self, f"{reg.port}_we").eq(0)
            if reg.access == "wo":
                m.d.sync += getattr(self, reg.port).eq(0)
        for win in mm.windows:
            port = getattr(self, win.port)
            m.d.sync += [port.we.eq(0), port.re.eq(0)]

        # Writes: every decision comes from the decodes registered with the address.
        w_word = aw_addr[2:aw]
        with m.If(wr_go):
            m.d.sync += bresp.eq(RESP_DECERR)
            with m.If(aw_locked & self.busy):
                m.d.sync += refused.eq(refused + 1)
            for i, reg in enumerate(mm.registers):
                with m.If(aw_reg[i]):
                    if reg.access == "ro":
                        m.d.sync += bresp.eq(RESP_SLVERR)
                        continue
                    allowed = ~self.busy if reg.locked else Const(1)
                    with m.If(allowed):
                        m.d.sync += bresp.eq(RESP_OKAY)
                        m.d.sync += getattr(self, f"{reg.port}_we").eq(1)
                        target = getattr(self, reg.port)
                        if reg.access == "rw":
                            # Byte enables become flip-flop clock enables (no
                            # read-modify-write multiplexers).
                            for b in range((reg.width + 7) // 8):
                                hi = min(8 * b + 8, reg.width)
                                with m.If(w_strb[b]):
                                    m.d.sync += target[8 * b:hi].eq(w_data[8 * b:hi])
                        else:
                            m.d.sync += target.eq(w_data & byte_mask)
                        if reg.name == "CTRL":
                            with m.If(w_data & byte_mask & CTRL_CLEAR_COUNTERS):
                                m.d.sync += refused.eq(0)
                    with m.Else():
                        m.d.sync += bresp.eq(RESP_SLVERR)
            for j, win in enumerate(mm.windows):
                port = getattr(self, win.port)
                with m.If(aw_win[j]):
                    allowed = ~self.busy if win.locked else Const(1)
                    with m.If(allowed):
                        m.d.sync += [
                            bresp.eq(RESP_OKAY), port.we.eq(1), port.wdata.eq(w_data),
                            port.wstrb.eq(w_strb), port.addr.eq(w_word[:win.addr_bits]),
                        ]
                    with m.Else():
                        m.d.sync += bresp.eq(RESP_SLVERR)

        # Reads. The register multiplexer (axi_lite_read_mux.py) is registered in two levels,
        # loaded every cycle from the held address: a read executes once the address has been
        # held for two cycles (``ar_settled2``) and not in the three cycles after a write's
        # decision (``wr_go``, ``wrote``, ``wrote2``), so the word is the register's value
        # after every earlier write. This takes the wide multiplexer and the inputs' own logic
        # out of the path into ``rdata``.
        r_word = ar_addr[2:aw]
        m.submodules.read_mux = read_mux = AXI4LiteReadMux(mm)
        m.d.comb += read_mux.addr.eq(ar_addr)
        for reg in read_sources(mm):
            value = refused if reg.internal else getattr(self, reg.port)
            m.d.comb += getattr(read_mux, reg.port).eq(value)
        r_mux_data, r_mux_resp = read_mux.data, read_mux.resp
        with m.If(do_read):
            m.d.sync += [rvalid.eq(1), rresp.eq(r_mux_resp), rdata.eq(r_mux_data)]
            for i, win in enumerate(mm.windows):
                port = getattr(self, win.port)
                with m.If(win_hit(ar_addr, win)):
                    with m.If(self.busy & Const(int(win.locked))):
                        m.d.sync += rresp.eq(RESP_SLVERR)
                    with m.Else():
                        # Answer once the memory has produced the word.
                        m.d.sync += [
                            rvalid.eq(0), window_left.eq(win.read_latency + 1), window_sel.eq(i),
                            win_busy.eq(1),
                            port.re.eq(1), port.addr.eq(r_word[:win.addr_bits]),
                        ]
        with m.If(window_left == 1):
            m.d.sync += [rvalid.eq(1), rresp.eq(RESP_OKAY), win_busy.eq(0)]
            with m.Switch(window_sel):
                for i, win in enumerate(mm.windows):
                    with m.Case(i):
                        m.d.sync += rdata.eq(getattr(self, win.port).rdata)
        return m
