"""Parameter checks of the rounding RTL (messages name the parameter and the allowed range)."""

import pytest

from rtl.round.encoder import FPEncoder
from rtl.round.prng import LanePrngs, Prng
from rtl.round.rounding_unit import RoundingUnit


def test_encoder_params():
    assert FPEncoder(7).n_rand == 7
    with pytest.raises(ValueError, match=r"n_rand must be an integer from 1 to 32, not 33"):
        FPEncoder(33)
    with pytest.raises(ValueError, match=r"n_rand must be an integer from 1 to 32, not 0"):
        FPEncoder(0)
    with pytest.raises(TypeError, match="n_rand must be an integer, not '8'"):
        FPEncoder("8")


def test_prng_params():
    assert LanePrngs(3).lanes == 3
    with pytest.raises(ValueError, match="lanes must be an integer from 1 to 128, not 0"):
        LanePrngs(0)
    with pytest.raises(TypeError, match="lanes must be an integer, not True"):
        LanePrngs(True)
    with pytest.raises(ValueError, match="init must be 6 32-bit words"):
        Prng([1, 2, 3])
    # docs/rounding.md: re-seeding takes 6 * lanes + 6 cycles.
    assert (LanePrngs(1).seed_cycles, LanePrngs(2).seed_cycles) == (12, 18)


def test_rounding_unit_params():
    u = RoundingUnit(lanes=2, n_rand=8, stages=3)
    assert (u.lanes, u.n_rand, u.stages) == (2, 8, 3)
    with pytest.raises(ValueError, match=r"stages must be an integer from 0 to 8, not 9"):
        RoundingUnit(stages=9)
    with pytest.raises(TypeError, match="stages must be an integer, not 1.0"):
        RoundingUnit(stages=1.0)
    with pytest.raises(ValueError, match="lanes must be an integer from 1 to 128, not -1"):
        RoundingUnit(lanes=-1)
    with pytest.raises(ValueError, match=r"n_rand must be an integer from 1 to 32, not 40"):
        RoundingUnit(n_rand=40)
    assert RoundingUnit(stages=1, encoder_stages=2).latency == 3
    assert RoundingUnit(stages=2, encoder_stages=3).latency == 5
    with pytest.raises(ValueError, match="encoder_stages must be an integer from 0 to 3, not 4"):
        RoundingUnit(encoder_stages=4)
    with pytest.raises(ValueError, match="encoder_stages must be 0 when stages is 0"):
        RoundingUnit(stages=0, encoder_stages=1)
    with pytest.raises(ValueError, match="stages must be an integer from 0 to 3, not 4"):
        FPEncoder(16, 4)
