"""Activity-gated engine clocks: clock the vector engine and the tensor engine of the model
only in the cycles in which their state may change.

Verilator schedules the logic of a model by trigger: the registers of a clock, and the
combinational logic that depends only on them, are evaluated only when that clock rises. On
fastsim's copy of the Verilog, :func:`gate_clocks` gives each chosen engine instance of module
``top`` a clock input of its own (``clk_<engine>``) and adds two outputs, ``gate_<engine>``
(the engine may change state at the next rising edge: an OR of its handshakes and pulses)
and ``gate_<engine>_drain`` (a constant, cycles the clock keeps running after the last such
edge). The harness (``fastsim/harness.cpp``) raises ``clk_<engine>`` with ``clk`` when
``gate_<engine>`` is 1 or within ``gate_<engine>_drain`` edges after the last edge at which
it was; otherwise the engine's registers hold and Verilator skips its logic.

Why the outcome is that of the ungated model, cycle for cycle:

- ``gate_<engine>`` is the OR of every one-bit port of the instance whose name holds
  ``valid`` (inputs: a command, an operand, a configuration beat offered; outputs: a
  result offered, which also covers its back-pressure), of ``busy``, ``seed_load``,
  ``idle_hold``, the soft reset and the reset, and of ``~idle_q``. Each of the engine's
  stateful registers (instruction sequencing, counters, credits, accumulators, LUT
  contents, the rounding unit's generators and random-word buffer, tile weights) changes
  only in a cycle where one of these terms is 1, or within a bounded time after one: the
  pipeline, the result FIFO and the rounding unit drain (the engine's ``latency`` and
  ``fifo_depth``), the generators' re-seeding and the buffer's two fills after a
  ``seed_load`` (``LanePrngs.seed_cycles`` + 2), a LUT read's ``rdata`` (2 cycles), the
  tensor array's ``latency`` and ``drain``. The drain count is the sum of these bounds and
  a margin, so the clock runs through all of them.
- The pipelines run free (no clock enable), so an ungated engine also loads its data
  registers in idle cycles; those values travel with a valid bit of 0 and are replaced
  before any valid element reaches the stage that would consume them. The gated engine
  holds them instead; nothing reads them.
- A host transaction (AXI4-Lite) reaches the engine's configuration path through
  combinational logic from the model's inputs, which the harness changes after the edge
  without evaluating the model: while the host port or the reset is active, the harness
  settles the model before it reads the gates, so a gate is never a stale output.

``tests/test_fastsim_gate.py`` runs the same workloads gated and ungated and compares memory,
counters, status, activity and cycle counts, and shows that a gate without its drain count
differs.
"""

import re

from sim.config import CoreConfig

__all__ = ["ENGINES", "GATE_TERMS", "gate_clocks", "gate_terms", "drain_cycles"]

#: The engine instances of module ``top`` that can be gated, by instance name.
ENGINES = ("vector", "tensor")
#: Ports of an engine instance whose value 1 opens its gate (besides every port whose name
#: holds ``valid`` and every reset port); ``idle_q`` opens it when 0.
GATE_TERMS = ("busy", "seed_load", "idle_hold", "reset")
_INVERTED = ("idle_q",)
#: Cycles added to every drain count.
_MARGIN = 16


def drain_cycles(config, engine):
    """Clock edges an engine of ``config`` keeps its clock after its gate's terms fall: the
    longest time its state may still change without a term being 1 (with a margin).

    Parameters
    ----------
    config : sim.config.CoreConfig
    engine : str
        One of :data:`ENGINES`.
    """
    if not isinstance(config, CoreConfig):
        raise TypeError(f"config must be a sim.config.CoreConfig, not {type(config).__name__}")
    if engine == "vector":
        from rtl.round.prng import LanePrngs
        from rtl.vector.engine import VectorEngine
        ve = _unelaborated(VectorEngine(config.rows, depth=config.lut_entries,
                                        n_rand=config.n_rand, units=config.vector_units))
        seed = _unelaborated(LanePrngs(config.rows)).seed_cycles
        # (the random-word buffer's two fills after re-seeding; a LUT read's rdata)
        return ve.latency + ve.fifo_depth + seed + 2 + 2 + _MARGIN
    if engine == "tensor":
        from rtl.tensor.engine import TensorEngine
        te = _unelaborated(TensorEngine(config.rows, config.cols, config.formats,
                                        mul_stages=config.tensor_mul_stages,
                                        add_stages=config.tensor_add_stages,
                                        accumulate=config.tensor_accumulate))
        return te.latency + te.drain + config.rows + config.cols + _MARGIN
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def _unelaborated(component):
    """``component``, made only for its timing properties: Amaranth does not warn that it
    was never elaborated."""
    component._MustUse__used = True
    return component


