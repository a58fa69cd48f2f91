#!/usr/bin/env python3
"""Per-operator summary of seed-grid result files for docs/PERF.md.

    R=docs/results/2026-11-26-h100-1bd2b02
    python3 bench/perf_summary.py $R/cuda.json $R/opencl.json $R/torch.json

(`-` in place of the OpenCL file: a run without one. Files ending in .xz are
read as they are.)

Prints markdown: for each op, the fused CUDA kernel's fraction of the copy
bandwidth on cells moving >= 64 MiB (min, median), its geometric-mean speed-up
over torch.compile and eager (whole grid, and cells >= 64 MiB where launch and
host overheads no longer count), the worst cell against torch.compile, the
OpenCL/CUDA speed ratio on cells >= 64 MiB, and the unfused/fused ratio.
Only cells that are ok in both files enter a ratio. Only the rank-2 cells (the
row ops' dim0 x dim1) are summarised: the GEMMs' M x N x K cells of the same
files are compute-bound, and their roofline is another table. Standard
library only.

Last, every cell below 0.97 of torch.compile with both sides' medians and
minima, and the cells of each file whose median is over 1.5x their own
minimum (a disturbed timing window, marked d).

A second table bounds what any kernel could reach against PyTorch with the
same cost model: each cell at the copy bandwidth of the CUDA run (bytes /
copy_gbps), but never under the fastest fused cell of the run (the launch
and event floor). A geometric mean there below a goal's ratio means no
kernel that moves the fused bytes at copy speed meets it.
"""
import json
import lzma
import math
import sys

BIG = 64 << 20


def load(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    # the row ops' dim0 x dim1 cells (a GEMM's shape is M x N x K)
    doc["cells"] = [c for c in doc["cells"] if len(c["shape"]) == 2]
    return doc, {(c["op"], c["variant"], tuple(c["shape"])): c for c in doc["cells"]}


def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def ok(c):
    return c is not None and c.get("status") == "ok" and c.get("median_us")


DISTURBED = 1.5


def mark(c):
    """" d" where a cell's median is over DISTURBED times its own minimum."""
    return " d" if c.get("min_us") and c["median_us"] > DISTURBED * c["min_us"] else ""


def main(cuda_path, opencl_path, torch_path):
    dc, cu = load(cuda_path)
    # "-": no OpenCL run (the OpenCL column shows "-")
    do, ocl = load(opencl_path) if opencl_path != "-" else (None, {})
    dt, th = load(torch_path)
    print(f"- CUDA run: {dc['meta']['device']}, {dc['meta']['date']}, commit {dc['meta']['git_commit']}, "
          f"copy {dc['meta']['copy_gbps']:.0f} GB/s")
    if do is not None:
        print(f"- OpenCL run: {do['meta']['platform']}, {do['meta']['date']}, "
              f"copy {do['meta']['copy_gbps']:.0f} GB/s")
    print(f"- PyTorch run: {dt['meta']['platform']}, {dt['meta']['date']}, copy {dt['meta']['copy_gbps']:.0f} GB/s")
    print()
    print("| op | bw_frac >=64 MiB min / median | vs compile: grid / >=64 MiB | worst vs compile (dim0 x dim1) "
          "| cells < 0.97 | vs eager: grid / >=64 MiB | OpenCL/CUDA >=64 MiB min / gmean | unfused/fused gmean |")
    print("|---|---|---|---|---|---|---|---|")
    ops = list(dict.fromkeys(c["op"] for c in dc["cells"]))
    for op in ops:
        fused = {s: c for (o, v, s), c in cu.items() if o == op and v == "fused" and ok(c)}
        big = [c for c in fused.values() if c["bytes"] >= BIG]
        fr = sorted(c["bw_frac"] for c in big)
        vs = {}
        for mode in ("compile", "eager"):
            pairs = [(th[(op, mode, s)]["median_us"] / c["median_us"], s, c["bytes"])
                     for s, c in fused.items() if ok(th.get((op, mode, s)))]
            vs[mode] = pairs
        comp = vs["compile"]
        worst = min(comp) if comp else (float("nan"), ("-",), 0)
        below = sum(r < 0.97 for r, _, _ in comp)
        oc = [c["median_us"] / ocl[(op, "fused", s)]["median_us"]
              for s, c in fused.items() if c["bytes"] >= BIG and ok(ocl.get((op, "fused", s)))]
        rel = [cu[(op, "unfused", s)]["median_us"] / c["median_us"]
               for s, c in fused.items() if ok(cu.get((op, "unfused", s)))]
        def pair(p):
            return f"{gmean([r for r, _, _ in p]):.2f} / {gmean([r for r, _, b in p if b >= BIG]):.2f}"
        print(f"| {op} | {fr[0]:.2f} / {fr[len(fr) // 2]:.2f} | {pair(comp)} | {worst[0]:.2f} "
              f"({worst[1][0]} x {worst[1][1]}) | {below} | {pair(vs['eager'])} | "
              f"{f'{min(oc):.2f} / {gmean(oc):.2f}' if oc else '-'} | {gmean(rel):.2f} |")

    copy_bps = dc["meta"]["copy_gbps"] * 1e9
    floor_us = min(c["median_us"] for (o, v, s), c in cu.items() if v == "fused" and ok(c))
    print()
    print(f"Attainable at the copy bandwidth ({copy_bps / 1e9:.0f} GB/s, floor {floor_us:.2f} us): "
          "geometric mean of PyTorch median / max(fused bytes / copy bandwidth, floor)")
    print()
    print("| op | vs compile: grid / >=64 MiB | vs eager: grid / >=64 MiB |")
    print("|---|---|---|")
    for op in ops:
        fused = {s: c for (o, v, s), c in cu.items() if o == op and v == "fused" and ok(c)}
        cols = []
        for mode in ("compile", "eager"):
            bound = [(th[(op, mode, s)]["median_us"] / max(c["bytes"] / copy_bps * 1e6, floor_us),
                      c["bytes"]) for s, c in fused.items() if ok(th.get((op, mode, s)))]
            cols.append(f"{gmean([r for r, _ in bound]):.2f} / "
                        f"{gmean([r for r, b in bound if b >= BIG]):.2f}")
        print(f"| {op} | {cols[0]} | {cols[1]} |")

    # Every cell below 0.97 of compile, each side's median beside its own
    # minimum: a median far above the minimum is a disturbed window (seen on
    # the lent H100 on both sides, 4-8x), not the kernel's speed.
    print()
    print(f"Cells below 0.97 of torch.compile (d: the median over {DISTURBED}x that side's own minimum)")
    print()
    print("| op | dim0 x dim1 | fused median / min (us) | compile median / min (us) | ratio |")
    print("|---|---|---|---|---|")
    for op in ops:
        for (o, v, s), c in cu.items():
            t = th.get((op, "compile", s))
            if o != op or v != "fused" or not ok(c) or not ok(t):
                continue
            r = t["median_us"] / c["median_us"]
            if r < 0.97:
                print(f"| {op} | {s[0]} x {s[1]} | {c['median_us']:.2f} / {c['min_us']:.2f}{mark(c)} "
                      f"| {t['median_us']:.2f} / {t['min_us']:.2f}{mark(t)} | {r:.2f} |")
    for name, cells in (("fuseport CUDA", cu), ("PyTorch", th)):
        hits = [f"{o} {v} {s[0]} x {s[1]} ({c['median_us'] / c['min_us']:.1f}x)"
                for (o, v, s), c in cells.items() if ok(c) and mark(c)]
        print()
        print(f"Disturbed cells in the {name} file ({len(hits)}): {'; '.join(hits) or 'none'}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
