"""Kernel programming for the core: an NKI-like language, its compiler onto the ISA, the
backends it runs on and a library of kernels (``docs/kernels.md``).

    import numpy as np, kernels as kl

    @kl.kernel
    def scale(x):
        out = kl.ndarray(x.shape, kl.fp32)
        kl.store(out, kl.tensor_scalar("multiply", kl.load(x), 2.0))
        return out

    scale(np.ones((8, 16), np.float32))                  # backend="refsim" | "rtl" | "fpga"
"""

from kernels.dtypes import (DTYPES, DType, as_dtype, bf16, fp8_e3m4, fp8_e4m3, fp8_e5m2,
                            fp16, fp32, int8, int32)
from kernels.kernel import Compiled, Kernel, Run, default_config, kernel
from kernels.lang import (ALU_OPS, FUNCTIONS, ROUNDING, DRAMTensor, KernelError, Layout, Tile,
                          activation, broadcast, cast, constant, copy, load, matmul, ndarray,
                          dma_order, new_block, pe_transpose, preload_table, psum_tile, reduce,
                          requantize, sbuf_tile, seed, store, tensor_scalar, tensor_tensor,
                          transpose, wide_dma)

__all__ = ["DTYPES", "as_dtype", "DType", "bf16", "fp8_e3m4", "fp8_e4m3", "fp8_e5m2", "fp16",
           "fp32", "int8", "int32", "Compiled", "Kernel", "Run", "default_config", "kernel",
           "ALU_OPS", "FUNCTIONS", "ROUNDING", "DRAMTensor", "KernelError", "Layout", "Tile",
           "activation", "broadcast", "cast", "constant", "copy", "load", "matmul", "ndarray",
           "dma_order", "new_block", "pe_transpose", "preload_table", "psum_tile", "reduce",
           "requantize", "sbuf_tile", "seed", "store", "tensor_scalar", "tensor_tensor", "transpose",
           "wide_dma"]
