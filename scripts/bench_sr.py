"""Stochastic-rounding benchmark: the published checks and the bias of SR, through the golden
model (``sim.rounding``, ``sim.prng``).

    python -m scripts.bench sr --json [--quick] [--n-rand 16] [--max-terms 1000000]

* FP16 1024 + 0.5 added 2048 times: RNE result and SR results (one run per seed).
* Harmonic sums s <- encode(fp32(s) + fp32(1/k)) (FP32 add RNE, then one encode per step):
  the RNE stagnation value and term for FP16 and BF16, and SR relative errors against the
  float64 sum at 10**3 .. 10**6 terms.
* BF16 1.0 + 0.001 x 1000 under RNE and SR.
* Bias of SR in ULPs for each N: the mean and the worst of (E[SR(x)] - x) / ULP over 4096 FP32
  values with uniformly random mantissas in [1, 2) rounded to BF16 (16 discarded bits) and to
  FP8 E4M3 (20 discarded bits); E[SR(x)] is exact (every random word enumerated for N <= 10,
  bisection on the monotone decision above). Both the unbiased variant used by the RTL
  ("rne") and plain truncation ("trunc") are measured.

Sequential sums use ``sim.rounding.encode_one`` (the scalar golden path, tested equal to
``encode``) and numpy float32 scalar adds, which equal ``sim.formats.fp32_add`` for normal
operands and results (checked on a sample of steps below; the sums never leave FP32's normal
range).
"""

import numpy as np

from sim.dtypes import Format, RoundMode
from sim.formats import decode, fp32_add
from sim.prng import lane_states, xorwow_step
from sim.rounding import DEFAULT_N_RAND, encode, encode_one

__all__ = ["add_arguments", "run", "serial_sum", "sr_bias"]

