"""The software-pipelined streaming GEMM of ``cocotb_tests/test_core_profile.py`` (the large
GEMM of ``python -m scripts.bench core``) on the reference simulator, and the float32 emulation
that checks the RTL run of the full-size program (too long for the reference simulator)."""

import ml_dtypes
import numpy as np
import pytest

from cocotb_tests.test_core_profile import (gemm_stream_layout, gemm_stream_program,
                                            stream_config, stream_reference)
from sim.asm import assemble
from sim.dtypes import Format
from sim.refsim import RefSim


def _bf16(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


@pytest.mark.parametrize("KT, MT, NC, NCH, G", [
    (2, 4, 8, 5, 2), (2, 4, 8, 2, 2), (3, 2, 8, 3, 1), (1, 2, 8, 1, 2), (2, 2, 4, 4, 2)])
def test_stream_program_on_refsim(KT, MT, NC, NCH, G):
    """The program (tiling, double buffers, semaphores) computes W.T @ X bit-exactly as the
    emulation does; the emulation is within the float64 bound."""
    P = C = 8
    K, M, N = KT * P, MT * C, NCH * NC
    rng = np.random.default_rng(KT * 1000 + MT * 100 + NCH)
    w, x = _bf16(rng.standard_normal((K, M))), _bf16(rng.standard_normal((K, N)))
    X_EXT, O_EXT = 0x8000, 0x20000
    words = assemble(gemm_stream_program(P=P, C=C, KT=KT, MT=MT, NC=NC, NCH=NCH, G=G,
                                         w_ext=0, x_ext=X_EXT, o_ext=O_EXT))
    lay = gemm_stream_layout(P=P, C=C, KT=KT, MT=MT, NC=NC, G=G)
    ref = RefSim(words, partitions=P, cols=C, sbuf_depth=1 << (lay["sbuf_words"] - 1).bit_length(),
                 psum_depth=1 << (lay["psum_words"] - 1).bit_length(), ext_bytes=1 << 19,
                 pmem_depth=2048, check=True, formats=[Format.BF16], races=True)
    ref.ext[:w.nbytes] = np.frombuffer(w.tobytes(), np.uint8)
    ref.ext[X_EXT:X_EXT + x.nbytes] = np.frombuffer(x.tobytes(), np.uint8)
    ref.run()
    assert ref.error == 0 and not ref.skipped and not ref.races, ref.races_error()
    got = ref.ext[O_EXT:O_EXT + M * N * 4].view(np.uint32).reshape(M, N)
    exp = stream_reference(w, x, P)
    assert np.array_equal(got, exp)
    wf = w.view(ml_dtypes.bfloat16).astype(np.float64)
    xf = x.view(ml_dtypes.bfloat16).astype(np.float64)
    bound = (K + 1) * 2.0 ** -23 * (np.abs(wf).T @ np.abs(xf))
    assert np.all(np.abs(exp.view(np.float32) - wf.T @ xf) <= bound)


def test_stream_reference_differs_from_a_wrong_order():
    """The emulation is sensitive to the accumulation order (so agreeing with it means
    something): summing K in one pass instead of per 8-row tile changes some results."""
    rng = np.random.default_rng(7)
    w, x = _bf16(rng.standard_normal((64, 8))), _bf16(rng.standard_normal((64, 64)))
    tiled = stream_reference(w, x, 8)
    flat = stream_reference(w, x, 64)
    assert not np.array_equal(tiled, flat)


def test_stream_config_fits_default_shape():
    cfg = stream_config(8)
    lay = gemm_stream_layout(P=8, C=8, KT=24, MT=24, NC=32, G=4)
    assert lay["sbuf_words"] <= cfg["sbuf_depth"] and lay["psum_words"] <= cfg["psum_depth"]
    words = assemble(gemm_stream_program(P=8, C=8, KT=24, MT=24, NC=32, NCH=24, G=4,
                                         w_ext=0, x_ext=0x20000, o_ext=0x80000))
    assert len(words) <= cfg["pmem_depth"]
