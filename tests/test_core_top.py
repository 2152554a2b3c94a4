"""NeuronCore parameter validation and describe() (pure Python, no elaboration)."""

import json

import pytest

from rtl.core.sbuf import SBUF
from rtl.core.status import ErrorStatus
from rtl.core.tensor_ctrl import TensorController
from rtl.core.top import NeuronCore
from rtl.core.vector_ctrl import VectorController
from rtl.core.watchdog import Watchdog
from sim.dtypes import Format


@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"rows": 1}, ValueError, "rows must be an integer from 2 to 128, not 1"),
    ({"rows": 4.0}, TypeError, "rows must be an integer, not 4.0"),
    ({"rows": 4, "cols": 8}, ValueError, "cols must be an integer from 2 to 4, not 8"),
    ({"rows": 4, "partitions": 8}, ValueError, "partitions must be one of 4, not 8"),
    ({"rows": 4, "lanes": 2}, ValueError, "lanes must be one of 4, not 2"),
    ({"sbuf_depth": 100}, ValueError, "sbuf_depth must be a power of two from 16 to 65536"),
    ({"sbuf_depth": "big"}, TypeError, "sbuf_depth must be an integer"),
    ({"psum_depth": 8}, ValueError, "psum_depth must be a power of two from 16 to 65536"),
    ({"formats": Format.BF16}, TypeError, "formats must be a collection of Format"),
    ({"formats": ()}, ValueError, "formats must contain at least one format"),
    ({"formats": (Format.FP32,)}, ValueError, "not containing FP32"),
    ({"formats": ("bf16",)}, TypeError, "formats must contain Format members"),
    ({"lut_entries": 48}, ValueError, "lut_entries must be a power of two from 8 to 1024"),
    ({"n_rand": 0}, ValueError, "n_rand must be an integer from 1 to 23, not 0"),
    ({"pmem_depth": 4096}, ValueError, "pmem_depth must be a power of two from 16 to 2048"),
    ({"dma_windows": 9}, ValueError, "dma_windows must be an integer from 1 to 8, not 9"),
    ({"max_burst": 3}, ValueError, "max_burst must be a power of two from 1 to 256"),
    ({"tensor_add_stages": 0}, ValueError,
     "tensor_add_stages must be an integer from 1 to 4, not 0"),
    ({"tensor_add_stages": 2.0}, TypeError, "tensor_add_stages must be an integer"),
    ({"tensor_mul_stages": 5}, ValueError,
     "tensor_mul_stages must be an integer from 1 to 4, not 5"),
    ({"tensor_mul_stages": 0}, ValueError,
     "tensor_mul_stages must be an integer from 1 to 4, not 0"),
    ({"vector_units": 3}, ValueError, "vector_units must be a divisor of rows (4), not 3"),
    ({"engine_domain": 1}, TypeError, "engine_domain must be a bool, not 1"),
])
def test_core_parameter_errors(kwargs, exc, msg):
    with pytest.raises(exc) as info:
        NeuronCore(**kwargs)
    assert msg in str(info.value)


def test_core_describe_is_json_and_complete():
    core = NeuronCore(rows=8, cols=4, sbuf_depth=512, psum_depth=128,
                      formats=(Format.BF16, Format.INT8))
    d = json.loads(json.dumps(core.describe()))
    assert d["config"]["rows"] == 8 and d["config"]["cols"] == 4
    assert d["config"]["formats"] == ["bf16", "int8"]
    names = {p["name"]: p for p in d["ports"]}
    assert names["axil__awaddr"]["width"] == 16 and names["axil__awaddr"]["dir"] == "in"
    assert names["axi__araddr"]["width"] == 32 and names["axi__araddr"]["dir"] == "out"
    assert names["irq"]["dir"] == "out"
    assert any(r["name"] == "STATUS" for r in d["memory_map"]["registers"])
    assert d["sbuf_bytes"] == 8 * 512 * 4
    assert core.partitions == 8 and core.cols == 4


def test_core_defaults_square():
    core = NeuronCore(rows=8)
    assert core.cols == 8 and core.sbuf_depth == 256


@pytest.mark.parametrize("make, msg", [
    (lambda: SBUF(0, 16), "partitions must be an integer from 1 to 1024, not 0"),
    (lambda: SBUF(4, 12), "depth must be a power of two from 2 to 1048576, not 12"),
    (lambda: SBUF(4, 16, read_ports=("a", "a")), "read_ports must be a sequence of distinct"),
    (lambda: TensorController(0, 4, 16, 16), "rows must be an integer from 1 to 1024, not 0"),
    (lambda: TensorController(4, 4, 16, 16, data_width=40),
     "data_width must be an integer from 1 to 32, not 40"),
    (lambda: TensorController(4, 4, 16, 16, done_delay=-1),
     "done_delay must be an integer from 0 to 64, not -1"),
    (lambda: TensorController(4, 4, 16, 15), "psum_depth must be a power of two"),
    (lambda: VectorController(4, 8, 16, 16, 8), "cols must be an integer from 1 to 4, not 8"),
    (lambda: VectorController(4, 4, 16, 16, 8, queue_depth=0),
     "queue_depth must be an integer from 1 to 16, not 0"),
    (lambda: ErrorStatus(sources=0), "sources must be an integer from 1 to 16, not 0"),
    (lambda: Watchdog(True), "width must be an integer, not True"),
])
def test_unit_parameter_errors(make, msg):
    with pytest.raises((TypeError, ValueError)) as info:
        make()
    assert msg in str(info.value)
