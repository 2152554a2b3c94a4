"""Golden model of the per-lane random generator of the rounding unit (``rtl/round/prng.py``).

Generator: XORWOW (Marsaglia 2003, "Xorshift RNGs"), the generator AWS documents for
Trainium's stochastic rounding and cuRAND's default: a 160-bit xorshift state ``x, y, z, w, v``
plus a Weyl counter ``d``. One step::

    t = x ^ (x >> 2); x, y, z, w = y, z, w, v
    v = (v ^ (v << 4)) ^ (t ^ (t << 1)); d += 362437
    output = d + v                                   (all mod 2**32)

Period 2**192 - 2**32; reported to pass Diehard and most of BigCrush, far above an LFSR (the
Weyl add breaks the GF(2)-linearity of the output).

Seeding (one 32-bit seed for all lanes): the words ``w_0, w_1, ...`` of ``splitmix32(seed)``
(a Weyl sequence with golden-ratio step through the MurmurHash3 32-bit finaliser) fill the lanes
in order: lane ``i`` gets ``x, y, z, w, v, d = w_{6i} .. w_{6i+5}``. Distinct lanes thus start
from unrelated 192-bit states of the same period-2**192 generator (the hardware computes the
same words with one shared finaliser, one word per cycle). After reset the hardware holds the
states of seed 0.
"""

import numpy as np

__all__ = ["WEYL_STEP", "XORWOW_D_STEP", "splitmix32", "lane_states", "xorwow_step",
           "LaneGenerators", "STATE_WORDS"]

MASK32 = 0xFFFFFFFF
WEYL_STEP = 0x9E3779B9
XORWOW_D_STEP = 362437
#: Words of state per lane: x, y, z, w, v, d.
STATE_WORDS = 6


def fmix32(z):
    """MurmurHash3's 32-bit finaliser (a bijection of 32-bit words)."""
    z &= MASK32
    z = ((z ^ (z >> 16)) * 0x85EBCA6B) & MASK32
    z = ((z ^ (z >> 13)) * 0xC2B2AE35) & MASK32
    return z ^ (z >> 16)


def splitmix32(seed, count):
    """The first ``count`` words of the seeding sequence: ``fmix32(seed + (j+1) * WEYL_STEP)``."""
    out = []
    z = seed & MASK32
    for _ in range(count):
        z = (z + WEYL_STEP) & MASK32
        out.append(fmix32(z))
    return out


def lane_states(lanes, seed):
    """Initial state of every lane for ``seed``: a ``(lanes, 6)`` list of ``x, y, z, w, v, d``."""
    words = splitmix32(seed, STATE_WORDS * lanes)
    return [words[STATE_WORDS * i:STATE_WORDS * (i + 1)] for i in range(lanes)]


def xorwow_step(state):
    """Advance one lane's state (list of 6 ints) in place and return the output word."""
    x, y, z, w, v, d = state
    t = x ^ (x >> 2)
    v_new = (v ^ ((v << 4) & MASK32)) ^ (t ^ ((t << 1) & MASK32))
    d = (d + XORWOW_D_STEP) & MASK32
    state[:] = [y, z, w, v, v_new, d]
    return (d + v_new) & MASK32


class LaneGenerators:
    """``lanes`` XORWOW generators, vectorised over lanes with numpy uint32 arithmetic."""

    def __init__(self, lanes, seed=0):
        if isinstance(lanes, bool) or not isinstance(lanes, (int, np.integer)):
            raise TypeError(f"lanes must be a positive integer, not {lanes!r}")
        if lanes < 1:
            raise ValueError(f"lanes must be a positive integer, not {lanes}")
        self.lanes = int(lanes)
        self.reseed(seed)

    def reseed(self, seed):
        st = np.array(lane_states(self.lanes, int(seed)), dtype=np.uint32)
        self.x, self.y, self.z, self.w, self.v, self.d = (st[:, j].copy() for j in range(6))

    def next(self):
        """One step of every lane; returns the ``lanes`` output words (uint32)."""
        t = self.x ^ (self.x >> np.uint32(2))
        v_new = (self.v ^ (self.v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
        self.x, self.y, self.z, self.w, self.v = self.y, self.z, self.w, self.v, v_new
        self.d = self.d + np.uint32(XORWOW_D_STEP)
        return self.d + self.v

    def stream(self, count):
        """``count`` successive steps: a ``(count, lanes)`` uint32 array."""
        return np.stack([self.next() for _ in range(count)])
