"""Make the core's reset a register of the model instead of one of its inputs.

Verilator evaluates the logic that depends on a top-level input combinationally in its
input-combinational region, at every ``eval()``, and the same logic again after the clock
edge. Amaranth's synchronous reset is an input that every register's next value depends on
(``if (rst) next = init``), so nearly all of the next-state logic of the core was evaluated
twice per cycle. :func:`register_reset` renames the top module's ``rst`` input ``rst_d`` and
declares ``rst`` as a register of ``top`` loaded from it at every rising edge: the logic then
depends on state only, and the input-combinational region shrinks to the input ports' own
logic (8x8 core: from 1.18 MB of C++ to 30 kB).

The harness keeps the register equal to ``rst_d`` at every edge, so that it never changes at
an edge; it changes the reset by writing both and settling the model's combinational logic
(``fastsim/harness.cpp``, ``set_rst``), so the core sees the reset in the cycles the harness
asks for, as with the input.
"""

import re

__all__ = ["register_reset", "RESET_INPUT"]

#: The name of the top module's reset input after :func:`register_reset`.
RESET_INPUT = "rst_d"


def register_reset(text, top="top", port="rst"):
    """``text`` (Yosys-written Verilog) with module ``top``'s input ``port`` renamed
    :data:`RESET_INPUT` and ``port`` a register of ``top``, initially 0, loaded from it at
    every rising edge of ``clk``.

    Raises
    ------
    ValueError
        When ``top`` is not in ``text`` or does not declare ``port`` as a one-bit input.
    """
    start = re.search(rf"^module {re.escape(top)}\(", text, re.M)
    if start is None:
        raise ValueError(f"register_reset: no module {top!r}")
    end = text.index("\nendmodule", start.start())
    body = text[start.start():end]
    head_end = body.index(");") + 2
    head, rest = body[:head_end], body[head_end:]
    word = re.compile(rf"(?<![\w$\\]){re.escape(port)}(?![\w$])")
    decl = re.compile(rf"^(\s*)input {re.escape(port)};\n", re.M)
    if len(word.findall(head)) != 1 or len(decl.findall(rest)) != 1:
        raise ValueError(f"register_reset: module {top!r} has no one-bit input {port!r}")
    head = word.sub(RESET_INPUT, head)
    rest = decl.sub(lambda m: (f"{m.group(1)}input {RESET_INPUT};\n"
                               f"{m.group(1)}wire {RESET_INPUT};\n"
                               f"{m.group(1)}reg {port} = 1'h0;\n"
                               f"{m.group(1)}always @(posedge clk) {port} <= {RESET_INPUT};\n"),
                    rest)
    rest = re.sub(rf"^\s*wire {re.escape(port)};\n", "", rest, count=1, flags=re.M)
    return text[:start.start()] + head + rest + text[end:]
