#!/usr/bin/env python3
"""The matmul family's tables in docs/PERF.md, from a record folder:

    python3 bench/perf_gemm.py docs/results/2026-11-26-h100-gemm-fba83e6
    python3 bench/perf_gemm.py --misaligned RUN.json [RUN.json ...]

It reads gemm-cuda.json (fuseport bench, CUDA), gemm-cuda-sm80.json (the
sm_80 main loop forced), gemm-opencl.json (NVIDIA OpenCL, f32) and every
torch*.json (bench/torch_bench.py: eager, compile, autotune, gemm) in the
folder, and prints markdown: the issue's goals with what was measured, then
per op the geometric means of fused against each peer over the seed shapes.
A ratio is the peer's median over fuseport's fused median (> 1: fuseport
faster). Cells match on op, params and shape; cells not ok are left out.
With --misaligned: per file (a fuseport bench run of matmul_relu), each fused
cell's median, TFLOP/s and speed relative to its aligned neighbour's in the
same file (4096^3 for 4096x4095x4096, 4096x4096x4095, 4097^3 and 4104^3;
2048x50304x1024 for 2048x50257x1024), one column per file.
Standard library only.
"""
import glob
import json
import math
import os
import sys

UNPAIRED = ("matmul_add", "matmul_relu", "matmul_add_relu")
PAIRED = ("matmul_split_act", "linear_geglu")


def load(path):
    with open(path) as f:
        doc = json.load(f)
    cells = {}
    for c in doc["cells"]:
        if c.get("status") == "ok":
            cells[(c["op"], c["params"], tuple(c["shape"]), c["variant"])] = c
    return doc, cells


