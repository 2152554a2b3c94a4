"""The kernel library (``docs/kernels.md``): each kernel is a :func:`kernels.kernel`, tested
against numpy (bit-exactly against the reference simulator's arithmetic where it is an
emulation of it, within a derived bound of float64 otherwise) in ``tests/test_kernels_lib.py``.
"""

from kernels.lib.linalg import gemm, gemm_int8, gemm_tn, linear, linear_int8, mlp
from kernels.lib.nn import attention, conv2d, layernorm, rmsnorm, softmax

__all__ = ["gemm", "gemm_int8", "gemm_tn", "linear", "linear_int8", "mlp", "attention",
           "conv2d", "layernorm", "rmsnorm", "softmax"]