def _module(text, top):
    start = re.search(rf"^module {re.escape(top)}\(", text, re.M)
    if start is None:
        raise ValueError(f"gate_clocks: no module {top!r}")
    return start.start(), text.index("\nendmodule", start.start())


def _connections(body, engine):
    """(start, end, {port: net}) of the instance ``engine`` in a module body."""
    inst = re.search(rf"^  (\\\S+|\w+)\s+{re.escape(engine)} \(\n(.*?)^  \);$", body,
                     re.M | re.S)
    if inst is None:
        raise ValueError(f"gate_clocks: module top has no instance {engine!r}")
    ports = {}
    for m in re.finditer(r"^\s*\.(\\\S+ |\w+)\((.*?)\),?$", inst.group(2), re.M):
        ports[m.group(1).strip().lstrip("\\")] = m.group(2).strip()
    return inst.start(2), inst.end(2), ports


def _width(body, net):
    """Bits of ``net`` as declared in a module body (1 for a scalar), None for a constant."""
    if re.fullmatch(r"\d+'[hbd][0-9a-fA-F_xz]+", net):
        return None
    name = re.escape(net.rstrip())
    m = re.search(rf"^\s*(?:wire|reg)\s+(\[(\d+):(\d+)\]\s+)?{name}\s*(?:=.*)?;$", body, re.M)
    if m is None:
        raise ValueError(f"gate_clocks: no declaration of {net!r} in module top")
    return 1 if m.group(1) is None else int(m.group(2)) - int(m.group(3)) + 1


def gate_terms(text, engine, top="top"):
    """The nets of module ``top`` whose OR is ``gate_<engine>``: a list of (net, inverted)."""
    start, end = _module(text, top)
    body = text[start:end]
    _, _, ports = _connections(body, engine)
    if "clk" not in ports:
        raise ValueError(f"gate_clocks: instance {engine!r} has no clk port")
    terms = []
    for port, net in sorted(ports.items()):
        base = port.split("$")[0]
        inverted = base in _INVERTED
        if not ("valid" in base or base in GATE_TERMS or base.startswith("rst") or inverted):
            continue
        width = _width(body, net)
        if width is None:                       # a constant: 0 never opens the gate
            if int(re.sub(r"^\d+'[hbd]", "", net) or "0", 16) != 0 or inverted:
                terms.append(("1'h1", False))
            continue
        if width != 1:
            raise ValueError(f"gate_clocks: port {port!r} of {engine!r} is {width} bits wide")
        terms.append((net, inverted))
    names = {p.split("$")[0] for p in ports}
    if "busy" not in names or not any(p.startswith("rst") for p in names):
        raise ValueError(f"gate_clocks: instance {engine!r} has no busy or rst port")
    return terms


def gate_clocks(text, engines, drains, top="top"):
    """``text`` (Yosys-written Verilog) with each instance of ``engines`` in module ``top``
    clocked by a new input ``clk_<engine>``, and outputs ``gate_<engine>`` (the OR of the
    instance's gate terms, :func:`gate_terms`) and ``gate_<engine>_drain`` (16 bits, the
    constant ``drains[engine]``).

    Raises
    ------
    ValueError
        When ``top`` or an instance is missing, or a gate term is not one bit wide.
    """
    for engine in engines:
        if engine not in ENGINES:
            raise ValueError(f"engines must be a subset of {', '.join(ENGINES)}, not "
                             f"{engine!r}")
        terms = gate_terms(text, engine, top)
        start, end = _module(text, top)
        body = text[start:end]
        c0, c1, _ = _connections(body, engine)
        conns = body[c0:c1]
        conns, n = re.subn(r"^(\s*)\.clk\(clk\)", rf"\1.clk(clk_{engine})", conns, flags=re.M)
        if n != 1:
            raise ValueError(f"gate_clocks: instance {engine!r} is not clocked by clk")
        drain = drains[engine]
        if not 0 <= drain < 1 << 16:
            raise ValueError(f"drains[{engine!r}] must be 0 to 65535, not {drain}")
        # (an escaped identifier ends at a space)
        expr = " | ".join(("~" if inv else "") + net + " " for net, inv in terms) or "1'h0"
        head_end = body.index(");") + 2
        head = body[:head_end - 2] + f", clk_{engine}, gate_{engine}, gate_{engine}_drain);"
        decls = (f"\n  input clk_{engine};\n  wire clk_{engine};\n"
                 f"  output gate_{engine};\n  wire gate_{engine};\n"
                 f"  assign gate_{engine} = {expr};\n"
                 f"  output [15:0] gate_{engine}_drain;\n  wire [15:0] gate_{engine}_drain;\n"
                 f"  assign gate_{engine}_drain = 16'd{drain};")
        rest = body[head_end:c0] + conns + body[c1:]
        text = text[:start] + head + decls + rest + text[end:]
    return text
