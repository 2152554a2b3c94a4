"""Merge the identical modules of a Yosys-written Verilog file, so that one Verilog module
stands for every instance of one Amaranth elaboratable (``pe_r0_c1``, ``pe_r0_c2``, ...).

Amaranth gives every instance its own module, named by its place in the hierarchy, and Yosys
numbers some of the signals it makes (``\\port$48716$0``, ``\\$auto$...$71``) with counters
that run over the whole design. Two modules are merged when their texts are the same once
their own names are set aside, their numbered identifiers are replaced by their order of first
appearance, and the modules they instantiate have been merged: they then describe the same
logic. Modules are visited children first, so identical subtrees collapse bottom-up. The
module that stays (the first of its class in the file) keeps its names; the instantiations of
a dropped one name the kept module and its port names.

This module is applied to fastsim's copy of the Verilog only; hierarchical Verilation
(``fastsim.build``, ``hier="pe"``) needs one module per class of instance to compile it once.
"""

import re

__all__ = ["merge_modules", "module_names", "instances", "mark_hier_blocks", "plain_name"]

#: An identifier: escaped (backslash up to white space) or simple.
_IDENT = re.compile(r"\\\S+|[A-Za-z_][A-Za-z0-9_$]*")
#: An identifier carrying a number made by a design-wide counter (``$`` then a digit).
_NUMBERED = re.compile(r"\$[0-9]")
_MODULE = re.compile(r"^module\s+(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)", re.M)
_INSTANCE = re.compile(r"^(\s+)(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)(\s+)(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)"
                       r"(\s*\()\s*$")
_PORT = re.compile(r"^(\s*\.)(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)(\s*\()")


def _split(text):
    """The file as ``([(name, text)], tail)``: a module's text runs from the end of the
    previous module (its attribute lines, blank lines and comments) to its ``endmodule``."""
    modules, pending, name = [], [], None
    for line in text.splitlines(keepends=True):
        pending.append(line)
        if name is None:
            m = _MODULE.match(line)
            if m:
                name = m.group(1)
        elif line.startswith("endmodule"):
            modules.append((name, "".join(pending)))
            pending, name = [], None
    if name is not None:
        raise ValueError(f"module {name} has no endmodule")
    return modules, "".join(pending)


def module_names(text):
    """Names of the modules defined in ``text``, in order."""
    return [m.group(1) for m in _MODULE.finditer(text)]


def instances(body, known):
    """(module, instance) pairs that ``body`` instantiates, of the modules in ``known``."""
    out = []
    for line in body.splitlines():
        m = _INSTANCE.match(line)
        if m and m.group(2) in known:
            out.append((m.group(2), m.group(4)))
    return out


def _rewrite_instances(body, known, rep, port_map):
    """``body`` with each instantiation of a merged module naming its kept module and the
    kept module's port names."""
    out, child = [], None
    for line in body.splitlines(keepends=True):
        if child is None:
            m = _INSTANCE.match(line.rstrip("\n"))
            if m and m.group(2) in known:
                child = m.group(2)
                line = (m.group(1) + rep[child] + m.group(3) + m.group(4) + m.group(5) +
                        line[len(line.rstrip("\n")):])
        else:
            if line.strip() == ");":
                child = None
            else:
                m = _PORT.match(line)
                if m and m.group(2) in port_map[child]:
                    line = m.group(1) + port_map[child][m.group(2)] + line[m.end(2):]
        out.append(line)
    return "".join(out)


def _key(name, body):
    """The text of a module with its own name set aside and its numbered identifiers
    replaced by their order of first appearance; also those identifiers in that order."""
    parts, numbered, index, pos = [], [], {}, 0
    for m in _IDENT.finditer(body):
        ident = m.group(0)
        if ident == name:
            sub = "\0self"
        elif m.start() > 0 and body[m.start() - 1] == ".":
            # A port name in an instantiation belongs to the child, whose kept module's
            # port names every instantiation now uses: compared as it is.
            continue
        elif _NUMBERED.search(ident):
            if ident not in index:
                index[ident] = len(numbered)
                numbered.append(ident)
            sub = f"\0n{index[ident]}"
        else:
            continue
        parts.append(body[pos:m.start()])
        parts.append(sub)
        pos = m.end()
    parts.append(body[pos:])
    return "".join(parts), numbered


def merge_modules(text):
    """Return ``(text, classes)``: the Verilog ``text`` with identical modules merged, and a
    dict from each kept module's name to the names of the modules it stands for (itself
    first). The top module (never instantiated) is always kept."""
    modules, tail = _split(text)
    bodies = dict(modules)
    if len(bodies) != len(modules):
        raise ValueError("a module is defined twice")
    known = set(bodies)
    children = {n: [c for c, _ in instances(b, known)] for n, b in modules}
    order, state = [], {}

    def visit(n):
        stack = [(n, iter(children[n]))]
        state[n] = 1
        while stack:
            node, it = stack[-1]
            for c in it:
                if state.get(c) == 1:
                    raise ValueError(f"module {c} instantiates itself")
                if c not in state:
                    state[c] = 1
                    stack.append((c, iter(children[c])))
                    break
            else:
                stack.pop()
                state[node] = 2
                order.append(node)

    for n, _ in modules:
        if n not in state:
            visit(n)
    rep, port_map, seen, classes, new_body = {}, {}, {}, {}, {}
    for n in order:
        body = _rewrite_instances(bodies[n], known, rep, port_map)
        key, numbered = _key(n, body)
        if key in seen:
            keep, keep_numbered = seen[key]
            rep[n] = keep
            port_map[n] = dict(zip(numbered, keep_numbered))
            classes[keep].append(n)
        else:
            seen[key] = (n, numbered)
            rep[n], port_map[n] = n, {}
            classes[n] = [n]
            new_body[n] = body
    out = [new_body[n] for n, _ in modules if n in new_body] + [tail]
    return "".join(out), classes


def plain_name(name):
    """A simple identifier for the module ``name`` (``\\top.a.pe_r0_c1`` becomes
    ``top_a_pe_r0_c1``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name.lstrip("\\"))


def mark_hier_blocks(text, names):
    """``text`` with each module of ``names`` renamed to its :func:`plain_name` (Verilator
    does not find a hierarchy block by an escaped name) and given a
    ``/*verilator hier_block*/`` comment."""
    defined = module_names(text)
    known = set(defined)
    rename = {}
    for n in names:
        if n not in known:
            raise ValueError(f"no module named {n}")
        rename[n] = plain_name(n)
    if len(set(rename.values()) | (known - set(rename))) != len(known):
        raise ValueError("a plain module name would name two modules")
    out, header = [], False
    for line in text.splitlines(keepends=True):
        m = _MODULE.match(line)
        if m and m.group(1) in rename:
            line = f"module {rename[m.group(1)]} " + line[m.end():].lstrip()
            header = True
        if header:
            # The comment goes after the header, which Yosys wraps over several lines.
            out.append(line)
            if line.rstrip().endswith(";"):
                out.append("  /*verilator hier_block*/\n")
                header = False
            continue
        m = _INSTANCE.match(line.rstrip("\n"))
        if m and m.group(2) in rename:
            line = m.group(1) + rename[m.group(2)] + " " + line[m.end(2):].lstrip(" ")
        out.append(line)
    return "".join(out)
