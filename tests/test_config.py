"""``sim.config.CoreConfig``: its parameter checks (the same wording as NeuronCore's, from one
set of checkers), the dict round trip, and the reference simulator and the RTL built from one
configuration agreeing on every parameter (``NeuronCore.describe()``)."""

import json

import pytest

from rtl.core.top import NeuronCore
from sim.config import (ENGINE_FORMATS, PRESETS, CoreConfig, check_bool, check_choice, check_int,
                        check_pow2)
from sim.dtypes import Format


@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"rows": 1}, ValueError, "rows must be an integer from 2 to 128, not 1"),
    ({"rows": 4.0}, TypeError, "rows must be an integer, not 4.0"),
    ({"rows": True}, TypeError, "rows must be an integer, not True"),
    ({"rows": 4, "cols": 8}, ValueError, "cols must be an integer from 2 to 4, not 8"),
    ({"sbuf_depth": 100}, ValueError, "sbuf_depth must be a power of two from 16 to 65536, "
     "not 100"),
    ({"sbuf_depth": "big"}, TypeError, "sbuf_depth must be an integer, not 'big'"),
    ({"psum_depth": 8}, ValueError, "psum_depth must be a power of two from 16 to 65536, "
     "not 8"),
    ({"formats": Format.BF16}, TypeError, "formats must be a collection of Format"),
    ({"formats": "bf16"}, TypeError, "formats must be a collection of Format"),
    ({"formats": ()}, ValueError, "formats must contain at least one format, not be empty"),
    ({"formats": (Format.FP32,)}, ValueError, "not containing FP32"),
    ({"formats": ("bf17",)}, ValueError, "formats: unknown format name 'bf17'"),
    ({"formats": (3,)}, TypeError, "formats must contain Format members, not 3"),
    ({"lut_entries": 48}, ValueError, "lut_entries must be a power of two from 8 to 1024"),
    ({"n_rand": 0}, ValueError, "n_rand must be an integer from 1 to 23, not 0"),
    ({"pmem_depth": 4096}, ValueError, "pmem_depth must be a power of two from 16 to 2048"),
    ({"dma_windows": 9}, ValueError, "dma_windows must be an integer from 1 to 8, not 9"),
    ({"max_burst": 3}, ValueError, "max_burst must be a power of two from 1 to 256, not 3"),
    ({"tensor_add_stages": 5}, ValueError,
     "tensor_add_stages must be an integer from 1 to 4, not 5"),
    ({"tensor_mul_stages": 0}, ValueError,
     "tensor_mul_stages must be an integer from 1 to 4, not 0"),
])
def test_parameter_errors_match_the_core(kwargs, exc, msg):
    """Each bad parameter raises the same exception with the same message from CoreConfig
    and from NeuronCore (both use sim.config's checkers); NeuronCore takes only Format
    members, so a name is a TypeError there."""
    with pytest.raises(exc, match=_re(msg)):
        CoreConfig(**kwargs)
    if kwargs.get("formats") in (("bf17",),):
        with pytest.raises(TypeError, match="formats must contain Format members"):
            NeuronCore(**kwargs)
        return
    with pytest.raises(exc, match=_re(msg)):
        NeuronCore(**kwargs)


def _unused(core):
    core._MustUse__silence = True           # described, never elaborated
    return core


def _re(text):
    import re
    return re.escape(text)


def test_unknown_keys_and_presets():
    with pytest.raises(TypeError, match="unknown CoreConfig parameter.*colour"):
        CoreConfig.from_dict({"rows": 4, "colour": "red"})
    with pytest.raises(ValueError, match="preset must be one of core4, core8, core2"):
        CoreConfig.preset("core16")


@pytest.mark.parametrize("cfg", [CoreConfig(), *(CoreConfig.preset(p) for p in PRESETS),
                                 CoreConfig(rows=8, cols=4, formats=("int8", "bf16"),
                                            lut_entries=256, n_rand=12, pmem_depth=512,
                                            dma_windows=2, max_burst=64)])
def test_round_trip(cfg):
    d = json.loads(json.dumps(cfg.to_dict()))
    assert CoreConfig.from_dict(d) == cfg
    assert CoreConfig.from_dict(d).name == cfg.name
    assert cfg.replace() == cfg and cfg.replace(n_rand=9).n_rand == 9


