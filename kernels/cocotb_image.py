"""cocotb test that runs one ``sim.image.Image`` on the core (the ``rtl`` backend's fallback
when the fast Verilator harness is not available; :func:`kernels.backends.run_rtl`).

Environment: ``KERNEL_IMAGE`` (the image as JSON, memory segments hex), ``KERNEL_OUTCOME``
(where the outcome goes: readback memory hex, error ``[code, address, info]`` or null, cycles,
counters).
"""

import json
import os

import cocotb


@cocotb.test()
async def run_image(dut):
    from cocotb_tests.common.core_env import CoreEnv
    from sim.image import Image, run_host_async
    d = json.loads(open(os.environ["KERNEL_IMAGE"]).read())
    d["memory"] = [(a, bytes.fromhex(h)) for a, h in d["memory"]]
    image = Image(**d)
    top = max([a + len(m) for a, m in image.memory] + [a + n for a, n in image.readback] +
              [1 << 16])
    env = CoreEnv(dut, seed=0, mem_size=1 << (top - 1).bit_length())
    await env.reset()
    out = await run_host_async(env.host(), image)
    err = None if out.error is None else [int(out.error.code), int(out.error.address),
                                          int(out.error.info)]
    with open(os.environ["KERNEL_OUTCOME"], "w") as f:
        json.dump({"memory": [bytes(m).hex() for m in out.memory], "error": err,
                   "cycles": out.cycles, "counters": out.counters}, f)
