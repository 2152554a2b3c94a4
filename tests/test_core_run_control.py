"""RunControl (``rtl/core/run_control.py``) against a cycle model written from its docstring and
those of ErrorStatus and Watchdog: seeded random control writes, errors and engine activity."""

import random

import pytest

from rtl.core.run_control import RunControl
from sim.errors import SEQUENCER_ERROR_MAP, ErrorCode
from sim.isa import ErrorBit
from sim.memmap import CTRL_ABORT, CTRL_CLEAR, CTRL_CLEAR_COUNTERS, CTRL_START

from amaranth_tb import simulate


class Model:
    """One cycle at a time: ``outputs(inputs)`` (combinational), then ``tick(inputs)``."""

    def __init__(self):
        self.running = self.aborting = 0
        self.seq_err_prev = self.lut_err_prev = 0
        self.rep_q = [(0, 0, 0, 0)] * 4
        self.error = self.code = self.addr = self.info = self.count = 0
        self.done_flag = self.irq = 0
        self.wd_count = self.wd_fired = 0

    @staticmethod
    def seq_code(es):
        for bit in ErrorBit:                     # the lowest set bit decides
            if es >> int(bit) & 1:
                return int(SEQUENCER_ERROR_MAP[bit.name])
        return 0

    def comb(self, i):
        o = {}
        we, ctrl = i["ctrl_we"], i["ctrl"]
        o["start"] = int(we and bool(ctrl & CTRL_START) and not self.running)
        o["clear_counters"] = int(we and bool(ctrl & CTRL_CLEAR_COUNTERS))
        clear = int(we and bool(ctrl & CTRL_CLEAR))
        wd_run = self.running and not self.aborting
        limit = i["watchdog_limit"]
        timeout = int(wd_run and not self.wd_fired and limit != 0 and self.wd_count >= limit)
        reps = [
            (int(i["seq_error"] and not self.seq_err_prev and self.running),
             self.seq_code(i["seq_err_status"]), i["seq_err_pc"], i["seq_err_status"]),
            (i["dma_valid"], i["dma_code"], i["dma_addr"], i["dma_info"]),
            (timeout, int(ErrorCode.WATCHDOG), self.wd_count, limit),
            (int(i["lut_error"] and not self.lut_err_prev), int(ErrorCode.LUT_INDEX), 0, 0),
        ]
        abort_req = self.running and not self.aborting and (
            (we and bool(ctrl & CTRL_ABORT)) or timeout or self.error or reps[0][0] or
            reps[1][0] or reps[3][0])
        nxt = int(self.aborting or abort_req)
        finish = self.running and not o["start"] and (
            (not self.aborting and i["seq_done"] and not i["seq_busy"] and i["engines_idle"]) or
            (self.aborting and not i["dma_busy"]))
        if finish:
            nxt = 0
        o.update(running=self.running, aborting=self.aborting, aborting_next=nxt,
                 status=self.running | self.done_flag << 1 | self.error << 2 | self.irq << 3,
                 err_code=self.code, err_addr=self.addr, err_info=self.info,
                 err_count=self.count, irq=self.irq)
        return o, dict(clear=clear, timeout=timeout, reps=reps, finish=finish, wd_run=wd_run)

    def tick(self, i, o, x):
        # ErrorStatus on the registered reports
        valid = [(v and c != 0) for v, c, _, _ in self.rep_q]
        n = sum(valid)
        error, code, addr, info, count = self.error, self.code, self.addr, self.info, self.count
        done_flag = self.done_flag
        if x["clear"]:
            error = code = addr = info = count = done_flag = 0
        if o["start"]:
            done_flag = 0
        if x["finish"]:
            done_flag = 1
        if n:
            count = n if x["clear"] else min(self.count + n, 0xFFFFFFFF)
        if (not self.error or x["clear"]) and n:
            k = valid.index(True)
            error, (_, code, addr, info) = 1, self.rep_q[k]
        self.irq = int(bool(self.done_flag and i["irq_enable"] & 1) or
                       bool(self.error and i["irq_enable"] & 2))
        self.error, self.code, self.addr, self.info, self.count = error, code, addr, info, count
        self.done_flag = done_flag
        self.rep_q = [(v, c & 0xF, a & 0xFFFFFFFF, f & 0xFFFFFFFF) for v, c, a, f in x["reps"]]
        # Watchdog
        if o["start"]:
            self.wd_count = self.wd_fired = 0
        else:
            if x["wd_run"] and self.wd_count != 0xFFFFFFFF:
                self.wd_count += 1
            if x["timeout"]:
                self.wd_fired = 1
        # the program
        self.seq_err_prev, self.lut_err_prev = i["seq_error"], i["lut_error"]
        if o["start"]:
            self.running = 1
        if x["finish"]:
            self.running = 0
        self.aborting = o["aborting_next"]


def _inputs(rng, phase):
    """Random inputs; ``phase`` sets how busy the engines are (long runs and short ones)."""
    ctrl_bits = [CTRL_START, CTRL_CLEAR, CTRL_ABORT, CTRL_CLEAR_COUNTERS]
    we = rng.random() < 0.08
    ctrl = sum(b for b in ctrl_bits if rng.random() < 0.3) | rng.getrandbits(32) & ~0xF
    es = rng.getrandbits(16) if rng.random() < 0.3 else 1 << rng.randrange(16)
    return {
        "ctrl_we": int(we), "ctrl": ctrl, "irq_enable": rng.getrandbits(2),
        "watchdog_limit": rng.choice([0, 0, 3, 17, 60, 0xFFFFFFFF]),
        "seq_error": int(rng.random() < 0.02 * phase), "seq_err_status": es,
        "seq_err_pc": rng.getrandbits(32),
        "seq_done": int(rng.random() < 0.5), "seq_busy": int(rng.random() < 0.2 * phase),
        "dma_valid": int(rng.random() < 0.01 * phase), "dma_code": rng.getrandbits(4),
        "dma_addr": rng.getrandbits(32), "dma_info": rng.getrandbits(32),
        "lut_error": int(rng.random() < 0.02 * phase),
        "engines_idle": int(rng.random() < 0.6 / phase), "dma_busy": int(rng.random() < 0.5),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_run_control_random(seed):
    dut = RunControl()
    model = Model()
    rng = random.Random(seed)
    ports = {"dma_valid": dut.dma_error.valid, "dma_code": dut.dma_error.code,
             "dma_addr": dut.dma_error.addr, "dma_info": dut.dma_error.info}
    seen = {"start": 0, "aborting": 0, "finish": 0, "timeout": 0}

    async def main(ctx):
        phase = 1
        for cycle in range(2500):
            if cycle % 400 == 0:
                phase = rng.choice([1, 2, 4])
            i = _inputs(rng, phase)
            for name, value in i.items():
                ctx.set(ports[name] if name in ports else getattr(dut, name), value)
            o, x = model.comb(i)
            for name, want in o.items():
                got = ctx.get(getattr(dut, name))
                assert got == want, f"seed {seed} cycle {cycle}: {name} {got:#x} != {want:#x}"
            for k in ("start", "aborting", "finish", "timeout"):
                seen[k] += bool(o[k] if k in o else x[k])
            model.tick(i, o, x)
            await ctx.tick()

    simulate(dut, main)
    assert all(seen.values()), seen          # every path was exercised
