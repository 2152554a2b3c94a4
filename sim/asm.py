"""Assembler and disassembler of the sequencer's ISA (``docs/isa.md``, encodings in
``sim/isa.py``).

Syntax, one instruction per line::

    ; comment (also '#')
    .equ TILE, 128            ; named constant
    start:  li   r1, TILE     ; label, mnemonic, operands separated by commas
            loop r1, end      ; targets are labels or absolute instruction indices
            matmul r3, r4, r5, r6, k=8, m=8, fmt=bf16, sem=1, sem_en=1
    end:    endloop
            .word 0xF0        ; a raw 64-bit word
            halt

Numbers: decimal, ``0x`` hex, ``0b`` binary, negative (two's complement), or an FP32 constant
written with a decimal point or exponent (``1.5``, ``-2e-3``: its FP32 bit pattern). Options of
engine instructions are ``key=value`` fields of the opcode's imm layout; formats, rounding
modes, vector ALU ops and spaces may be given by name (``fmt=bf16 rnd=sr alu=max a_space=psum``).

Errors raise :class:`AsmError` with the line number: ``line 3: unknown mnemonic 'ad'``.
"""

import re
import struct

from sim import isa
from sim.dtypes import Format, RoundMode
from sim.isa import Opcode, OPCODE_INFO, Space, VecAlu

__all__ = ["AsmError", "assemble", "disassemble", "disassemble_one", "MNEMONICS", "ALIASES"]

MNEMONICS = {op.name.lower(): op for op in Opcode}
#: Mnemonics that are another opcode with option defaults of their own (given options win):
#: ``requant`` is ``act`` without the LUT, INT32 in, INT8 out (docs/isa.md, requantization);
#: ``table_pair`` is ``table_ld`` with the paired layout (``isa.TABLE_FUNC_PAIRED``: address
#: words in partition 0, data words in partition 1).
ALIASES = {
    "requant": (Opcode.ACT, {"func": isa.ACT_FUNC_LINEAR, "in_fmt": int(Format.INT32),
                             "out_fmt": int(Format.INT8)}),
    "table_pair": (Opcode.TABLE_LD, {"func": isa.TABLE_FUNC_PAIRED}),
}

_NAMED = {
    "fmt": {f.name.lower(): int(f) for f in Format},
    "rnd": {m.name.lower(): int(m) for m in RoundMode},
    "alu": {a.name.lower(): int(a) for a in VecAlu},
    "a_space": {s.name.lower(): int(s) for s in Space},
}
_NAMED["in_fmt"] = _NAMED["out_fmt"] = _NAMED["fmt"]
_NAMED["b_space"] = _NAMED["a_space"]
# Short aliases for the FP8 formats.
for _k in ("e4m3", "e5m2", "e3m4"):
    _NAMED["fmt"][_k] = int(Format["FP8_" + _k.upper()])

_LABEL = re.compile(r"^([A-Za-z_.][\w.]*)\s*:(.*)$")
_IDENT = re.compile(r"^[A-Za-z_.][\w.]*$")


class AsmError(ValueError):
    """A bad program: ``line`` is 1-based, ``str()`` is ``line N: message``."""

    def __init__(self, line, message):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def _strip(line):
    for c in (";", "#"):
        i = line.find(c)
        if i >= 0:
            line = line[:i]
    return line.strip()


def _number(text, consts, lineno, what="number"):
    t = text.strip()
    if t in consts:
        return consts[t]
    try:
        if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)", t):
            return struct.unpack("<I", struct.pack("<f", float(t)))[0]
        return int(t, 0)
    except ValueError:
        raise AsmError(lineno, f"bad {what} {t!r}") from None


def _register(text, lineno):
    t = text.strip().lower()
    m = re.fullmatch(r"r(\d+)", t)
    if not m:
        raise AsmError(lineno, f"expected a register r0..r63, got {text.strip()!r}")
    n = int(m.group(1))
    if n >= isa.NUM_REGS:
        raise AsmError(lineno, f"register r{n} out of range (r0..r{isa.NUM_REGS - 1})")
    return n


def _split_operands(text):
    return [p.strip() for p in text.split(",")] if text.strip() else []


def assemble(source):
    """Assemble ``source`` (str) into a list of 64-bit instruction words."""
    consts = {}
    labels = {}
    items = []      # (lineno, mnemonic, operand text)
    # Pass 1: labels and constants.
    for lineno, raw in enumerate(source.splitlines(), 1):
        line = _strip(raw)
        while True:
            m = _LABEL.match(line)
            if not m:
                break
            name = m.group(1)
            if name in labels or name in consts:
                raise AsmError(lineno, f"duplicate label {name!r}")
            labels[name] = len(items)
            line = m.group(2).strip()
        if not line:
            continue
        parts = line.split(None, 1)
        mnem = parts[0].lower()
        rest = parts[1] if len(parts) > 1 else ""
        if mnem == ".equ":
            ops = _split_operands(rest)
            if len(ops) != 2 or not _IDENT.match(ops[0]):
                raise AsmError(lineno, ".equ needs a name and a value: .equ NAME, value")
            consts[ops[0]] = _number(ops[1], consts, lineno)
            continue
        items.append((lineno, mnem, rest))
    symbols = dict(consts)
    symbols.update(labels)
    # Pass 2: encode.
    words = []
    for lineno, mnem, rest in items:
        words.append(_encode_line(lineno, mnem, rest, symbols, labels))
    return words