def gm(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def ratios(fp, peer_cells, peer, ops, keep=lambda shape: True):
    """[(peer median / fused median, key)] over fused cells of ops."""
    out = []
    for key, c in fp.items():
        op, params, shape, variant = key
        if variant != "fused" or op not in ops or not keep(shape):
            continue
        p = peer_cells.get((op, params, shape, peer))
        if p:
            out.append((p["median_us"] / c["median_us"], key))
    return out


def fmt(rs):
    if not rs:
        return "-"
    lo = min(rs)
    return f"{gm([r for r, _ in rs]):.2f} (min {lo[0]:.2f} at {'x'.join(map(str, lo[1][2]))}, {len(rs)} cells)"


def big_aligned(shape):
    return all(v >= 2048 for v in shape[:3]) and shape[1] % 8 == 0 and shape[2] % 8 == 0


def tflops(c):
    return c["flops"] / c["median_us"] / 1e6


ALIGNED_NEIGHBOUR = {(4096, 4095, 4096): (4096, 4096, 4096), (4096, 4096, 4095): (4096, 4096, 4096),
                     (4097, 4097, 4097): (4096, 4096, 4096), (4104, 4104, 4104): (4096, 4096, 4096),
                     (2048, 50257, 1024): (2048, 50304, 1024)}


def misaligned(paths):
    runs = [load(p)[1] for p in paths]
    print("| shape (MxNxK) | params | " + " | ".join(f"run {i + 1}: us, TFLOP/s, of aligned"
                                                   for i in range(len(runs))) + " |")
    print("|---|---|" + "---|" * len(runs))
    for k in sorted(runs[0]):
        if k[0] != "matmul_relu" or k[3] != "fused" or k[2] not in ALIGNED_NEIGHBOUR:
            continue
        cols = []
        for cells in runs:
            c = cells.get(k)
            a = cells.get((k[0], k[1], ALIGNED_NEIGHBOUR[k[2]], k[3]))
            cols.append(f"{c['median_us']:.1f}, {tflops(c):.0f}, {tflops(c) / tflops(a):.2f}"
                        if c and a else "-")
        print(f"| {'x'.join(map(str, k[2]))} | {k[1]} | " + " | ".join(cols) + " |")


def main():
    if sys.argv[1] == "--misaligned":
        misaligned(sys.argv[2:])
        return
    folder = sys.argv[1]
    doc, fp = load(os.path.join(folder, "gemm-cuda.json"))
    torch = {}
    for path in sorted(glob.glob(os.path.join(folder, "torch*.json"))):
        torch.update(load(path)[1])
    sm80 = load(os.path.join(folder, "gemm-cuda-sm80.json"))[1]
    ocl = load(os.path.join(folder, "gemm-opencl.json"))[1]
    meta = doc["meta"]
    peak = meta.get("peak_tflops", {})
    print(f"Record: {meta.get('device')} , commit {meta.get('git_commit')}, {meta.get('date')}; "
          f"peak f16 {peak.get('f16', {}).get('tflops', 0):.0f} TFLOP/s, "
          f"bf16 {peak.get('bf16', {}).get('tflops', 0):.0f} ({peak.get('f16', {}).get('source', '')})\n")

    print("| goal | measured |")
    print("|---|---|")
    print(f"| fused f16/bf16, M,N,K >= 2048: no slower than the GEMM alone (cuBLAS, eager `a @ b`, f16) "
          f"| unpaired {fmt(ratios(fp, torch, 'gemm', UNPAIRED, big_aligned))}; "
          f"paired {fmt(ratios(fp, torch, 'gemm', PAIRED, big_aligned))} |")
    print(f"| same, against cuBLASLt's own fused epilogue (vendor; f16 and bf16) "
          f"| {fmt(ratios(fp, fp, 'vendor', UNPAIRED, big_aligned))} |")
    for mode in ("autotune", "compile"):
        print(f"| fused, M,N,K >= 2048: >= 1.05x torch.compile ({mode}) in geometric mean, no cell < 0.95 "
              f"| {fmt(ratios(fp, torch, mode, UNPAIRED + PAIRED, big_aligned))} |")
    for op in PAIRED:
        print(f"| {op}: >= 1.2x unfused, every cell | {fmt(ratios(fp, fp, 'unfused', (op,)))} |")
        print(f"| {op}: >= 1.0x max-autotune, every cell (f16) | {fmt(ratios(fp, torch, 'autotune', (op,)))} |")
    narrow = lambda s: len(s) == 4 and s[1] <= 256
    print(f"| matmul_matmul, N <= 256: >= 1.2x two cuBLAS calls (unfused) "
          f"| {fmt(ratios(fp, fp, 'unfused', ('matmul_matmul',), narrow))} |")
    print(f"| sm_80 main loop on the H100: >= 0.6x cuBLAS(Lt) | {fmt(ratios(sm80, sm80, 'vendor', ('matmul_relu',)))} |")
    print(f"| OpenCL on NVIDIA, f32: fused >= CLBlast's GEMM (unfused: CLBlast + epilogue kernels) "
          f"| {fmt(ratios(ocl, ocl, 'unfused', UNPAIRED))} |")
    one = [c for k, c in fp.items() if k[0] == "matmul_relu" and k[3] == "fused" and k[2][0] == 1]
    copy = meta.get("copy_gbps", 0)
    for c in one:
        v = fp.get((c["op"], c["params"], tuple(c["shape"]), "vendor"))
        print(f"| 1 x 4096 x 4096 near memory bandwidth ({c['params'].split()[0]}) | {c['gbps']:.0f} GB/s, "
              f"{c['gbps'] / copy:.2f} of this run's copy ({copy:.0f} GB/s); cuBLASLt "
              f"{v['gbps']:.0f} GB/s |" if v else "|")
    for odd, near in (((4097, 4097, 4097), (4096, 4096, 4096)), ((4096, 4095, 4096), (4096, 4096, 4096)),
                      ((2048, 50257, 1024), None)):
        for k, c in sorted(fp.items()):
            if k[0] != "matmul_relu" or k[3] != "fused" or k[2] != odd:
                continue
            v = fp.get(k[:3] + ("vendor",))
            a = fp.get((k[0], k[1], near, "fused")) if near else None
            rel = f", {tflops(c) / tflops(a):.2f} of {'x'.join(map(str, near))}'s speed" if a else ""
            print(f"| N or K not a multiple of 8: {'x'.join(map(str, odd))} ({k[1].split()[0]}) "
                  f"| {tflops(c):.0f} TFLOP/s{rel}; cuBLASLt {tflops(v):.0f} |" if v else "|")

    print("\nPer op, f16 and bf16 over the seed shapes (geometric mean of peer / fused, lowest cell):\n")
    print("| op | fused TFLOP/s (M,N,K >= 2048) | unfused | vendor (cuBLASLt) | eager (f16) | compile (f16) | max-autotune (f16) | GEMM alone (f16) |")
    print("|---|---|---|---|---|---|---|---|")
    ops = list(dict.fromkeys(k[0] for k in fp))
    for op in ops:
        tf = [tflops(c) for k, c in fp.items() if k[0] == op and k[3] == "fused" and all(v >= 2048 for v in k[2][:3])]
        cols = [f"{min(tf):.0f}-{max(tf):.0f}" if tf else "-"]
        for src, peer in ((fp, "unfused"), (fp, "vendor"), (torch, "eager"), (torch, "compile"),
                          (torch, "autotune"), (torch, "gemm")):
            rs = ratios(fp, src, peer, (op,))
            cols.append(f"{gm([r for r, _ in rs]):.2f} ({min(rs)[0]:.2f})" if rs else "n/a")
        print(f"| {op} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    main()
