"""EncoderCompose (the encoder's last stage) against a Python model of its contract: seeded
random significands, exponent fields and classes for every format, with the range flags derived
from the exponent field the way the contract defines them."""

import random

from amaranth.sim import Simulator

from rtl.round.encoder_compose import FLOATS, EncoderCompose
from sim.dtypes import Format
from sim.rounding import canonical_nan, encode_params, max_finite_bits, target_bits

SEED = 5701
COUNT = 400


def _float_case(rng, f):
    """Random inputs for float format ``f`` and the word the contract gives."""
    man_bits, _, exp_bits, has_inf = encode_params(f)
    bits = target_bits(f)
    k = rng.choice([rng.randrange((2 << man_bits) + 1), (1 << man_bits) - 1, 1 << man_bits,
                    (2 << man_bits) - 1, 2 << man_bits, 0])
    x = rng.randrange((1 << exp_bits) + 1)
    h = k >> man_bits
    top_e = max_finite_bits(f) >> man_bits
    thr = (1 << exp_bits) - 1 if has_inf else top_e + 1
    ge = sum((x >= thr - i) << i for i in range(3))
    eq = sum((x == top_e - i) << i for i in range(3))
    sign = rng.getrandbits(1)
    cls = rng.choice(["num"] * 5 + ["nan", "inf", "zero"])
    rtz = rng.getrandbits(1)
    s = sign << (bits - 1)
    mag = (x << man_bits) + k
    if cls == "nan":
        want = canonical_nan(f)
    elif has_inf:
        inf_code = ((1 << exp_bits) - 1) << man_bits
        if cls == "inf":
            want = s | inf_code
        elif cls == "zero":
            want = s
        elif x + h >= (1 << exp_bits) - 1:
            want = s | (inf_code - 1 if rtz else inf_code)
        else:
            want = s | mag
    else:
        maxf = max_finite_bits(f)
        if cls == "zero":
            want = s
        elif cls == "inf" or mag > maxf:
            want = s | maxf
        else:
            want = s | mag
    ins = {"a": (sign << 31) | rng.getrandbits(31), "fmt": f, "k": k, "ebase": x << man_bits,
           "rtz": rtz, f"ge_{f.name.lower()}": ge}
    if not has_inf:
        ins[f"eq_{f.name.lower()}"] = eq
    return ins, cls, want


def _int_case(rng, f):
    bits, lo_mag, hi = (8, 128, 127) if f == Format.INT8 else (32, 1 << 31, (1 << 31) - 1)
    k = rng.choice([rng.getrandbits(25), rng.randrange(300), hi, hi + 1, lo_mag, lo_mag + 1])
    k &= (1 << 25) - 1
    int_big = rng.choice([rng.getrandbits(32), lo_mag, lo_mag - 1, hi])
    ge150 = rng.getrandbits(1)
    ge158 = ge150 & rng.getrandbits(1)
    sign = rng.getrandbits(1)
    cls = rng.choice(["num"] * 5 + ["nan", "inf", "zero"])
    mag = int_big if f == Format.INT32 and ge150 else k
    ovf = (ge158 if f == Format.INT32 else ge150) or cls == "inf"
    mask = (1 << bits) - 1
    if cls in ("nan", "zero"):
        want = 0
    elif sign:
        want = (-lo_mag) & mask if ovf or mag > lo_mag else (-mag) & mask
    else:
        want = hi if ovf or mag > hi else mag
    ins = {"a": (sign << 31) | rng.getrandbits(31), "fmt": f, "k": k, "int_big": int_big,
           "e_ge150": ge150, "e_ge158": ge158}
    return ins, cls, want


def _fp32_case(rng):
    a = rng.getrandbits(32)
    cls = rng.choice(["num", "nan", "zero"])
    raw = rng.getrandbits(1)
    want = a if raw or cls == "num" else 0x7FC00000 if cls == "nan" else a & (1 << 31)
    return {"a": a, "fmt": Format.FP32, "raw": raw}, cls, want


def test_compose_matches_model():
    rng = random.Random(SEED)
    dut = EncoderCompose()
    cases = []
    for _ in range(COUNT):
        for f in FLOATS:
            cases.append(_float_case(rng, f))
        for f in (Format.INT8, Format.INT32):
            cases.append(_int_case(rng, f))
        cases.append(_fp32_case(rng))
    names = [p[0] for p, mem, _ in dut.signature.flatten(dut) if p[0] != "o"]
    fails = []

    async def tb(ctx):
        for ins, cls, want in cases:
            for n in names:          # unrelated inputs random: the word must not depend on them
                ctx.set(getattr(dut, n), rng.getrandbits(len(getattr(dut, n))))
            for n, v in ins.items():
                ctx.set(getattr(dut, n), int(v))
            for n in ("is_nan", "is_inf", "is_zero"):
                ctx.set(getattr(dut, n), int(n == f"is_{cls}"))
            got = ctx.get(dut.o)
            if got != want:
                fails.append((ins, cls, hex(got), hex(want)))

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    assert not fails, f"seed {SEED}: {len(fails)} of {len(cases)} differ, first {fails[:3]}"
