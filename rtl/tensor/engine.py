"""The tensor engine: systolic array, input skew, output de-skew, tile double-buffering."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out


from sim.config import ENGINE_FORMATS

from .array import ArrayParameters, SystolicArray
from .pe import weight_width

__all__ = ["stationary_layout", "moving_layout", "result_layout", "TensorEngine"]

#: Width of one element on the stationary and moving streams (docs/interfaces.md section 6).
LANE_BITS = 16


def stationary_layout(rows):
    """One stationary beat: column ``m`` of the tile (``stationary[:, m]``)."""
    return data.StructLayout({"data": data.ArrayLayout(LANE_BITS, rows), "fmt": 3, "last": 1})


def moving_layout(rows):
    """One moving beat: ``moving[:, n]``."""
    return data.StructLayout({"data": data.ArrayLayout(LANE_BITS, rows), "last": 1})


def result_layout(cols):
    """One result beat: ``result[:, n]``, FP32 or INT32 per lane."""
    return data.StructLayout({"data": data.ArrayLayout(32, cols), "last": 1})


class TensorEngine(ArrayParameters, wiring.Component):
    """``matmul(stationary[K, M], moving[K, N]) = stationary.T @ moving`` on a weight-stationary
    ``rows x cols`` systolic array (K <= rows, M <= cols, any N).

    One instruction is one stationary tile (M beats on ``stationary``) and one moving group (N
    beats on ``moving``); the i-th group multiplies with the i-th tile. Each PE keeps two weight
    banks: a tile loads into the free bank while the previous group streams through the other, so
    back-to-back instructions leave no bubble when ``N >= drain + M`` (``drain`` below). The
    format is that of the tile (``fmt`` of its first beat): INT8 gives INT32 sums (wrapping),
    FP8 E4M3/E5M2/E3M4, BF16 and FP16 give FP32 sums (exact products, one RNE FP32 addition per
    row, accumulation order in :mod:`rtl.tensor.array`).

    Lanes ``>= K`` of both streams must be zero (the SBUF reader masks them); columns ``>= M`` of
    a tile are loaded with zero weights, so result lanes ``>= M`` are ``+-0`` for finite moving
    values. A group with ``moving_keep`` set on its last beat leaves its tile in place: the next
    group multiplies with the same weights (no reload); the next tile loaded is then paired with
    the group after it.

    Timing (no stall): a moving beat accepted at cycle ``t`` leaves on ``result`` at cycle
    ``t + latency``, ``latency = mul_stages + rows * row_delay + norm_stages + cols``
    (``norm_stages`` 0, or ``min(add_stages, 2)`` with ``accumulate="fused"``); ``row_delay`` is
    ``max(add_stages, 1)`` (1 for an INT8-only engine). One beat per cycle in and out. A tile's
    load may start ``drain = (rows - 1) * row_delay + cols`` advancing cycles after the last beat
    of the group that last used its bank was accepted; it takes M cycles (one per beat).

    Stall: ``result.valid & ~result.ready`` freezes the whole data path (skew, PEs, de-skew) by
    clock enable and deasserts ``moving.ready``; nothing is lost or duplicated. Tile loads are not
    affected by stalls. Reset empties the pipeline and forgets loaded tiles.

    Parameters
    ----------
    rows, cols : int
        Array size, each from 2 to 512.
    formats : collection of Format
        Formats to build logic for (subset of INT8, FP8_E4M3, FP8_E5M2, FP8_E3M4, BF16, FP16;
        default all). A tile with another format gives unspecified (but deterministic) sums.
    mul_stages, add_stages : int
        Pipeline stages of the multiplier and FP32 adder in each PE (0 to 3 and 0 to 4).
    dsp_regs : bool
        INT8-only engines: the PE multipliers' registers are the DSP blocks' own
        (:class:`~rtl.tensor.pe.ProcessingElement`); same cycles and values. Default False.
    accumulate : {"fp32", "fused"}
        Column accumulation (``docs/tensor.md``): ``"fused"`` adds ``norm_stages`` to the
        latency. Default ``"fp32"``.

    Members
    -------
    stationary : In(stream {data: Array(16, rows), fmt: 3, last: 1})
    moving : In(stream {data: Array(16, rows), last: 1})
    moving_keep : In(1)
        Sampled with the last beat of a moving group: 1 keeps the tile for the next group.
    result : Out(stream {data: Array(32, cols), last: 1})
    busy : Out(1)
        A beat is in flight in the array.
    """

    def __init__(self, rows, cols, formats=ENGINE_FORMATS, *, mul_stages=1, add_stages=1,
                 dsp_regs=False, accumulate="fp32"):
        self._check_array(rows, cols, formats, mul_stages, add_stages, dsp_regs, accumulate)
        super().__init__({
            "stationary": In(stream.Signature(stationary_layout(rows))),
            "moving": In(stream.Signature(moving_layout(rows))),
            "moving_keep": In(1),
            "result": Out(stream.Signature(result_layout(cols))),
            "busy": Out(1),
        })

    @property
    def latency(self):
        """Cycles from a moving beat's transfer to its result beat's ``valid`` (no stall)."""
        return self._mul_stages + self._rows * self.row_delay + self.norm_stages + self._cols

    @property
    def drain(self):
        """Advancing cycles after a group's last beat before its weight bank may be reloaded."""
        return (self._rows - 1) * self.row_delay + self._cols

    def describe(self):
        return {"latency": self.latency, "drain": self.drain, "row_delay": self.row_delay,
                "formats": sorted(f.name.lower() for f in self._formats)}

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        D = self.row_delay
        width = weight_width(self._formats)
        m.submodules.array = array = SystolicArray(
            rows, cols, self._formats, mul_stages=self._mul_stages, add_stages=self._add_stages,
            dsp_regs=self._dsp_regs, accumulate=self._accumulate)

        # ``en`` and the bank bookkeeping's events below are kept nets: the result's
        # back-pressure (the core's result skid buffer) then reaches the tile registers
        # through ``en`` -> ``release`` -> a register's input, three LUTs (left to synthesis,
        # which would otherwise route ``en`` through the moving stream's ``last`` and
        # ``use_bank``'s clock enable).
        en = Signal(attrs={"keep": 1})
        L = self.latency
        v_pipe = [Signal(name=f"valid_d{i}") for i in range(L)]
        l_pipe = [Signal(name=f"last_d{i}") for i in range(L)]
        m.d.comb += [
            en.eq(~v_pipe[-1] | self.result.ready),
            array.en.eq(en),
            self.result.valid.eq(v_pipe[-1]),
            self.result.p.last.eq(l_pipe[-1]),
            self.busy.eq(Cat(*v_pipe).any()),
        ]

        # Tile bookkeeping: full[b] = bank b holds a loaded tile not yet consumed;
        # hold[b] = cycles until bank b is no longer read by the array.
        full = Signal(2)
        hold = [Signal(range(self.drain + 1), name=f"hold{b}") for b in range(2)]
        hold_nz = [Signal(name=f"hold{b}_nz") for b in range(2)]     # hold[b] != 0
        fmt = [Signal(3, name=f"fmt{b}") for b in range(2)]
        load_bank = Signal()
        use_bank = Signal()
        ptr = Signal(range(cols))

        # Stationary load into bank `load_bank`, one column per beat.
        st = self.stationary
        load_free = Signal()
        m.d.comb += [
            load_free.eq(Mux(load_bank, ~full[1] & ~hold_nz[1], ~full[0] & ~hold_nz[0])),
            st.ready.eq(load_free),
        ]
        st_take = Signal()
        m.d.comb += st_take.eq(st.valid & st.ready)
        first = Signal()
        m.d.comb += first.eq(ptr == 0)
        for r in range(rows):
            m.d.comb += array.w_data[r].eq(st.p.data[r][:width])
        if array.fused:
            # The tile's format: its first beat's, then the one recorded for the bank.
            m.d.comb += array.w_fmt.eq(Mux(first, st.p.fmt, Mux(load_bank, fmt[1], fmt[0])))
        for c in range(cols):
            sel = Signal(name=f"w_sel{c}")
            m.d.comb += [
                sel.eq(st_take & (first | (ptr == c))),
                array.w_we[c].eq(Mux(load_bank, sel << 1, sel)),
                array.w_zero[c].eq(ptr != c),
            ]
        with m.If(st_take):
            with m.If(first):
                with m.If(load_bank):
                    m.d.sync += fmt[1].eq(st.p.fmt)
                with m.Else():
                    m.d.sync += fmt[0].eq(st.p.fmt)
            with m.If(st.p.last | (ptr == cols - 1)):
                m.d.sync += [ptr.eq(0), load_bank.eq(~load_bank)]
                with m.If(load_bank):
                    m.d.sync += full[1].eq(1)
                with m.Else():
                    m.d.sync += full[0].eq(1)
            with m.Else():
                m.d.sync += ptr.eq(ptr + 1)

        # Moving group through bank `use_bank`.
        # ``bank_full`` (= ``full[use_bank]``) is a flip-flop of its own, loaded with the next
        # cycle's ``full[use_bank']``, so that ``release`` starts from a flip-flop and the bank
        # multiplexer is not in front of the hold counters.
        mv = self.moving
        bank_full = Signal()                    # the group's bank holds its tile
        ends = Signal(attrs={"keep": 1})        # the waiting beat ends a group, releasing it
        release = Signal(attrs={"keep": 1})     # ... and is taken
        # (A release clears the bank it leaves, never the next one, so the next bank's flag is
        # its ``full`` or a tile completing into it.)
        ld_fin = Signal()                       # a stationary tile's last beat is taken
        m.d.comb += ld_fin.eq(st_take & (st.p.last | (ptr == cols - 1)))
        m.d.sync += bank_full.eq(Mux(use_bank ^ release, full[1] | (ld_fin & load_bank),
                                     full[0] | (ld_fin & ~load_bank)))
        m.d.comb += [
            ends.eq(mv.valid & mv.p.last & ~self.moving_keep & bank_full),
            release.eq(ends & en),
            mv.ready.eq(en & bank_full),
        ]
        mv_take = Signal()
        m.d.comb += mv_take.eq(mv.valid & mv.ready)
        for b in range(2):
            with m.If(en & hold_nz[b]):
                m.d.sync += [hold[b].eq(hold[b] - 1), hold_nz[b].eq(hold[b] != 1)]
        with m.If(release):
            m.d.sync += use_bank.eq(~use_bank)
            with m.If(use_bank):
                m.d.sync += [full[1].eq(0), hold[1].eq(self.drain), hold_nz[1].eq(1)]
            with m.Else():
                m.d.sync += [full[0].eq(0), hold[0].eq(self.drain), hold_nz[0].eq(1)]

        # Valid/last travel beside the data; every register advances with `en`.
        with m.If(en):
            m.d.sync += [v_pipe[0].eq(mv_take), l_pipe[0].eq(mv.p.last)]
            m.d.sync += [v_pipe[i].eq(v_pipe[i - 1]) for i in range(1, L)]
            m.d.sync += [l_pipe[i].eq(l_pipe[i - 1]) for i in range(1, L)]

        # Input skew: row r enters the array r * D cycles after row 0.
        cur_fmt = Signal(3)
        m.d.comb += cur_fmt.eq(Mux(use_bank, fmt[1], fmt[0]))
        for r in range(rows):
            x, xb, xf = mv.p.data[r][:width], use_bank, cur_fmt
            for i in range(r * D):
                nx = Signal(width, name=f"skew_r{r}_x{i}")
                nb = Signal(name=f"skew_r{r}_b{i}")
                nf = Signal(3, name=f"skew_r{r}_f{i}")
                with m.If(en):
                    m.d.sync += [nx.eq(x), nb.eq(xb), nf.eq(xf)]
                x, xb, xf = nx, nb, nf
            m.d.comb += [array.x[r].eq(x), array.x_bank[r].eq(xb), array.x_fmt[r].eq(xf)]

        # Output de-skew: column c waits cols - 1 - c cycles for the last column.
        for c in range(cols):
            y = array.psum[c]
            for i in range(cols - 1 - c):
                ny = Signal(32, name=f"deskew_c{c}_{i}")
                with m.If(en):
                    m.d.sync += ny.eq(y)
                y = ny
            m.d.comb += self.result.p.data[c].eq(y)
        return m

