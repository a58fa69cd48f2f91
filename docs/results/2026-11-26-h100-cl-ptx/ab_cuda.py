#!/usr/bin/env python3
"""A/B of NVIDIA OpenCL configurations beside CUDA, from one device call.

    python3 ab_cuda.py DIR PREFIX CFG1,CFG2,...

DIR holds PREFIX_<cfg><round>.json (fuseport bench files, one per
configuration and round) and PREFIX_cuda.json. Per cell: the least of the
rounds' medians for each configuration, CUDA's median, and CUDA over each
(the OpenCL/CUDA speed ratio); then per op and size class (< or >= 64 MiB
moved) the geometric-mean speed-up of each configuration over the first.
The r1/ and r2/ archives here unpack to such directories
(rows, hr, el prefixes). Standard library only.
"""
import collections
import glob
import json
import math
import os
import sys


def load(path):
    return {(c["op"], tuple(c["shape"])): c for c in json.load(open(path))["cells"]
            if c["status"] == "ok"}


def main(d, prefix, cfgs):
    cuda = load(os.path.join(d, f"{prefix}_cuda.json"))
    data = {}
    for cfg in cfgs:
        runs = [load(f) for f in sorted(glob.glob(os.path.join(d, f"{prefix}_{cfg}[0-9].json")))]
        data[cfg] = {k: min(r[k]["median_us"] for r in runs if k in r) for k in runs[0]}
    keys = sorted(data[cfgs[0]], key=lambda k: (k[0], k[1][0] * k[1][1], k[1]))
    print("%-18s %-11s %7s" % ("op", "shape", "MiB") + "".join("%9s" % c for c in cfgs)
          + "    cuda" + "".join(" cu/%s" % c for c in cfgs))
    gains = collections.defaultdict(lambda: collections.defaultdict(list))
    for k in keys:
        c = cuda[k]["median_us"]
        mib = cuda[k]["bytes"] / 2**20
        print("%-18s %-11s %7.0f" % (k[0], "%dx%d" % k[1], mib)
              + "".join("%9.1f" % data[x][k] for x in cfgs) + "%8.1f " % c
              + "".join("%6.2f" % (c / data[x][k]) for x in cfgs))
        for x in cfgs:
            gains[(k[0], mib >= 64)][x].append(data[cfgs[0]][k] / data[x][k])
    print("geometric-mean speed-up over", cfgs[0])
    for (op, big), g in sorted(gains.items()):
        print("%-18s %s" % (op, ">=64MiB" if big else "<64MiB ")
              + "".join(" %s %.3f" % (x, math.exp(sum(map(math.log, v)) / len(v)))
                        for x, v in g.items()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3].split(","))
