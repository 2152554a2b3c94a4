"""RecordCheck (``rtl/core/record_check.py``): the per-slot terms and the verdict on them give
``sim.isa``'s answer, for random and edge field values, with some slots not written."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.core.record_check import RECORD_TERMS, RecordCheck
from sim import isa
from sim.dtypes import Format


@pytest.mark.parametrize("rows, cols, formats", [
    (2, 2, (Format.BF16, Format.INT8)),
    (4, 3, (Format.FP8_E4M3, Format.FP8_E5M2, Format.FP16)),
    (32, 17, (Format.FP8_E3M4,)),
])
def test_record_check_terms_match_isa(rows, cols, formats):
    """The terms of a written slot are ``*_slot_terms`` of its word, those of a slot not
    written ``*_blank_terms`` (the sequencer's choice, made here by the test); the verdict
    ``*_illegal`` must be ``sim.isa.*_record_error``'s."""
    dut = RecordCheck(rows, cols, formats)
    rng = random.Random(rows)
    edges = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 15, 16, 17, 255, 256, rows, rows + 1, cols,
             cols + 1]
    ints = [int(f) for f in formats]
    checks = ((isa.Engine.TENSOR, "tensor",
               lambda r: isa.tensor_record_error(r, rows, cols, ints)),
              (isa.Engine.VECTOR, "vector", isa.vector_record_error))
    verdicts = {True: 0, False: 0}

    async def testbench(ctx):
        for it in range(1500):
            for e, name, reference in checks:
                lay = isa.RECORDS[e]
                fields = {n: (rng.choice(edges) if rng.random() < 0.7 else rng.getrandbits(w))
                          & ((1 << w) - 1) for n, w in lay}
                word = isa.pack(lay, **fields)
                nslots = isa.RECORD_SLOTS[e]
                written = rng.getrandbits(nslots) if it % 3 == 0 else (1 << nslots) - 1
                held = getattr(dut, name + "_terms")
                record = 0
                for s in range(nslots):
                    value = word >> 32 * s & 0xFFFFFFFF
                    ctx.set(dut.slot_data, value)
                    if written >> s & 1:
                        record |= value << 32 * s
                        ctx.set(held[s], ctx.get(getattr(dut, name + "_slot_terms")[s]))
                    else:
                        ctx.set(held[s], ctx.get(getattr(dut, name + "_blank_terms")[s]))
                want = reference(isa.unpack(lay, record))
                got = ctx.get(getattr(dut, name + "_illegal"))
                assert got == (want is not None), \
                    f"{name} record {record:#x}: illegal {got}, sim.isa says {want!r}"
                verdicts[bool(got)] += 1

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()
    assert all(verdicts.values()), verdicts


@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"rows": 0, "cols": 2}, ValueError, "rows must be an integer from 1 to 1024, not 0"),
    ({"rows": 4, "cols": 2, "terms": RECORD_TERMS - 1}, ValueError,
     f"terms must be an integer from {RECORD_TERMS} to 32, not {RECORD_TERMS - 1}"),
    ({"rows": 4, "cols": 2, "formats": ()}, ValueError, "formats must contain at least one"),
])
def test_record_check_parameters(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        RecordCheck(**kwargs)
