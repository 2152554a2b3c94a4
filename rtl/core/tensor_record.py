"""The tensor engine's record adapter: TENSOR records to tensor-controller commands."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.control.layouts import record_layout
from sim import isa
from sim.records import TENSOR_RECORD_FIELDS

__all__ = ["TensorRecordAdapter", "TENSOR_RECORD_FIELDS"]


class TensorRecordAdapter(wiring.Component):
    """TENSOR records (``sim.isa.TENSOR_RECORD``) to ``TensorController`` commands, as
    ``sim.records.tensor_command`` (the truncation to the command's widths aside).

    Combinational, no added latency: a command is the record's fields
    (:data:`TENSOR_RECORD_FIELDS`) with ``sem_en`` set, since the sequencer wants one done
    pulse per record; ``valid`` and ``ready`` pass through.

    Parameters
    ----------
    cmd_layout : Layout
        The controller's command (``TensorController.cmd_layout``).

    Members
    -------
    rec : In(stream.Signature(record_layout(Engine.TENSOR)))
        Records.
    cmd : Out(stream.Signature(cmd_layout))
        Commands, one per record in the same cycle.
    """

    def __init__(self, cmd_layout):
        super().__init__({
            "rec": In(stream.Signature(record_layout(isa.Engine.TENSOR))),
            "cmd": Out(stream.Signature(cmd_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        r, c = self.rec.payload, self.cmd.payload
        m.d.comb += [
            self.cmd.valid.eq(self.rec.valid),
            self.rec.ready.eq(self.cmd.ready),
            *(getattr(c, f).eq(getattr(r, f)) for f in TENSOR_RECORD_FIELDS),
            c.sem_en.eq(1),
        ]
        return m
