#!/usr/bin/env python3
"""The convolution family's tables (issue 24) for docs/PERF.md, from a record
folder:

    python3 bench/perf_conv.py docs/results/DATE-h100-conv-COMMIT [--no-layers] [--all-batches]

It reads conv-cuda.json (fuseport bench, CUDA: fused, unfused, vendor) and
conv-torch.json (bench/torch_conv.py: eager, compile, compile-max, conv) in
the folder, and beside them any conv-*-cuda.json and conv-*-torch.json (more
dtypes or batches of the same call: their cells join the first two files'),
and prints markdown:
  - the issue's goals with what was measured (geometric means over ResNet-50's
    layers at batch >= 8, and the lowest cell);
  - per op and batch (f16 NHWC): the same against conv alone (lowest, layers
    at the goal), eager and compile, 3x3 and 1x1 layers apart;
  - from any opencl-*.json in the folder (fuseport bench on OpenCL): fused
    against its im2col + CLBlast path (unfused), per op, dtype and layout;
  - per op and params, per layer (f16 NHWC, batch >= 8): fused TFLOP/s,
    cuDNN's convolution alone (torch_conv.py's mode conv: F.conv2d without
    bias) in TFLOP/s, then fused against conv alone (goal >= 0.95), eager
    (>= 1.3), torch.compile (>= 1.1), max-autotune, fuseport's unfused and
    vendor variants; then the same for layers that are not ResNet-50's;
  - the same per layer for f32 (goal: >= 0.9 of conv alone), every layout
    recorded;
  - per op, params, dtype and layout: the geometric means and lowest cells.
A ratio is the peer's median over fuseport's fused median (> 1: fuseport
faster; against conv alone it is fused's speed as a fraction of cuDNN's).
A ratio below its goal is marked with *. Cells match on op, shape and params,
normalised (a 5-dim shape takes R and stride from its params; S=0 is R;
padding=-1 is (R-1)*dilation/2), so records written with either shape form
meet; cells not ok are left out. Standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_gemm import gm, load  # noqa: E402  (the record's ok cells by key, geometric mean)

PEERS = [("conv", "conv alone", 0.95), ("eager", "eager", 1.3), ("compile", "compile", 1.1),
         ("compile-max", "max-autotune", None), ("unfused", "unfused", None), ("vendor", "vendor", None)]
F32_GOAL = 0.9
# ResNet-50's distinct convolutions (C, H=W, K, R, stride): the goals' layers
RESNET50 = [(3, 224, 64, 7, 2), (64, 56, 64, 1, 1), (64, 56, 64, 3, 1), (64, 56, 256, 1, 1), (256, 56, 64, 1, 1),
            (256, 56, 128, 1, 1), (128, 56, 128, 3, 2), (128, 28, 512, 1, 1), (256, 56, 512, 1, 2),
            (512, 28, 128, 1, 1), (128, 28, 128, 3, 1), (512, 28, 256, 1, 1), (256, 28, 256, 3, 2),
            (256, 14, 1024, 1, 1), (512, 28, 1024, 1, 2), (1024, 14, 256, 1, 1), (256, 14, 256, 3, 1),
            (1024, 14, 512, 1, 1), (512, 14, 512, 3, 2), (512, 7, 2048, 1, 1), (1024, 14, 2048, 1, 2),
            (2048, 7, 512, 1, 1), (512, 7, 512, 3, 1)]


def normalise(op, params, shape):
    """(op, 7-dim shape, params without R and stride, S and padding resolved)."""
    p = dict(kv.split("=", 1) for kv in params.split())
    shape = tuple(shape)
    if len(shape) == 5:
        shape += (int(p.get("R", 3)), int(p.get("stride", 1)))
    p.pop("R", None)
    p.pop("stride", None)
    R = shape[5]
    dil = int(p.get("dilation", 1))
    if int(p.get("S", 0)) == 0:
        p["S"] = str(R)
    if int(p.get("padding", -1)) == -1:
        p["padding"] = str((R - 1) * dil // 2)
    return op, shape, tuple(sorted(p.items()))


def rekey(cells):
    """{(op, shape7, params) : {variant: cell}}."""
    out = {}
    for (op, params, shape, variant), c in cells.items():
        out.setdefault(normalise(op, params, shape), {})[variant] = c
    return out


def tflops(c):
    return c["flops"] / c["median_us"] / 1e6 if c.get("flops") else float("nan")


def ratio(cells, variant):
    f, p = cells.get("fused"), cells.get(variant)
    return p["median_us"] / f["median_us"] if f and p else None


def mark(r, goal):
    if r is None:
        return "n/a"
    return f"{r:.2f}{'*' if goal is not None and r < goal else ''}"


def layer_of(shape):
    N, C, H, W, K, R, st = shape
    return (C, H, K, R, st) if H == W else None


def layer_name(shape):
    N, C, H, W, K, R, st = shape
    return f"{C}x{H}{'' if H == W else 'x' + str(W)} -> {K}, {R}x{R}{' /' + str(st) if st > 1 else ''}"


def param_text(key, drop=("dtype", "layout")):
    """The key's params but those dropped and those at their defaults (S = R,
    padding = (R-1)*dilation/2, dilation 1): the op's own choices."""
    op, shape, params = key
    p = dict(params)
    dil = int(p.get("dilation", 1))
    default = {"S": str(shape[5]), "padding": str((shape[5] - 1) * dil // 2), "dilation": "1"}
    return " ".join(f"{k}={v}" for k, v in params if k not in drop and default.get(k) != v) or "-"


def summarise(rs):
    """'gm (min at shape, n cells)' of [(ratio, shape)]."""
    if not rs:
        return "n/a"
    lo = min(rs)
    return f"{gm([r for r, _ in rs]):.2f} (min {lo[0]:.2f} at {'x'.join(map(str, lo[1]))}, {len(rs)})"


def selected(merged, dtype, layout, keep):
    """[(key, cells)] of fused cells of this dtype and layout whose shape keep() takes."""
    out = []
    for key, cells in merged.items():
        op, shape, params = key
        p = dict(params)
        if "fused" in cells and p.get("dtype") == dtype and p.get("layout") == layout and keep(shape):
            out.append((key, cells))
    rank = {layer: k for k, layer in enumerate(RESNET50)}  # the network's order, then the rest
    return sorted(out, key=lambda kc: (kc[0][0], param_text(kc[0], ()), rank.get(layer_of(kc[0][1]), len(rank)),
                                       kc[0][1]))


def layer_table(rows, title, conv_goal, peers):
    print(f"\n#### {title}\n")
    head = ["layer (C x H -> K, R x S / stride)", "N", "fused TFLOP/s", "conv alone TFLOP/s"]
    for v, name, goal in peers:
        g = conv_goal if v == "conv" else goal
        head.append(f"x {name}" + (f" (>= {g})" if g else ""))
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for (op, shape, params), cells in rows:
        conv = cells.get("conv")
        cols = [layer_name(shape), str(shape[0]), f"{tflops(cells['fused']):.0f}",
                f"{tflops(conv):.0f}" if conv else "n/a"]
        for v, _, goal in peers:
            cols.append(mark(ratio(cells, v), conv_goal if v == "conv" else goal))
        print("| " + " | ".join(cols) + " |")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    no_layers = "--no-layers" in sys.argv
    min_batch = 1 if "--all-batches" in sys.argv else 8
    folder = args[0]
    fp_doc, fp = load(os.path.join(folder, "conv-cuda.json"))
    th_doc, th = load(os.path.join(folder, "conv-torch.json"))
    for name in sorted(os.listdir(folder)):  # conv-<part>-cuda.json / -torch.json of the same call
        if name.startswith("conv-") and name not in ("conv-cuda.json", "conv-torch.json"):
            if name.endswith("-cuda.json"):
                fp.update(load(os.path.join(folder, name))[1])
            elif name.endswith("-torch.json"):
                th.update(load(os.path.join(folder, name))[1])
    merged = rekey(fp)
    for key, cells in rekey(th).items():
        if key in merged:  # only shapes fuseport ran
            for v, c in cells.items():
                merged[key].setdefault(v, c)
    fm, tm = fp_doc["meta"], th_doc["meta"]
    print(f"Device: {fm.get('device')}, {str(fm.get('date'))[:10]}, fuseport {fm.get('git_commit')}; "
          f"PyTorch: {tm.get('platform')} on {tm.get('device')}, {str(tm.get('date'))[:10]}.")
    if fm.get("device") != tm.get("device"):
        print(f"\n**The two records come from different devices ({fm.get('device')} / {tm.get('device')}): "
              "the ratios compare nothing.**")

    def resnet(shape, batch=min_batch):
        return shape[0] >= batch and layer_of(shape) in RESNET50

    ops = sorted({(k[0], param_text(k)) for k, cells in merged.items() if "fused" in cells})

    # ---- the goals
    print("\nGoals (issue 24), ResNet-50's layers at batch >= 8: geometric mean of the ratio (lowest cell, cells), "
          "per op and params\n")
    print("| goal | op | 3x3 layers | 1x1 layers | 7x7 (the stem) |")
    print("|---|---|---|---|---|")
    goals = [("f16 NHWC fused >= 0.95x cuDNN's convolution alone", "f16", "nhwc", "conv"),
             ("f16 NHWC fused >= 1.3x eager", "f16", "nhwc", "eager"),
             ("f16 NHWC fused >= 1.1x torch.compile", "f16", "nhwc", "compile"),
             ("f16 NHWC: cuDNN's fusion (vendor) against fused", "f16", "nhwc", "vendor")]
    goals += [(f"f32 {lay.upper()} fused >= {F32_GOAL}x cuDNN's f32 convolution alone", "f32", lay, "conv")
              for lay in ("nchw", "nhwc")]
    for text, dtype, layout, peer in goals:
        for op, ptext in ops:
            rows = [(key, cells) for key, cells in selected(merged, dtype, layout, lambda s: resnet(s, 8))
                    if key[0] == op and param_text(key) == ptext]
            if not rows:
                continue
            cols = []
            for R in (3, 1, 7):
                rs = [(r, key[1]) for key, cells in rows if key[1][5] == R
                      for r in [ratio(cells, peer)] if r is not None]
                cols.append(summarise(rs))
            print(f"| {text} | {op} {ptext} | " + " | ".join(cols) + " |")

    # ---- per batch
    print("\nPer op and batch, f16 NHWC, ResNet-50's layers (the stem apart): geometric mean of the ratio "
          "(lowest; layers at the goal)\n")
    print("| op | batch | 3x3: x conv alone (>= 0.95) | 1x1: x conv alone (>= 0.95) | 3x3: x eager, x compile "
          "| 1x1: x eager, x compile |")
    print("|---|---|---|---|---|---|")
    for op, ptext in ops:
        rows = [(k, c) for k, c in selected(merged, "f16", "nhwc", lambda s: resnet(s, 1))
                if k[0] == op and param_text(k) == ptext]
        for batch in sorted({k[1][0] for k, _ in rows}, reverse=True):
            def of(R, peer):
                return [r for k, c in rows if k[1][0] == batch and k[1][5] == R for r in [ratio(c, peer)]
                        if r is not None]
            cols = []
            for R in (3, 1):
                rs = of(R, "conv")
                cols.append(f"{gm(rs):.2f} ({min(rs):.2f}; {sum(r >= 0.95 for r in rs)} of {len(rs)})"
                            if rs else "n/a")
            for R in (3, 1):
                cols.append(", ".join(f"{gm(of(R, v)):.2f}" if of(R, v) else "n/a" for v in ("eager", "compile")))
            print(f"| {op} {ptext} | {batch} | " + " | ".join(cols) + " |")

    # ---- OpenCL: fused against its im2col + CLBlast path
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("opencl-") and name.endswith(".json")):
            continue
        doc, cells = load(os.path.join(folder, name))
        m = doc["meta"]
        print(f"\n`{name}` ({m.get('device')}, {m.get('platform')}, {str(m.get('date'))[:10]}): fused against "
              "its im2col + CLBlast path (x unfused: unfused median / fused median)\n")
        print("| op | dtype | layout | cells | x unfused: geometric mean (min-max) | fused faster |")
        print("|---|---|---|---|---|---|")
        ocl = rekey(cells)
        for combo in sorted({(k[0], param_text(k), dict(k[2]).get("dtype"), dict(k[2]).get("layout"))
                             for k, c in ocl.items() if "fused" in c}):
            op, ptext, dtype, layout = combo
            rs = [r for k, c in ocl.items() if (k[0], param_text(k), dict(k[2]).get("dtype"),
                                                dict(k[2]).get("layout")) == combo
                  for r in [ratio(c, "unfused")] if r is not None]
            if rs:
                print(f"| {op} {ptext} | {dtype} | {layout} | {len(rs)} | {gm(rs):.2f} ({min(rs):.2f}-{max(rs):.2f}) "
                      f"| {sum(r > 1 for r in rs)} of {len(rs)} |")

    # ---- per layer
    if not no_layers:
        for op, ptext in ops:
            rows = [(k, c) for k, c in selected(merged, "f16", "nhwc", resnet) if k[0] == op and param_text(k) == ptext]
            if rows:
                layer_table(rows, f"{op} {ptext}, f16 NHWC, batch >= {min_batch}: per layer "
                            "(ratio = peer median / fused median; * below the goal)", 0.95, PEERS)
        for op, ptext in ops:  # shapes of other networks (the small-C layers of a record of their own)
            rows = [(k, c) for k, c in selected(merged, "f16", "nhwc", lambda s: layer_of(s) not in RESNET50)
                    if k[0] == op and param_text(k) == ptext]
            if rows:
                layer_table(rows, f"{op} {ptext}, f16 NHWC, layers beside ResNet-50's: per layer "
                            "(ratio = peer median / fused median)", None, PEERS)
        for layout in ("nchw", "nhwc"):
            for op, ptext in ops:
                rows = [(k, c) for k, c in selected(merged, "f32", layout, resnet)
                        if k[0] == op and param_text(k) == ptext]
                if rows:
                    layer_table(rows, f"{op} {ptext}, f32 (no TF32) {layout.upper()}, batch >= {min_batch}: "
                                f"per layer (goal: >= {F32_GOAL} of cuDNN's f32 convolution alone)", F32_GOAL, PEERS)

    # ---- every dtype and layout, geometric means
    print("\n#### Every op, params, dtype and layout: geometric mean of peer / fused (lowest) over ResNet-50's "
          f"layers at batch >= {min_batch}; the odd shapes and the rest on their own line\n")
    head = ["op", "params", "dtype", "layout", "cells", "fused TFLOP/s (min-max)"] + [f"x {n}" for _, n, _ in PEERS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    combos = sorted({(k[0], param_text(k), dict(k[2]).get("dtype"), dict(k[2]).get("layout"))
                     for k, c in merged.items() if "fused" in c})
    for op, ptext, dtype, layout in combos:
        for label, keep in (("ResNet-50", resnet), ("other", lambda s: not resnet(s))):
            rows = [(k, c) for k, c in selected(merged, dtype, layout, keep) if k[0] == op and param_text(k) == ptext]
            if not rows:
                continue
            tf = [tflops(c["fused"]) for _, c in rows]
            cols = [op, ptext, dtype, layout, f"{label}: {len(rows)}", f"{min(tf):.1f}-{max(tf):.1f}"]
            for v, _, _ in PEERS:
                rs = [r for _, c in rows for r in [ratio(c, v)] if r is not None]
                cols.append(f"{gm(rs):.2f} ({min(rs):.2f})" if rs else "n/a")
            print("| " + " | ".join(cols) + " |")
    missing = [(k, v) for k, c in merged.items() if "fused" in c for v in ("conv", "eager", "compile") if v not in c]
    if missing:
        print(f"\n{len(missing)} fused cells have no PyTorch peer of some mode (not run, or not ok), e.g. "
              f"{missing[0][0][0]} {'x'.join(map(str, missing[0][0][1]))} {param_text(missing[0][0], ())} "
              f"{missing[0][1]}.")


if __name__ == "__main__":
    main()
