"""Train a small model with BF16 weights updated through the golden rounding unit: FP32 vs
BF16-RNE vs BF16-SR. Saves the loss curves to ``results/sr_training.png``.

    python -m scripts.sr_training [--steps 1500] [--lr 0.02] [--out results/sr_training.png]

Model: a two-layer MLP (16 inputs, 32 tanh hidden units, 1 logistic output) trained with
full-batch gradient descent on a synthetic binary task (4096 Gaussian inputs labelled by a
random "teacher" MLP, 5% label noise). Forward and backward passes are FP32 (numpy float32).
The FP32 run keeps FP32 master weights. The BF16 runs keep only BF16 weights: every step each
weight becomes ``encode(fp32_add(decode(w), -lr * g), BF16, mode)`` through
``sim.rounding.RoundingUnitModel`` (one lane per weight, N = 16 random bits, seeded XORWOW),
so an update smaller than half a BF16 ULP is lost under RNE and kept in expectation under SR.
"""

import argparse
import json
import pathlib

import numpy as np

from sim.dtypes import Format, RoundMode
from sim.formats import decode, fp32_add
from sim.rounding import RoundingUnitModel

ROOT = pathlib.Path(__file__).resolve().parents[1]


def make_data(seed=0, n=4096, d=16, hidden=32, noise=0.05):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    w1 = rng.standard_normal((d, hidden)) / np.sqrt(d)
    w2 = rng.standard_normal(hidden) / np.sqrt(hidden)
    y = (np.tanh(x @ w1) @ w2 > 0).astype(np.float32)
    flip = rng.random(n) < noise
    y[flip] = 1 - y[flip]
    return x, y


def init_params(seed, d=16, hidden=32):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((d, hidden)) / np.sqrt(d)).astype(np.float32),
            np.zeros(hidden, np.float32),
            (rng.standard_normal(hidden) / np.sqrt(hidden)).astype(np.float32),
            np.zeros(1, np.float32)]


def loss_and_grads(params, x, y):
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    p = 1 / (1 + np.exp(-z))
    eps = np.float32(1e-7)
    loss = float(-np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))
    dz = (p - y) / np.float32(len(y))
    g_w2 = h.T @ dz
    g_b2 = np.array([dz.sum()], np.float32)
    dh = np.outer(dz, w2) * (1 - h * h)
    g_w1 = x.T @ dh
    g_b1 = dh.sum(axis=0)
    acc = float(np.mean((p > 0.5) == (y > 0.5)))
    return loss, acc, [g.astype(np.float32) for g in (g_w1, g_b1, g_w2, g_b2)]


def _to_bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def train(mode, steps, lr, seed=1, data_seed=0):
    """``mode`` None for FP32, else a RoundMode for BF16 weights. Returns (losses, accs)."""
    x, y = make_data(data_seed)
    params = init_params(seed)
    shapes = [p.shape for p in params]
    sizes = [p.size for p in params]
    flat = np.concatenate([p.ravel() for p in params])
    unit = None
    if mode is not None:
        unit = RoundingUnitModel(lanes=flat.size, n_rand=16, seed=seed)
        w_bits = unit.convert(_to_bits(flat), Format.BF16, RoundMode.RNE)   # initial cast
    losses, accs = [], []
    lr32 = np.float32(lr)
    for _ in range(steps):
        if mode is not None:
            flat = decode(w_bits, Format.BF16).view(np.float32)
        parts = np.split(flat, np.cumsum(sizes)[:-1])
        params = [p.reshape(s) for p, s in zip(parts, shapes)]
        loss, acc, grads = loss_and_grads(params, x, y)
        losses.append(loss)
        accs.append(acc)
        step = (-lr32 * np.concatenate([g.ravel() for g in grads])).astype(np.float32)
        if mode is None:
            flat = (flat + step).astype(np.float32)
        else:
            w32 = decode(w_bits, Format.BF16)
            w_bits = unit.convert(fp32_add(w32, _to_bits(step)), Format.BF16, mode)
    return np.array(losses), np.array(accs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "results" / "sr_training.png"))
    args = parser.parse_args(argv)

    runs = {"FP32": None, "BF16 RNE": RoundMode.RNE, "BF16 SR": RoundMode.SR}
    curves = {name: train(mode, args.steps, args.lr, args.seed) for name, mode in runs.items()}

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = {"FP32": "black", "BF16 RNE": "tab:red", "BF16 SR": "tab:blue"}
    for name, (loss, acc) in curves.items():
        ax1.plot(loss, label=name, color=colors[name], lw=1.4)
        ax2.plot(acc, label=name, color=colors[name], lw=1.4)
    ax1.set_xlabel("step")
    ax1.set_ylabel("training loss (cross-entropy)")
    ax1.set_yscale("log")
    ax2.set_xlabel("step")
    ax2.set_ylabel("training accuracy")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"2-layer MLP, full-batch GD, lr={args.lr}: weights kept in FP32, or in BF16 "
                 "updated with RNE or stochastic rounding (N=16, XORWOW)", fontsize=9)
    fig.tight_layout()
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    summary = {name: {"final_loss": float(loss[-1]), "final_acc": float(acc[-1]),
                      "loss_at_25pct": float(loss[len(loss) // 4])}
               for name, (loss, acc) in curves.items()}
    summary["png"] = str(out)
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
