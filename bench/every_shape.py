#!/usr/bin/env python3
"""The off-grid sweep of the ten memory-bound ops (issue 23, "Every shape"):
shapes a model has rather than the seed's powers of two, drawn once with a
fixed seed, and the summary of a run of it against static-shape torch.compile.

    python3 bench/every_shape.py shapes [--seed 23] [--count 12]
        prints the --shapes list (MxN: rows x row length)
    python3 bench/every_shape.py summary FUSEPORT.json TORCH.json  (.xz read as is)
        prints per op the geometric mean and the lowest cell of
        torch.compile's median over fuseport's fused median (> 1: fuseport
        faster), and every cell below 0.95x

The draw: the row length N from the lengths models have (hidden sizes,
vocabularies, head dims, sequence lengths), odd and prime lengths, and a
log-uniform length in [1, 300000]; the rows M log-uniform in [1, 500000];
kept when the float32 tensor holds 4 KiB to 2 GiB. Standard library only.
"""
import argparse
import json
import lzma
import math
import random
import sys

MODEL_LENGTHS = [64, 768, 1024, 2048, 4096, 5120, 8192, 11008, 14336, 32000, 50257, 128256, 151936]
ODD_LENGTHS = [1, 3, 7, 97, 1000, 4099, 10007, 65537, 100003, 262147, 300000]
OPS = ["pointwise_chain", "bias_gelu", "bias_dropout_add", "softmax", "double_softmax",
       "softmax_backward", "layernorm", "norm_chain", "hreduce_pointwise", "hreduce_reduce"]


def draw(seed, count):
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < count:
        kind = rng.randrange(3)
        if kind == 0:
            n = rng.choice(MODEL_LENGTHS)
        elif kind == 1:
            n = rng.choice(ODD_LENGTHS)
        else:
            n = max(1, int(math.exp(rng.uniform(0, math.log(300000)))))
        m = max(1, int(math.exp(rng.uniform(0, math.log(500000)))))
        nbytes = 4 * m * n
        if not 4096 <= nbytes <= 2 << 30 or (m, n) in shapes:
            continue
        shapes.append((m, n))
    return shapes


def cells(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    out = {}
    for c in doc["cells"]:
        if c.get("status") == "ok":
            out[(c["op"], c["variant"], tuple(c["shape"]))] = c
    return out


def summary(fp_path, torch_path):
    fp, th = cells(fp_path), cells(torch_path)
    print("| op | cells | gm compile/fused | lowest (shape) | cells < 0.95 |")
    print("|---|---|---|---|---|")
    below = []
    for op in OPS:
        ratios = []
        for (o, v, s), c in fp.items():
            t = th.get((op, "compile", s))
            if o != op or v != "fused" or t is None:
                continue
            r = t["median_us"] / c["median_us"]
            ratios.append((r, s))
            if r < 0.95:
                below.append((op, s, r, c["median_us"], t["median_us"], c.get("bw_frac")))
        if not ratios:
            continue
        gm = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
        lo = min(ratios)
        print(f"| {op} | {len(ratios)} | {gm:.2f} | {lo[0]:.2f} ({lo[1][0]}x{lo[1][1]}) | "
              f"{sum(r < 0.95 for r, _ in ratios)} |")
    if below:
        print("\n| op | shape | compile/fused | fused us | compile us | fused bw_frac |")
        print("|---|---|---|---|---|---|")
        for op, s, r, f, t, bw in sorted(below, key=lambda x: x[2]):
            print(f"| {op} | {s[0]}x{s[1]} | {r:.2f} | {f:.1f} | {t:.1f} | {bw:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shapes")
    s.add_argument("--seed", type=int, default=23)
    s.add_argument("--count", type=int, default=12)
    m = sub.add_parser("summary")
    m.add_argument("fuseport")
    m.add_argument("torch")
    args = ap.parse_args()
    if args.cmd == "shapes":
        print(",".join(f"{m}x{n}" for m, n in draw(args.seed, args.count)))
    else:
        summary(args.fuseport, args.torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
