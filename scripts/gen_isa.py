"""Write the encoding tables of ``docs/isa.md`` from ``sim/isa.py``.

Usage::

    python -m scripts.gen_isa           # rewrite the generated blocks of docs/isa.md
    python -m scripts.gen_isa --check   # exit 1 if docs/isa.md is out of date

``docs/isa.md`` is prose with generated blocks: each block starts with a line
``<!-- generated: NAME -->`` and ends with ``<!-- end generated -->``; only the text between
the two lines is rewritten. The bit positions come from the layouts (``INSTR_FIELDS``, the
records, the immediates, ``MICRO_FIELDS``), the values from the enums, and each description
from the comment on the same source line of ``sim/isa.py`` (the one place a field is
described), so a field moved or renamed there changes the docs.
"""

import argparse
import inspect
import pathlib
import re
import sys

from sim import isa

__all__ = ["BLOCKS", "render", "main"]

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "isa.md"

_BEGIN = re.compile(r"^<!-- generated: ([\w-]+) -->$")
_END = "<!-- end generated -->"
_TUPLE = re.compile(r'\("(\w+)",\s*(\d+)\)')


def _source_lines():
    return inspect.getsource(isa).splitlines()


def _layout_comments(name):
    """``{field: comment}`` for the list ``name = [...]`` of sim/isa.py: each field gets the
    comment of its source line (several fields on one line share it)."""
    lines = _source_lines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = ["))
    out = {}
    for line in lines[start:]:
        code, _, comment = line.partition("#")
        comment = re.sub(r"^slot \d+:?\s*", "", comment.strip())
        for field, _width in _TUPLE.findall(code):
            out[field] = comment
        if code.rstrip().endswith("]"):
            break
    return out


def _enum_comments(cls):
    """``{member: comment}`` from the members' trailing comments (a comment-only line
    continues the previous member's)."""
    out, last = {}, None
    for line in inspect.getsource(cls).splitlines()[1:]:
        m = re.match(r"\s+(\w+) = [^#]+(?:#\s*(.*))?$", line)
        if m:
            last = m.group(1)
            out[last] = (m.group(2) or "").strip()
        elif last and re.match(r"\s+#", line):
            out[last] = (out[last] + " " + line.strip().lstrip("#").strip()).strip()
    return out


def _bits(pos, width):
    return f"[{pos}]" if width == 1 else f"[{pos + width - 1}:{pos}]"


def _cell(text):
    return text.replace("|", "\\|").replace("<", "&lt;")


def _drop_empty_notes(rows):
    """The table without its last column when no row has a note."""
    if all(row.endswith("|  |") for row in rows[2:]):
        return [row[:row.rstrip("|").rstrip().rfind("|") + 1] for row in rows]
    return rows


def _layout_table(name, *, slots=False):
    layout = getattr(isa, name)
    notes = _layout_comments(name)
    head = ["| slot | bits | field | width | note |", "|---|---|---|---|---|"] if slots else \
        ["| bits | field | width | note |", "|---|---|---|---|"]
    rows = []
    for field, (pos, width) in isa.field_offsets(layout).items():
        note = _cell(notes.get(field, ""))
        if field.startswith("_"):
            note = note or "reserved, write 0"
        if slots:
            rows.append(f"| {pos // 32} | {_bits(pos % 32, width)} | `{field}` | {width} | "
                        f"{note} |")
        else:
            rows.append(f"| {_bits(pos, width)} | `{field}` | {width} | {note} |")
    return _drop_empty_notes(head + rows)


def _enum_table(cls):
    notes = _enum_comments(cls)
    rows = ["| value | name | note |", "|---|---|---|"]
    for member in cls:
        rows.append(f"| {int(member)} | `{member.name}` | {_cell(notes.get(member.name, ''))} |")
    return _drop_empty_notes(rows)


def _opcode_table():
    imm_names = {id(getattr(isa, n)): n for n in ("DMA_IMM", "MATMUL_IMM", "VEC_IMM")}
    rows = ["| opcode | mnemonic | operands | options (imm layout) |", "|---|---|---|---|"]
    for op in isa.Opcode:
        info = isa.OPCODE_INFO[op]
        layout = imm_names.get(id(info.imm_layout), "") if info.imm_layout else ""
        operands = ", ".join(info.operands) or "-"
        rows.append(f"| 0x{int(op):02X} | `{op.name.lower()}` | {operands} | "
                    f"{'`' + layout + '`' if layout else '-'} |")
    first, last = isa.USER_OPCODES[0], isa.USER_OPCODES[-1]
    rows.append(f"| 0x{first:02X}-0x{last:02X} | - | - | free for run-time microcode |")
    return rows


def _section(title, rows):
    return [f"**{title}**", ""] + rows + [""]


#: Generated block name -> function returning its lines.
BLOCKS = {
    "instruction-word": lambda: _layout_table("INSTR_FIELDS"),
    "opcodes": _opcode_table,
    "records": lambda: sum((_section(f"`{n}` ({isa.layout_width(getattr(isa, n))} bits)",
                                     _layout_table(n, slots=True))
                            for n in ("DMA_RECORD", "TENSOR_RECORD", "VECTOR_RECORD")), [])[:-1],
    "immediates": lambda: sum((_section(f"`{n}`", _layout_table(n))
                               for n in ("DMA_IMM", "MATMUL_IMM", "VEC_IMM", "AG_IMM",
                                         "SEM_IMM")), [])[:-1],
    "vector-enums": lambda: (_section("`VecOp` (record field `op`)", _enum_table(isa.VecOp))
                             + _section("`VecAlu` (record field `alu`)",
                                        _enum_table(isa.VecAlu))[:-1]),
    "micro-word": lambda: _layout_table("MICRO_FIELDS"),
    "micro-enums": lambda: sum((_section(f"`{c.__name__}`", _enum_table(c))
                                for c in (isa.USeq, isa.UCond, isa.USrc, isa.UAlu, isa.UDst,
                                          isa.USpecial)), [])[:-1],
    "error-bits": lambda: _enum_table(isa.ErrorBit),
}


def render(text):
    """``text`` (docs/isa.md) with every generated block rewritten; raises ValueError on an
    unknown block name or a block without its end line."""
    out, lines, i = [], text.split("\n"), 0
    seen = set()
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = _BEGIN.match(line)
        i += 1
        if not m:
            continue
        name = m.group(1)
        if name not in BLOCKS:
            raise ValueError(f"docs/isa.md: unknown generated block {name!r}; blocks are "
                             f"{', '.join(BLOCKS)}")
        seen.add(name)
        while i < len(lines) and lines[i] != _END:
            i += 1
        if i == len(lines):
            raise ValueError(f"docs/isa.md: generated block {name!r} has no {_END!r} line")
        out.extend(BLOCKS[name]())
    missing = set(BLOCKS) - seen
    if missing:
        raise ValueError(f"docs/isa.md: generated blocks missing: {', '.join(sorted(missing))}")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.gen_isa",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if docs/isa.md differs from sim/isa.py")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print("out of date: docs/isa.md (run python -m scripts.gen_isa)")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
