#!/usr/bin/env python3
"""torch.compile's kernels for fuseport's ops, one launch per cell, for ncu.

    ncu --profile-from-start off -k regex:triton --metrics ... \
        python3 bench/probes/ncu_torch.py --ops bias_gelu --shapes 512x512,1024x1024

Compiles each op as bench/torch_bench.py does (default mode, dim0 dynamic),
warms it up outside the profiled range, then runs it once per shape between
cudaProfilerStart and cudaProfilerStop, so that ncu sees only the kernels of
that run: their grid, block, registers and duration, to set beside
`ncu ... fuseport check --op OP --shapes ...` on the same cells.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch_bench  # noqa: E402  (the op definitions and inputs, shared)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", required=True, help="comma-separated fuseport op names")
    ap.add_argument("--shapes", required=True, help="comma-separated MxN")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    for op in args.ops.split(","):
        fn = torch_bench.OPS[op][0]
        compiled = torch.compile(fn)
        for m, n in shapes:
            inputs = [torch.randn(shape, device="cuda")
                      for _, shape, _, _ in torch_bench.inputs_of(op, m, n)]
            for t in inputs:
                if t.dim() == 2:
                    torch._dynamo.mark_dynamic(t, 0)
            for _ in range(3):
                compiled(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            compiled(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            print(f"ncu_torch: {op} {m}x{n} profiled", flush=True)


if __name__ == "__main__":
    main()
