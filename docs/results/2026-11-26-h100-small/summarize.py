#!/usr/bin/env python3
"""Prints the small-cell study of this folder: per cell, the median over the
three rounds of each CUDA configuration's median (and the least minimum),
and torch.compile's medians of its two runs; the last column is compile's
median over the default's.

    mkdir /tmp/sm && tar xJf sm.tar.xz -C /tmp/sm && python3 summarize.py /tmp/sm
"""
import glob
import json
import os
import statistics
import sys

CFGS = ["def", "block", "cluster", "cap256", "cap512"]


def load(path):
    return {(c["op"], tuple(c["shape"])): c for c in json.load(open(path))["cells"]
            if c["status"] == "ok"}


def main(d):
    runs = {c: [load(f) for f in sorted(glob.glob(os.path.join(d, f"sm_{c}[0-9].json")))]
            for c in CFGS}
    torch = [load(f) for f in sorted(glob.glob(os.path.join(d, "sm_torch[0-9].json")))]
    print("%-17s %-10s" % ("op", "shape") + "".join("%15s" % c for c in CFGS)
          + "   compile     ratio")
    for k in sorted(runs["def"][0]):
        cells = []
        for c in CFGS:
            med = statistics.median(r[k]["median_us"] for r in runs[c])
            low = min(r[k]["min_us"] for r in runs[c])
            cells.append("%7.2f/%6.2f" % (med, low))
        comp = [t[k]["median_us"] for t in torch]
        dflt = statistics.median(r[k]["median_us"] for r in runs["def"])
        print("%-17s %-10s" % (k[0], "%dx%d" % k[1]) + "".join("%15s" % x for x in cells)
              + "  " + " ".join("%.2f" % x for x in comp)
              + "  %.3f" % (statistics.median(comp) / dflt))


if __name__ == "__main__":
    main(sys.argv[1])
