#!/usr/bin/env python3
"""matmul_matmul's table in docs/PERF.md, from a record folder:

    python3 bench/perf_b2b.py docs/results/2026-11-29-h200-b2b-fccd285

It reads seed.json and own.json (fuseport bench, CUDA: fused, and unfused =
two cuBLAS calls), ab/seed-old.json and ab/own-old.json (the same binary
with the 128-row b2b rows forced through a tuning cache), torch.json and
torch-autotune.json (bench/torch_bench.py: eager, compile, gemm = two
matmuls, autotune), and prints one markdown row per shape and dtype with
the medians in us and the peers' time over fused (> 1: fused faster),
then the geometric means. Cells match on params and shape; cells not ok
are left out. Standard library only.
"""
import json
import math
import os
import sys

PEERS = (("unfused", "unfused"), ("old", "128-row"), ("eager", "eager"),
         ("compile", "compile"), ("autotune", "max-autotune"))


def load(path):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        doc = json.load(f)
    return {(c["params"], tuple(c["shape"]), c["variant"]): c["median_us"]
            for c in doc["cells"] if c.get("status") == "ok" and c["op"] == "matmul_matmul"}


def gm(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    r = sys.argv[1]
    ours, old, torch = {}, {}, {}
    for name in ("seed.json", "own.json"):
        ours.update(load(os.path.join(r, name)))
    for name in ("ab/seed-old.json", "ab/own-old.json"):
        old.update({(p, s, "old"): v for (p, s, _), v in load(os.path.join(r, name)).items()})
    for name in ("torch.json", "torch-autotune.json"):
        torch.update(load(os.path.join(r, name)))
    cells = {**ours, **old, **torch}
    print("| shape (MxNxKxP) | dtype | fused, us | " +
          " | ".join(f"{label}, us (/ fused)" for _, label in PEERS) + " |")
    print("|---|---|---|" + "---|" * len(PEERS))
    sums = {v: [] for v, _ in PEERS}
    for (params, shape, variant), us in ours.items():
        if variant != "fused":
            continue
        row = []
        for v, _ in PEERS:
            p = cells.get((params, shape, v))
            row.append(f"{p:.1f} ({p / us:.2f})" if p else "n/a")
            if p and shape[1] <= 256:
                sums[v].append(p / us)
        dtype = params.split()[0].split("=")[1]
        print(f"| {'x'.join(map(str, shape))} | {dtype} | {us:.1f} | " + " | ".join(row) + " |")
    print()
    print("Geometric mean of peer / fused over the cells with N <= 256: " +
          ", ".join(f"{label} {gm(sums[v]):.2f} ({len(sums[v])} cells)"
                    for v, label in PEERS if sums[v]))


if __name__ == "__main__":
    main()
