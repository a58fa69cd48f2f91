#!/usr/bin/env python3
"""The compress family's tables in docs/PERF.md, from a record folder:

    python3 bench/perf_compress.py docs/results/2026-11-27-h100-compress-b980f42 [--cells]

It reads compress-cuda.json (fuseport bench, CUDA) and compress-torch.json
(bench/torch_compress.py: eager, compile, gemm) in the folder and prints
markdown: dw_from_packed's fused variant against its unfused variant
(dequant_unpack + cuBLAS), PyTorch's path in eager and compiled, and cuBLAS
alone on an x' already in memory; then the pack kernels' bandwidth against
the copy bandwidth and against torch.compile (per op and bits; --cells:
every cell). A ratio is the peer's median
over fuseport's fused median (> 1: fuseport faster). Cells match on op,
params and shape; cells not ok are left out. Standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_gemm import gm, load  # noqa: E402  (the record's cells by key, geometric mean)


def shape(s):
    return "x".join(str(v) for v in s)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    cells_table = "--cells" in sys.argv
    folder = args[0]
    fp_doc, fp = load(os.path.join(folder, "compress-cuda.json"))
    th_doc, th = load(os.path.join(folder, "compress-torch.json"))
    meta = fp_doc["meta"]
    copy = meta["copy_gbps"]
    print(f"Device: {meta['device']}, {meta['date'][:10]}, fuseport {meta['git_commit']}; "
          f"copy bandwidth {copy:.0f} GB/s; PyTorch: {th_doc['meta']['platform']}.\n")

    print("#### dw_from_packed (bf16 dy and dW, bits=2): median us, ratio = peer / fused\n")
    print("| K x CIN x COUT | fused | unfused | x | eager | x | compile | x | cuBLAS on x' | x | fused TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (op, params, shp, var), c in sorted(fp.items(), key=lambda kv: kv[0][2]):
        if op != "dw_from_packed" or var != "fused" or params != "bits=2 dtype=bf16":
            continue
        row = [shape(shp), f"{c['median_us']:.1f}"]
        peers = [fp.get((op, params, shp, "unfused"))] + [th.get((op, params, shp, m)) for m in ("eager", "compile", "gemm")]
        for p in peers:
            row += [f"{p['median_us']:.1f}", f"{p['median_us'] / c['median_us']:.2f}"] if p else ["n/a", ""]
        row.append(f"{c['gflops'] / 1e3:.0f}")
        print("| " + " | ".join(row) + " |")

    if cells_table:
        print("\n#### Pack kernels (fused): fraction of the copy bandwidth, and torch.compile's time over fuseport's\n")
        print("| op | bits | K x C | fused us | GB/s | of copy | compile us | x compile | unfused us |")
        print("|---|---|---|---|---|---|---|---|---|")
    fracs, all_fracs, vs_compile, vs_unfused = {}, {}, {}, {}
    for (op, params, shp, var), c in sorted(fp.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        if op == "dw_from_packed" or var != "fused":
            continue
        comp = th.get((op, params, shp, "compile"))
        unf = fp.get((op, params, shp, "unfused"))
        frac = c["gbps"] / copy
        key = (op, params)
        all_fracs.setdefault(key, []).append(frac)
        if c["bytes"] >= 64 << 20:
            fracs.setdefault(key, []).append(frac)
        if comp:
            vs_compile.setdefault(key, []).append(comp["median_us"] / c["median_us"])
        if unf:
            vs_unfused.setdefault(key, []).append(unf["median_us"] / c["median_us"])
        if not cells_table:
            continue
        print(f"| {op} | {params.replace('bits=', '') or '1 (mask)'} | {shape(shp)} | {c['median_us']:.1f} | "
              f"{c['gbps']:.0f} | {frac:.2f} | {comp['median_us']:.1f} | {comp['median_us'] / c['median_us']:.2f} | "
              if comp else
              f"| {op} | {params.replace('bits=', '') or '1 (mask)'} | {shape(shp)} | {c['median_us']:.1f} | "
              f"{c['gbps']:.0f} | {frac:.2f} | n/a | | ", end="")
        print(f"{unf['median_us']:.1f} |" if unf else "n/a |")
    print("\n#### Pack kernels (fused) over the seed shapes: fraction of the copy bandwidth (cells of 64 MiB "
          "or more; all cells), and the peers' time over fuseport's (geometric mean, lowest)\n")
    print("| op | bits | of copy, >= 64 MiB: min / gm | all cells: min / gm | x torch.compile: gm / min | x unfused: gm / min |")
    print("|---|---|---|---|---|---|")
    for key in sorted(all_fracs):
        op, params = key
        big, alls = fracs.get(key, []), all_fracs[key]
        comp, unf = vs_compile.get(key, []), vs_unfused.get(key, [])
        cell = lambda xs, a, b: f"{a(xs):.2f} / {b(xs):.2f}" if xs else "n/a"  # noqa: E731
        print(f"| {op} | {params.replace('bits=', '') or '1 (mask)'} | {cell(big, min, gm)} ({len(big)}) | "
              f"{cell(alls, min, gm)} | {cell(comp, gm, min)} | {cell(unf, gm, min)} |")


if __name__ == "__main__":
    main()
