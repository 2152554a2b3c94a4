"""The shipped LUT functions of the vector engine (table specs for ``sim.lut.compile_table``).

``SHIPPED`` maps a name to its :class:`sim.lut.TableSpec`; :func:`table` compiles (and caches)
one. ``reference`` is the float64 function of the engine input that the accuracy benchmark
(``scripts/bench_lut.py``) compares with; ``domain`` is where it measures. Outside the binades
each table has a defined behaviour (``under``/``over``: saturation, linear extrapolation or
exact coefficients), documented in ``docs/vector.md``.
"""

import functools
import math

import numpy as np

from sim.lut import TableSpec, compile_table
from sim.vector import RangeMode

__all__ = ["SHIPPED", "table", "erf", "gelu", "gelu_tanh", "sigmoid", "softplus"]

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x):
    return _erf(np.asarray(x, dtype=np.float64)).astype(np.float64)


def sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))


def softplus(x):
    x = np.asarray(x, dtype=np.float64)
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def gelu(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _phi(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _gelu_grad(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * _phi(x)


def _silu(x):
    return np.asarray(x, dtype=np.float64) * sigmoid(x)


def _silu_grad(x):
    s = sigmoid(x)
    return s * (1.0 + np.asarray(x, dtype=np.float64) * (1.0 - s))


def _mish(x):
    return np.asarray(x, dtype=np.float64) * np.tanh(softplus(x))


_IDENT = (0.0, 1.0, 0.0)
_ZERO = (0.0, 0.0, 0.0)
_LN2 = math.log(2.0)
_LOG2E = 1.0 / math.log(2.0)
_NORMAL = 2.0 ** -126
_MAXF = 3.3895313892515355e38   # BF16 max finite

SHIPPED = {s.name: s for s in [
    TableSpec("identity", lambda v: v, center=-126, under=_IDENT, over=_IDENT,
              domain=(-_MAXF, _MAXF), doc="y = x, exact"),
    TableSpec("relu", lambda v: np.maximum(v, 0.0), center=-126, under=_ZERO, over=_IDENT,
              domain=(-_MAXF, _MAXF), doc="exact"),
    TableSpec("gelu", gelu, center=-10, top_neg=3, top_pos=3, under=0.0, over=_IDENT,
              domain=(-6.0, _MAXF)),
    TableSpec("gelu_tanh", gelu_tanh, center=-10, top_neg=3, top_pos=3, under=0.0, over=_IDENT,
              domain=(-6.0, _MAXF)),
    TableSpec("silu", _silu, center=-10, top_neg=5, top_pos=4, under=0.0, over=_IDENT,
              domain=(-20.0, _MAXF)),
    TableSpec("sigmoid", sigmoid, center=-10, top_neg=5, top_pos=4, under=0.0, over=1.0,
              domain=(-20.0, _MAXF)),
    TableSpec("tanh", np.tanh, center=-8, top_neg=4, top_pos=4, under=-1.0, over=1.0,
              domain=(-_MAXF, _MAXF)),
    TableSpec("softplus", softplus, center=-10, top_neg=5, top_pos=4, under=0.0, over=_IDENT,
              domain=(-20.0, _MAXF)),
    TableSpec("mish", _mish, center=-10, top_neg=5, top_pos=4, under=0.0, over=_IDENT,
              domain=(-20.0, _MAXF)),
    TableSpec("exp", lambda v: np.exp2(v), mode=RangeMode.EXP2, center=-12, top_neg=0,
              top_pos=0, pre=_LOG2E, reference=np.exp, domain=(-87.0, 88.0)),
    TableSpec("log", np.log, mode=RangeMode.LOG, center=0, top_pos=1, post=_LN2,
              domain=(_NORMAL, _MAXF)),
    TableSpec("reciprocal", lambda v: 1.0 / v, mode=RangeMode.RECIP, center=0, top_pos=1,
              reference=lambda x: 1.0 / x, domain=(-2.0 ** 126, 2.0 ** 126),
              doc="domain excludes |x| < 2**-126 (DAZ) via the benchmark's normal filter"),
    TableSpec("rsqrt", lambda v: 1.0 / np.sqrt(v), mode=RangeMode.RSQRT, center=0, top_pos=2,
              reference=lambda x: 1.0 / np.sqrt(x), domain=(_NORMAL, _MAXF)),
    TableSpec("sqrt", np.sqrt, mode=RangeMode.SQRT, center=0, top_pos=2,
              domain=(_NORMAL, _MAXF)),
    TableSpec("erf", erf, center=-8, top_neg=3, top_pos=3, under=-1.0, over=1.0,
              domain=(-_MAXF, _MAXF)),
    TableSpec("sin", np.sin, center=-8, top_neg=2, top_pos=2, under=0.0, over=0.0,
              domain=(-math.pi, math.pi), doc="no periodic reduction: 0 outside [-4, 4)"),
    TableSpec("gelu_grad", _gelu_grad, center=-10, top_neg=3, top_pos=3, under=0.0, over=1.0,
              domain=(-6.0, _MAXF)),
    TableSpec("silu_grad", _silu_grad, center=-10, top_neg=5, top_pos=4, under=0.0, over=1.0,
              domain=(-20.0, _MAXF)),
]}


@functools.lru_cache(maxsize=None)
def table(name, depth=512, budget=None):
    """The compiled shipped table ``name`` (cached)."""
    return compile_table(SHIPPED[name], depth=depth, budget=budget)
