"""Amaranth views of the plain-Python ISA description in ``sim/isa.py``."""

from amaranth.lib import data

from sim import isa

__all__ = ["record_layout"]


def _struct(fields):
    return data.StructLayout({name: width for name, width in fields})


def record_layout(engine):
    """The payload layout of an engine's record stream (slot 0 in the low bits)."""
    return _struct(isa.RECORDS[isa.Engine(engine)])