def test_defaults_are_the_cores():
    """CoreConfig(), NeuronCore() and RefSim() have the same defaults."""
    import inspect
    from sim.refsim import RefSim
    core = _unused(NeuronCore())
    assert core.core_config() == CoreConfig()
    assert set(CoreConfig().formats) == set(ENGINE_FORMATS)
    s = RefSim([])
    assert (s.P, s.cols, s.sbuf_depth, s.psum_depth, s.pmem_depth, s.lut_entries,
            s.n_rand) == (4, 4, 256, 64, 256, 64, 8)
    assert set(s.formats) == {int(f) for f in CoreConfig().formats}
    sig = inspect.signature(NeuronCore).parameters
    for name in ("rows", "sbuf_depth", "psum_depth", "lut_entries", "n_rand", "pmem_depth",
                 "dma_windows", "max_burst", "tensor_add_stages", "tensor_mul_stages"):
        assert sig[name].default == getattr(CoreConfig(), name), name


@pytest.mark.parametrize("cfg", [CoreConfig(), *(CoreConfig.preset(p) for p in PRESETS),
                                 CoreConfig(rows=8, cols=4, formats=(Format.INT8,),
                                            sbuf_depth=2048, psum_depth=32, lut_entries=128,
                                            n_rand=16, pmem_depth=64, dma_windows=1)])
def test_refsim_and_core_from_one_config_agree(cfg):
    """NeuronCore.from_config(cfg) and cfg.refsim(...) have every parameter of cfg: the
    core's describe() (configuration, CONFIG0/CONFIG1-visible sizes) and the simulator's
    geometry, program memory, formats, vector-engine parameters and checks."""
    core = _unused(NeuronCore.from_config(cfg))
    desc = core.describe()
    conf = dict(desc["config"])
    assert conf.pop("engine_domain") is None
    assert CoreConfig.from_dict(conf) == cfg
    assert core.core_config() == cfg
    assert desc["sbuf_bytes"] == cfg.rows * cfg.sbuf_depth * 4
    assert desc["psum_bytes"] == cfg.cols * cfg.psum_depth * 4
    sim = cfg.refsim([])
    got = dict(rows=sim.P, cols=sim.cols, sbuf_depth=sim.sbuf_depth,
               psum_depth=sim.psum_depth, pmem_depth=sim.pmem_depth,
               lut_entries=sim.lut_entries, n_rand=sim.n_rand)
    for name, value in got.items():
        assert value == conf[name], name
    assert sorted(sim.formats) == sorted(int(Format[f.upper()]) for f in conf["formats"])
    assert sim.check and sim.race_checker is not None and sim.config == cfg
    assert sim.sbuf.shape == (cfg.rows, cfg.sbuf_depth)
    assert sim.psum.shape == (cfg.cols, cfg.psum_depth)
    # overrides still win
    assert cfg.refsim([], check=False, races=False).race_checker is None
    with pytest.raises(TypeError, match="config must be a sim.config.CoreConfig"):
        NeuronCore.from_config(conf)


def test_refsim_traps_as_the_core_with_the_config():
    """With a configuration the reference simulator checks records as the core does (no
    check=True or formats by hand): a BF16 matmul on an INT8-only core traps."""
    from sim.asm import assemble
    from sim.isa import ErrorBit
    words = assemble("li r1, 4\nmatmul r0, r0, r0, r1, k=4, m=4, fmt=bf16\nhalt")
    sim = CoreConfig(formats=("int8",)).refsim(words).run()
    assert sim.error == 1 << ErrorBit.ILLEGAL_FIELD and sim.err_pc == 1
    assert CoreConfig().refsim(words).run().error == 0


@pytest.mark.parametrize("call, exc, msg", [
    (lambda: check_bool("deep", 1), TypeError, "deep must be a bool, not 1"),
    (lambda: check_choice("width", 33, (32, 64)), ValueError,
     "width must be one of 32, 64, not 33"),
    (lambda: check_choice("width", "32", (32, 64)), TypeError,
     "width must be an integer, not '32'"),
    (lambda: check_choice("mode", "z", ("a", "b")), ValueError, "mode must be one of a, b"),
    (lambda: check_int("rows", 0, 1, 64), ValueError, "rows must be an integer from 1 to 64"),
    (lambda: check_pow2("width", 48, 32, 512), ValueError,
     "width must be a power of two from 32 to 512, not 48"),
])
def test_check_helpers_name_the_parameter_and_range(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


def test_check_helpers_return_good_values():
    assert check_bool("deep", False) is False
    assert check_choice("width", 64, (32, 64)) == 64
    assert check_int("rows", 4, 1, 64) == 4
    assert check_pow2("width", 128, 32, 512) == 128
