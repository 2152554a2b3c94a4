"""Multipliers whose operand registers sit inside the FPGA's DSP blocks.

On the ECP5 a multiplier fed from flip-flops in the fabric and read by flip-flops in the fabric
pays two routed hops to and from the DSP column around the MULT18X18D's combinational delay,
more than a 100 MHz cycle. With its A and B input registers in use
(``REG_INPUTA_CLK``/``REG_INPUTB_CLK`` on CLK0) the hop into the block ends at a register. Yosys
maps ``*`` to MULT18X18D without them, so :func:`registered_product`
instantiates the block itself when the platform is an ECP5 and otherwise registers the
operands in the fabric; both give the same values cycle for cycle.

A product read by a longer path can also take the block's output register (``out_reg``,
``REG_OUTPUT_CLK``: one more cycle of latency): the product then leaves the block early in
the cycle, and the multiply lies between the two registers, inside the block.

``fpga/sim/MULT18X18D.v`` is a behavioural model of the block's subset used here (unsigned or
signed operands, input registers and optionally the output register on CLK0 with CE0, no
pipeline register), for simulating the ECP5 netlist (``tests/test_dsp_regs.py``).
"""

from amaranth.hdl import ClockSignal, Const, Instance, Signal

__all__ = ["ECP5_TARGET", "is_ecp5", "mult18x18d", "registered_product"]


def is_ecp5(platform):
    """Whether ``platform`` (an Amaranth platform, or None) is a Lattice ECP5."""
    return getattr(platform, "family", None) == "ecp5"


class _ECP5Target:
    """What a unit sees of an ECP5 board's platform when elaborated without one (``family``,
    all that :func:`is_ecp5` reads): ``scripts.unit_fmax`` and the netlist tests pass it."""
    family = "ecp5"


#: The stand-in platform for elaborating a unit as the ECP5 builds do.
ECP5_TARGET = _ECP5Target()


def mult18x18d(m, a, b, en, name, *, out_reg=False, signed=False):
    """``a * b`` (each at most 18 bits; unsigned, or two's complement with ``signed``) in one
    MULT18X18D whose input registers take ``a`` and ``b`` on every ``sync`` clock edge with
    ``en`` high: the product of the operands registered at the last enabled edge,
    ``len(a) + len(b)`` bits (a signed value with ``signed``). With ``out_reg`` the block's
    output register takes that product on the next enabled edge (latency 2)."""
    if not 1 <= len(a) <= 18 or not 1 <= len(b) <= 18:
        raise ValueError(f"mult18x18d's operands must be 1 to 18 bits wide, not {len(a)} and "
                         f"{len(b)}")
    a18, b18, p = Signal(18, name=f"{name}_a"), Signal(18, name=f"{name}_b"), \
        Signal(36, name=f"{name}_p")
    m.d.comb += [a18.eq(a.as_signed() if signed else a),      # (sign-extended to 18 bits)
                 b18.eq(b.as_signed() if signed else b)]
    ports = {f"i_A{i}": a18[i] for i in range(18)}
    ports.update({f"i_B{i}": b18[i] for i in range(18)})
    ports.update({f"i_C{i}": Const(0) for i in range(18)})
    ports.update({f"o_P{i}": p[i] for i in range(36)})
    m.submodules[name] = Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK="CLK0", p_REG_INPUTA_CE="CE0", p_REG_INPUTA_RST="RST0",
        p_REG_INPUTB_CLK="CLK0", p_REG_INPUTB_CE="CE0", p_REG_INPUTB_RST="RST0",
        p_REG_INPUTC_CLK="NONE", p_REG_PIPELINE_CLK="NONE",
        p_REG_OUTPUT_CLK="CLK0" if out_reg else "NONE", p_REG_OUTPUT_CE="CE0",
        p_REG_OUTPUT_RST="RST0",
        p_GSR="DISABLED", p_RESETMODE="SYNC",
        i_SIGNEDA=Const(int(signed)), i_SIGNEDB=Const(int(signed)), i_SOURCEA=Const(0),
        i_SOURCEB=Const(0),
        i_CLK0=ClockSignal("sync"), i_CE0=en, i_RST0=Const(0),
        **ports)
    product = p[:len(a) + len(b)]
    return product.as_signed() if signed else product


def registered_product(m, platform, a, b, en, name, *, out_reg=False, signed=False):
    """``a * b`` (unsigned, or two's complement with ``signed``; each at most 18 bits) of the
    operands registered at the last ``sync`` edge with ``en`` high (registers without reset;
    the product means nothing before the first enabled edge): inside a MULT18X18D on an ECP5
    (:func:`mult18x18d`; a constant ``b`` is registered there too), in the fabric elsewhere
    (a constant ``b`` without a register). ``out_reg``: the product registered once more at
    the next enabled edge (the block's output register on an ECP5)."""
    if is_ecp5(platform):
        return mult18x18d(m, a, b, en, name, out_reg=out_reg, signed=signed)
    ra = Signal(len(a), name=f"{name}_ra", reset_less=True)
    with m.If(en):
        m.d.sync += ra.eq(a)
    if isinstance(b, Const):        # (a constant needs no register)
        rb = b
    else:
        rb = Signal(len(b), name=f"{name}_rb", reset_less=True)
        with m.If(en):
            m.d.sync += rb.eq(b)
    p = Signal(len(a) + len(b), name=f"{name}_p")
    m.d.comb += p.eq(ra.as_signed() * rb.as_signed() if signed else ra * rb)
    if out_reg:
        rp = Signal(len(p), name=f"{name}_rp", reset_less=True)
        with m.If(en):
            m.d.sync += rp.eq(p)
        p = rp
    return p.as_signed() if signed else p
