"""Runs one ``sim.image.Image`` on the core under cocotb and writes its ``Outcome`` as JSON:
the cocotb side of the fast backend's bit-exactness tests (``fastsim/compare.py``,
``tests/test_fastsim.py``).

Environment: ``IMAGE_FILE`` (the image, ``fastsim.compare.image_to_json``), ``OUTCOME_FILE``
(where the outcome goes), ``IMAGE_LATENCY`` (cycles per beat of the AXI RAM, default 0; no
pauses). The external memory is an AxiRam large enough for every segment and readback region.
"""

import json
import os
import pathlib
import sys

import cocotb

from cocotb_tests.common.core_env import CoreEnv

# fastsim is not an installed package: import it from the checkout.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from fastsim.compare import image_from_json, outcome_to_json  # noqa: E402
from sim.image import run_host_async  # noqa: E402


@cocotb.test()
async def run_image(dut):
    image = image_from_json(json.loads(open(os.environ["IMAGE_FILE"]).read()))
    latency = int(os.environ.get("IMAGE_LATENCY", "0"))
    top = max([a + len(d) for a, d in image.memory] + [a + n for a, n in image.readback] +
              [1 << 20])
    env = CoreEnv(dut, mem_size=1 << (top - 1).bit_length(), latency=(latency, latency))
    await env.reset()
    out = await run_host_async(env.host(), image)
    out.backend = "cocotb"
    with open(os.environ["OUTCOME_FILE"], "w") as f:
        json.dump(outcome_to_json(out), f)
    dut._log.info("image run: %d cycles, error %s", out.cycles or 0, out.error)