def add_arguments(parser):
    parser.add_argument("--n-rand", type=int, default=DEFAULT_N_RAND,
                        help="random bits N for the sums (default %(default)s)")
    parser.add_argument("--max-terms", type=int, default=None,
                        help="longest harmonic sum (default 10**6, 10**5 with --quick)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="SR runs per check (default 5, 2 with --quick)")


def _f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def _bits(f):
    return int(np.float32(f).view(np.uint32))


class _Rand:
    """One XORWOW lane of ``sim.prng`` (the stream lane 0 of the unit would use)."""

    def __init__(self, seed, n_rand):
        self.state = lane_states(1, seed)[0]
        self.shift = 32 - n_rand

    def __call__(self):
        return xorwow_step(self.state) >> self.shift


def _decode_one(bits, fmt):
    return float(_f32(int(decode(np.array([bits], dtype=np.uint32), fmt)[0])))


def serial_sum(fmt, mode, terms, start=0.0, seed=1, n_rand=DEFAULT_N_RAND, checkpoints=(),
               verify_every=0):
    """s <- encode(fp32(s) + t_k) for t_k in ``terms`` (FP32 values); returns the final value
    and the values at ``checkpoints`` (term counts). With ``verify_every`` > 0 every such step
    is recomputed with ``sim.formats.fp32_add`` and ``sim.rounding.encode`` and compared."""
    rand = _Rand(seed, n_rand)
    s_bits = encode_one(_bits(start), fmt, RoundMode.RNE)
    s_val = np.float32(_decode_one(s_bits, fmt))
    # decoding narrow values: a cache from pattern to float32 (few distinct patterns)
    cache = {}
    at = {}
    cps = set(checkpoints)
    for k, t in enumerate(terms, 1):
        t32 = np.float32(t)
        x = s_val + t32
        r = rand() if mode == RoundMode.SR else 0
        xb = _bits(x)
        new = encode_one(xb, fmt, mode, r, n_rand)
        if verify_every and k % verify_every == 0:
            sb = np.array([int(decode(np.array([s_bits], np.uint32), fmt)[0])], np.uint32)
            ref_x = int(fp32_add(sb, np.array([_bits(t32)], np.uint32))[0])
            assert ref_x == xb, (k, hex(ref_x), hex(xb))
            ref = int(encode(np.array([xb], np.uint32), fmt, mode,
                             rand=r if mode == RoundMode.SR else None, n_rand=n_rand)[0])
            assert ref == new, (k, hex(ref), hex(new))
        s_bits = new
        if new not in cache:
            cache[new] = np.float32(_decode_one(new, fmt))
        s_val = cache[new]
        if k in cps:
            at[k] = float(s_val)
    return float(s_val), at


def _harmonic_terms(n):
    return (np.float32(1.0) / np.arange(1, n + 1, dtype=np.float32)).tolist()


def _stagnation(fmt, limit):
    """RNE harmonic sum: the value it sticks at and the number of terms after which it has
    that value for good (every later term is lost entirely)."""
    vals = []
    s_bits = encode_one(_bits(0.0), fmt, RoundMode.RNE)
    for t in _harmonic_terms(limit):
        x = np.float32(_decode_one(s_bits, fmt)) + np.float32(t)
        s_bits = encode_one(_bits(x), fmt, RoundMode.RNE)
        vals.append(_decode_one(s_bits, fmt))
    final = vals[-1]
    k = len(vals)
    while k > 0 and vals[k - 1] == final:
        k -= 1
    return final, k + 1


def sr_bias(fmt, n_rand, variant, count=4096, seed=7):
    """Mean and worst (E[SR(x)] - x) in ULPs of ``fmt`` over x = FP32 with random mantissas
    in [1, 2). E[SR(x)] is exact: for N <= 10 every random word is tried; above, the number of
    words that round up is found by bisection on r (the decision is monotone in r, which the
    enumeration for small N confirms). Returns (mean_bias, max_abs_bias, method)."""
    rng = np.random.default_rng(seed)
    x = (np.uint32(0x3F800000) | rng.integers(0, 1 << 23, count).astype(np.uint32))
    xf = x.view(np.float32).astype(np.float64)
    ulp = {Format.BF16: 2.0 ** -7, Format.FP8_E4M3: 2.0 ** -3}[fmt]

    def val(bits):
        return decode(bits, fmt).view(np.float32).astype(np.float64)

    def sr(r):
        return encode(x, fmt, RoundMode.SR, rand=r, n_rand=n_rand, sr_variant=variant)

    lo_val = val(encode(x, fmt, RoundMode.RTZ))
    hi_bits = sr(np.full(count, (1 << n_rand) - 1, dtype=np.uint64))
    if n_rand <= 10:
        total = np.zeros(count)
        for r in range(1 << n_rand):
            total += val(sr(np.full(count, r, dtype=np.uint64)))
        mean_val = total / (1 << n_rand)
        how = "exact (all random words)"
    else:
        # smallest r that rounds up (2**N if none): P(up) = (2**N - r_min) / 2**N
        lo = np.zeros(count, dtype=np.int64)
        hi = np.full(count, 1 << n_rand, dtype=np.int64)
        while np.any(lo < hi):
            mid = (lo + hi) // 2
            up = sr(np.minimum(mid, (1 << n_rand) - 1).astype(np.uint64)) != \
                encode(x, fmt, RoundMode.RTZ)
            up &= mid < (1 << n_rand)
            hi = np.where(up & (lo < hi), mid, hi)
            lo = np.where(~up & (lo < hi), mid + 1, lo)
        p_up = ((1 << n_rand) - lo) / float(1 << n_rand)
        mean_val = lo_val + p_up * (val(hi_bits) - lo_val)
        how = "exact (bisection on the random word)"
    err = (mean_val - xf) / ulp
    return float(err.mean()), float(np.abs(err).max()), how


def run(args):
    quick = getattr(args, "quick", False)
    n_rand = getattr(args, "n_rand", None) or DEFAULT_N_RAND
    max_terms = getattr(args, "max_terms", None) or (10 ** 5 if quick else 10 ** 6)
    seeds = getattr(args, "seeds", None) or (2 if quick else 5)
    out = {"n_rand": n_rand, "sr_variant": "rne (Fitzgibbon & Felix: fraction rounded to N bits "
                                          "before the random add)"}

    halves = [0.5] * 2048
    rne, _ = serial_sum(Format.FP16, RoundMode.RNE, halves, start=1024.0, verify_every=256)
    srs = [serial_sum(Format.FP16, RoundMode.SR, halves, start=1024.0, seed=s, n_rand=n_rand,
                      verify_every=256)[0] for s in range(1, seeds + 1)]
    out["fp16_1024_plus_half_x2048"] = {"exact": 2048.0, "rne": rne, "sr": srs,
                                        "sr_mean": float(np.mean(srs))}

    f16_val, f16_k = _stagnation(Format.FP16, 600)
    b16_val, b16_k = _stagnation(Format.BF16, 100)
    # the sum reaches its final value at reached_at_term; every later term is lost
    out["harmonic_rne_stagnation"] = {"fp16": {"value": f16_val, "reached_at_term": f16_k,
                                               "first_lost_term": f16_k + 1},
                                      "bf16": {"value": b16_val, "reached_at_term": b16_k,
                                               "first_lost_term": b16_k + 1}}

    cps = [c for c in (10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6) if c <= max_terms]
    terms = _harmonic_terms(max_terms)
    exact = np.cumsum(1.0 / np.arange(1, max_terms + 1, dtype=np.float64))
    harm = {}
    for fmt in (Format.FP16, Format.BF16):
        name = fmt.name.lower()
        rne_final, rne_at = serial_sum(fmt, RoundMode.RNE, terms, checkpoints=cps)
        runs = [serial_sum(fmt, RoundMode.SR, terms, seed=s, n_rand=n_rand, checkpoints=cps,
                           verify_every=max_terms // 4)[1] for s in range(1, seeds + 1)]
        harm[name] = {
            str(c): {"exact": float(exact[c - 1]),
                     "rne_rel_err": abs(rne_at[c] - exact[c - 1]) / exact[c - 1],
                     "sr_rel_err": [abs(r[c] - exact[c - 1]) / exact[c - 1] for r in runs]}
            for c in cps}
        for c in cps:
            harm[name][str(c)]["sr_rel_err_max"] = max(harm[name][str(c)]["sr_rel_err"])
    out["harmonic_rel_err"] = harm

    thousandths = [float(np.float32(0.001))] * 1000
    b_rne, _ = serial_sum(Format.BF16, RoundMode.RNE, thousandths, start=1.0)
    b_sr = [serial_sum(Format.BF16, RoundMode.SR, thousandths, start=1.0, seed=s,
                       n_rand=n_rand)[0] for s in range(1, seeds + 1)]
    out["bf16_1_plus_0.001_x1000"] = {"exact": 1.0 + 1000 * float(np.float32(0.001)),
                                     "rne": b_rne, "sr": b_sr}

    bias = {}
    for n in ([1, 2, 4, 8, 16] if quick else [1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24]):
        row = {}
        for fmt in (Format.BF16, Format.FP8_E4M3):
            for variant in ("rne", "trunc"):
                b, worst, how = sr_bias(fmt, n, variant, count=1024 if quick else 4096)
                row[f"{fmt.name.lower()}_{variant}"] = {"bias_ulp": b, "max_abs_bias_ulp": worst,
                                                        "method": how}
        bias[str(n)] = row
    out["sr_bias_ulp"] = bias
    return out