def _encode_line(lineno, mnem, rest, symbols, labels):
    ops = _split_operands(rest)
    if mnem == ".word":
        if len(ops) != 1:
            raise AsmError(lineno, ".word takes one value")
        v = _number(ops[0], symbols, lineno)
        if not 0 <= v < 1 << 64:
            raise AsmError(lineno, f".word value {v} does not fit in 64 bits")
        return v
    alias_defaults = {}
    if mnem in ALIASES:
        op, alias_defaults = ALIASES[mnem]
    elif mnem in MNEMONICS:
        op = MNEMONICS[mnem]
    else:
        raise AsmError(lineno, f"unknown mnemonic {mnem!r}")
    info = OPCODE_INFO[op]
    positional = [o for o in ops if "=" not in o]
    options = [o for o in ops if "=" in o]
    if options and info.imm_layout is None:
        raise AsmError(lineno, f"{mnem} takes no key=value options")
    if len(positional) != len(info.operands):
        want = ", ".join(info.operands) or "no operands"
        raise AsmError(lineno, f"{mnem} expects {len(info.operands)} operand(s) ({want}), "
                               f"got {len(positional)}")
    f = dict(rd=0, rs1=0, rs2=0, rs3=0, imm=0)
    for kind, text in zip(info.operands, positional):
        if kind in ("rd", "rs1", "rs2", "rs3"):
            f[kind] = _register(text, lineno)
        elif kind == "target":
            t = text.strip()
            if _IDENT.match(t) and t not in symbols:
                raise AsmError(lineno, f"undefined label {t!r}")
            f["imm"] = _number(t, symbols, lineno, "target")
        elif kind == "imm":
            v = _number(text, symbols, lineno, "immediate")
            if not -(1 << 31) <= v < (1 << 32):
                raise AsmError(lineno, f"immediate {v} does not fit in 32 bits")
            f["imm"] = v & 0xFFFFFFFF
        else:
            v = _number(text, symbols, lineno, kind)
            lo, width = {"sem": (0, 4), "value": (16, 16), "k": (0, 2), "level": (8, 3)}[kind]
            if not 0 <= v < (1 << width):
                raise AsmError(lineno, f"{kind} must be in 0..{(1 << width) - 1}, not {v}")
            f["imm"] |= v << lo
    if info.imm_layout is not None:
        fields = {**info.defaults, **alias_defaults}
        offs = isa.field_offsets(info.imm_layout)
        for opt in options:
            key, _, val = (s.strip() for s in opt.partition("="))
            key = key.lower()
            if key not in offs or key.startswith("_"):
                allowed = ", ".join(k for k in offs if not k.startswith("_"))
                raise AsmError(lineno, f"unknown option {key!r} for {mnem} (options: {allowed})")
            named = _NAMED.get(key, {})
            v = named[val.lower()] if val.lower() in named else _number(val, symbols, lineno, key)
            fields[key] = v
        try:
            f["imm"] = isa.pack(info.imm_layout, **fields)
        except ValueError as e:
            raise AsmError(lineno, f"{mnem}: {e}") from None
    return isa.encode(op, **f)


def _opts(layout, imm, defaults):
    out = []
    for name, value in isa.unpack(layout, imm).items():
        if name.startswith("_"):
            continue
        if value != defaults.get(name, 0):
            out.append(f"{name}={value}")
    return out


def disassemble_one(word, labels=None):
    """Text of one instruction word (``.word 0x...`` when it is not a canonical encoding, e.g.
    an unmapped opcode or non-zero unused fields). ``labels`` maps target PCs to names."""
    labels = labels or {}
    f = isa.decode(word)
    raw = f".word 0x{word:016x}"
    try:
        op = Opcode(f["op"])
    except ValueError:
        return raw
    info = OPCODE_INFO[op]
    parts, shown = [], []
    for kind in info.operands:
        if kind in ("rd", "rs1", "rs2", "rs3"):
            parts.append(f"r{f[kind]}")
        elif kind == "target":
            parts.append(str(f["imm"]))
        elif kind == "imm":
            parts.append(str(f["imm"]) if f["imm"] < 1 << 31 else hex(f["imm"]))
        else:
            lo, width = {"sem": (0, 4), "value": (16, 16), "k": (0, 2), "level": (8, 3)}[kind]
            parts.append(str((f["imm"] >> lo) & ((1 << width) - 1)))
        shown.append(parts[-1] if kind != "target" else labels.get(f["imm"], parts[-1]))
    if info.imm_layout is not None:
        opts = _opts(info.imm_layout, f["imm"], info.defaults)
        parts += opts
        shown += opts
    mnem = op.name.lower()
    # Only canonical encodings disassemble to a mnemonic: re-encode and compare.
    try:
        if _encode_line(0, mnem, ", ".join(parts), {}, {}) != word:
            return raw
    except AsmError:
        return raw
    return mnem + (" " + ", ".join(shown) if shown else "")


def disassemble(words):
    """Text of a program that re-assembles to the same words: one line per word, labels
    ``L<pc>`` at branch targets inside the program (targets past the end stay numbers)."""
    targets = set()
    for w in words:
        f = isa.decode(w)
        if f["op"] in _OPCODES and "target" in OPCODE_INFO[Opcode(f["op"])].operands:
            if f["imm"] < len(words):
                targets.add(f["imm"])
    labels = {t: f"L{t}" for t in sorted(targets)}
    lines = []
    for pc, w in enumerate(words):
        prefix = f"{labels[pc]}:" if pc in labels else ""
        lines.append(f"{prefix:<8}{disassemble_one(w, labels)}".rstrip())
    return "\n".join(lines) + "\n"


_OPCODES = frozenset(int(o) for o in Opcode)
