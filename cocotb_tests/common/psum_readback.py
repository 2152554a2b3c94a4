"""Reading a PSUM back through its ``rd`` port (``rd__en``, ``rd__addr``, ``rd__data``) and
comparing every word with a model, shared by the PSUM and tensor-with-PSUM tests."""

from cocotb.triggers import ReadOnly, RisingEdge

from cocotb_tests.common.tb import unpack_lanes

__all__ = ["readback"]


async def readback(dut, model, rnd=None, gap_p=0.0):
    """Wait until ``idle``, read every word of ``model.mem`` (``depth`` rows of ``cols`` 32-bit
    words) with random gaps in ``en`` (probability ``gap_p`` per cycle, a random address
    shown meanwhile), and return the words that differ, one line each."""
    depth, cols = len(model.mem), len(model.mem[0])
    while True:
        await ReadOnly()
        if dut.idle.value:
            break
        await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    bad = []
    for a in range(depth):
        dut.rd__addr.value = a
        dut.rd__en.value = 1
        await RisingEdge(dut.clk)
        dut.rd__en.value = 0
        while rnd is not None and rnd.random() < gap_p:
            dut.rd__addr.value = rnd.randrange(depth)   # ignored while en is 0
            await RisingEdge(dut.clk)
        await ReadOnly()
        got = unpack_lanes(dut.rd__data.value.to_unsigned(), 32, cols)
        want = [int(x) for x in model.mem[a]]
        if got != want:
            bad.append(f"addr {a}: got {[hex(x) for x in got]} expected "
                       f"{[hex(x) for x in want]}")
        await RisingEdge(dut.clk)
    return bad
