#!/usr/bin/env python3
"""Counts and key cells of a seed-grid record, for docs/PERF.md; the per-op
geometric means and the bounds are bench/perf_summary.py's.

    python3 bench/perf_cells.py CUDA.json OPENCL.json TORCH.json [--shapes MxN,...]

(`-` in place of the OpenCL file: a run without one; .xz files are read as
they are.) Prints markdown: per op, how many fused CUDA cells moving >= 64 MiB
run at >= 0.90 of the copy bandwidth and how many fused OpenCL cells >= 64 MiB
run below 0.80 of CUDA's speed; then, per op and shape, the medians (us) of
fused and unfused CUDA, fused OpenCL, PyTorch eager and torch.compile, the
fused CUDA cell's fraction of the copy bandwidth and torch.compile's median
over it (> 1: fuseport faster). A cell that is not ok prints its status.
Standard library only.
"""
import argparse

from perf_summary import BIG, load, ok

KEY_SHAPES = "128x128,1024x1024,65536x128,128x65536,4096x4096,16384x16384"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cuda")
    ap.add_argument("opencl")
    ap.add_argument("torch")
    ap.add_argument("--shapes", default=KEY_SHAPES, help=f"cells to list (default {KEY_SHAPES})")
    args = ap.parse_args()
    dc, cu = load(args.cuda)
    ocl = load(args.opencl)[1] if args.opencl != "-" else {}
    th = load(args.torch)[1]
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    ops = list(dict.fromkeys(c["op"] for c in dc["cells"]))

    print("| op | fused CUDA cells >= 64 MiB at >= 0.90 of copy bw | OpenCL cells >= 64 MiB below 0.80 of CUDA |")
    print("|---|---|---|")
    for op in ops:
        big = [(s, c) for (o, v, s), c in cu.items() if o == op and v == "fused" and ok(c) and c["bytes"] >= BIG]
        fast = sum(c["bw_frac"] >= 0.90 for _, c in big)
        both = [(c, ocl[(op, "fused", s)]) for s, c in big if ok(ocl.get((op, "fused", s)))]
        slow = sum(c["median_us"] / o["median_us"] < 0.80 for c, o in both)
        print(f"| {op} | {fast}/{len(big)} | {f'{slow}/{len(both)}' if ocl else '-'} |")

    def mib(b):
        m = b / 2**20
        return f"{m:.3g}" if m < 10 else f"{m:.0f}"

    def us(c):
        if c is None:
            return "-"
        return f"{c['median_us']:.2f}" if ok(c) else c.get("status", "?")

    print()
    print("| op | dim0 x dim1 | MiB moved | fused CUDA us (bw) | unfused CUDA us | OpenCL us | eager us | compile us "
          "| compile / fused |")
    print("|---|---|---|---|---|---|---|---|---|")
    for op in ops:
        for s in shapes:
            f = cu.get((op, "fused", s))
            if f is None:
                continue
            t = th.get((op, "compile", s))
            bw = f" ({f['bw_frac']:.2f})" if ok(f) else ""
            ratio = f"{t['median_us'] / f['median_us']:.2f}" if ok(f) and ok(t) else "-"
            print(f"| {op} | {s[0]} x {s[1]} | {mib(f['bytes'])} | {us(f)}{bw} | {us(cu.get((op, 'unfused', s)))} "
                  f"| {us(ocl.get((op, 'fused', s)))} | {us(th.get((op, 'eager', s)))} | {us(t)} | {ratio} |")


if __name__ == "__main__":
    main()
