#!/usr/bin/env python3
"""Summary of bench/gpu_session.sh's 'small' stage: per cell, the median of
each build or grid setting in each round (us) and torch.compile's, then
compile / fuseport for each; and ncu's rows (kernel, grid, block,
registers, instructions, duration) for both sides.

    python3 bench/probes/small_summary.py OUT_DIR
"""
import csv
import glob
import json
import os
import sys


def cells(path):
    doc = json.load(open(path))
    return {(c["op"], tuple(c["shape"])): c["median_us"] for c in doc["cells"]
            if c.get("status") == "ok" and c.get("median_us")}


def table(out, prefix, torch):
    files = sorted(glob.glob(os.path.join(out, prefix + "*.json")))
    if not files:
        return
    runs = {os.path.basename(f)[len(prefix):-5]: cells(f) for f in files}
    names = sorted(runs)
    keys = sorted(set().union(*runs.values()), key=lambda k: (k[0], k[1][0] * k[1][1], k[1]))
    print(f"\n{prefix}: median us per run; last columns compile / run (round-1 runs)")
    print(f"{'op':18} {'shape':12} " + " ".join(f"{n:>9}" for n in names) + f" {'compile':>8} | "
          + " ".join(f"{n:>9}" for n in names if n.endswith("1")))
    for k in keys:
        t = torch.get(k)
        vals = [runs[n].get(k) for n in names]
        fmt = " ".join(f"{v:9.2f}" if v else f"{'-':>9}" for v in vals)
        rat = " ".join(f"{t / runs[n][k]:9.3f}" if t and runs[n].get(k) else f"{'-':>9}"
                       for n in names if n.endswith("1"))
        print(f"{k[0]:18} {k[1][0]}x{k[1][1]:<7} {fmt} {t if t else float('nan'):8.2f} | {rat}")


def ncu_rows(path):
    if not os.path.exists(path):
        return
    text = open(path).read()
    start = text.find('"ID"')
    if start < 0:
        print(f"\n{os.path.basename(path)}: no ncu table")
        return
    per = {}
    for row in csv.DictReader(text[start:].splitlines()):
        key = (row["ID"], row["Kernel Name"][:48])
        per.setdefault(key, {})[row["Metric Name"]] = row["Metric Value"]
    stalls = sorted({k for m in per.values() for k in m if "issue_stalled" in k})
    short = [s.split("stalled_")[1].split("_per_issue")[0] for s in stalls]
    print(f"\n{os.path.basename(path)}: kernel, grid, block, regs, instructions, cycles(max SM), "
          f"dram R/W bytes, ns" + "".join(f", {s}" for s in short))
    for (i, name), m in per.items():
        print(f"  {i:>4} {name:48} {m.get('launch__grid_size', '-'):>7} {m.get('launch__block_size', '-'):>5} "
              f"{m.get('launch__registers_per_thread', '-'):>4} {m.get('smsp__inst_executed.sum', '-'):>12} "
              f"{m.get('sm__cycles_active.max', '-'):>9} {m.get('dram__bytes_read.sum', '-'):>12} "
              f"{m.get('dram__bytes_write.sum', '-'):>12} {m.get('gpu__time_duration.sum', '-'):>9}"
              + "".join(f" {m.get(s, '-'):>8}" for s in stalls))


def main(out):
    tp = os.path.join(out, "s_torch.json")
    torch = {}
    if os.path.exists(tp):
        doc = json.load(open(tp))
        torch = {(c["op"], tuple(c["shape"])): c["median_us"] for c in doc["cells"]
                 if c.get("variant") == "compile" and c.get("status") == "ok" and c.get("median_us")}
    table(out, "es_", torch)
    table(out, "rs_", torch)
    for path in sorted(glob.glob(os.path.join(out, "ncu_*.csv")) + glob.glob(os.path.join(out, "icn_*.csv"))):
        ncu_rows(path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
