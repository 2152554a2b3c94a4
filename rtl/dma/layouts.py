"""The DMA's record layout, shared by the engine and its units."""

from amaranth.lib import data

from sim.isa import DMA_RECORD

__all__ = ["DmaRecord"]

#: The record the sequencer issues (flat, slot 0 in the least significant bits).
DmaRecord = data.StructLayout({name: width for name, width in DMA_RECORD})
