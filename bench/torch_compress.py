#!/usr/bin/env python3
"""PyTorch beside fuseport's activation-compression family (SPEC.md
"Activation compression"; the compression notebook), timed as torch_bench.py
times (its Timer: device events, L2 flushed before each repetition) and
written in fuseport's JSON schema, so that

    fuseport compare cuda.json torch.json --variants fused:eager

sets them side by side. Modes:
  eager    the notebook's PyTorch path: tensor ops, one kernel each
  compile  the same under torch.compile (default mode, static shapes)
  gemm     dw_from_packed only: torch.mm on an x' dequantised beforehand
           (cuBLAS alone: what the fused kernel's GEMM part competes with)

The quantisation rule is the notebook's float32 steps (kernels.def, family
compress). Before timing, each op's eager and compiled outputs are checked
against a float64 evaluation on the same inputs: the packed words must agree
with the rule except where float rounding ties decide (a compiled graph may
contract into fma: at most 1e-3 of the words), dequantised values and dW
within bf16 rounding.

    python3 bench/torch_compress.py --out torch-compress.json
    python3 bench/torch_compress.py --check-only
"""
import argparse
import datetime
import json
import math
import os
import socket
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench as tb  # noqa: E402  (Timer, cell, write_atomic, copy bandwidth)

GROUP = 256
PACK_OPS = ["quant_pack", "dequant_unpack", "relu_pack", "relu_unpack_backward"]
OPS = PACK_OPS + ["dw_from_packed"]
# ops/compress.c's `--shapes seed`: K x C (pack ops), K x CIN x COUT (dw)
PACK_SEED = [(8192, 768), (100864, 768), (8192, 1024), (100864, 1024), (8192, 4096), (32768, 4096),
             (100003, 1000), (65537, 257), (4096, 65537)]
DW_SEED = [(8192, 768, 768), (100864, 768, 768), (8192, 1024, 1024), (100864, 1024, 1024),
           (16384, 4096, 4096), (8192, 4096, 1024), (8191, 768, 768), (100003, 1000, 1000)]


# ---- the notebook's path as PyTorch tensor ops ---------------------------------------------
def quant_pack(x, bits):
    K, C = x.shape
    G = (C + GROUP - 1) // GROUP
    xp = torch.nn.functional.pad(x, (0, G * GROUP - C)).view(K * G, GROUP).float()
    mn = xp.amin(1, keepdim=True)
    mx = xp.amax(1, keepdim=True)
    rng = mx - mn
    qmax = (1 << bits) - 1
    scale = torch.where(rng > 0, rng / qmax, torch.ones_like(rng))
    inv = 1.0 / scale
    q = ((xp - mn) * inv + (0.5 - 1e-6)).to(torch.int32).clamp(0, qmax)
    vpw = 32 // bits
    shifts = torch.arange(vpw, device=x.device, dtype=torch.int32) * bits
    words = (q.view(K * G, -1, vpw) << shifts).sum(-1).to(torch.int32)  # int64 sum, wrapped
    return words.view(K, -1), scale.view(K, G).bfloat16(), mn.view(K, G).bfloat16()


def dequant(words, scale, mn, bits, C):
    K = words.shape[0]
    G = scale.shape[1]
    vpw = 32 // bits
    shifts = torch.arange(vpw, device=words.device, dtype=torch.int32) * bits
    q = (words.view(K * G, -1, 1) >> shifts) & ((1 << bits) - 1)
    x = q.view(K * G, GROUP).float() * scale.view(K * G, 1).float() + mn.view(K * G, 1).float()
    return x.view(K, G * GROUP)[:, :C].bfloat16()


def relu_pack(x):
    K, C = x.shape
    CW = (C + 31) // 32
    y = torch.relu(x)
    m = torch.nn.functional.pad(x > 0, (0, CW * 32 - C)).view(K, CW, 32).to(torch.int64)
    shifts = torch.arange(32, device=x.device, dtype=torch.int64)
    return y, (m << shifts).sum(-1).to(torch.int32)  # bit 31 wraps into the sign


def relu_unpack_backward(dy, mask):
    K, C = dy.shape
    shifts = torch.arange(32, device=dy.device, dtype=torch.int32)
    bits = ((mask.view(K, -1, 1) >> shifts) & 1).view(K, -1)[:, :C]
    return dy * bits.to(dy.dtype)


def dw_from_packed(dy, words, scale, mn, bits, C):
    return torch.mm(dy.t(), dequant(words, scale, mn, bits, C))


# ---- inputs, references, checks ------------------------------------------------------------
def packed_inputs(K, C, bits, device, gen):
    G = (C + GROUP - 1) // GROUP
    words = torch.randint(-(1 << 31), 1 << 31, (K, G * 8 * bits), dtype=torch.int64, device=device,
                          generator=gen).to(torch.int32)
    scale = (torch.rand(K, G, device=device, generator=gen) * 2.0 ** -bits).bfloat16()
    mn = (torch.rand(K, G, device=device, generator=gen) * 2 - 1).bfloat16()
    return words, scale, mn


def inputs_of(op, shape, bits, device, gen):
    if op == "dw_from_packed":
        K, CIN, COUT = shape
        dy = ((torch.rand(K, COUT, device=device, generator=gen) * 2 - 1) * 2.0 / math.sqrt(K)).bfloat16()
        return (dy,) + packed_inputs(K, CIN, bits, device, gen)
    K, C = shape
    rnd = lambda: (torch.rand(K, C, device=device, generator=gen) * 2 - 1).bfloat16()  # noqa: E731
    if op == "dequant_unpack":
        return packed_inputs(K, C, bits, device, gen)
    if op == "relu_unpack_backward":
        CW = (C + 31) // 32
        mask = torch.randint(-(1 << 31), 1 << 31, (K, CW), dtype=torch.int64, device=device,
                             generator=gen).to(torch.int32)
        return rnd(), mask
    return (rnd(),)


def function_of(op, shape, bits):
    C = shape[1]
    return {
        "quant_pack": lambda x: quant_pack(x, bits),
        "dequant_unpack": lambda w, s, m: dequant(w, s, m, bits, C),
        "relu_pack": relu_pack,
        "relu_unpack_backward": relu_unpack_backward,
        "dw_from_packed": lambda dy, w, s, m: dw_from_packed(dy, w, s, m, bits, C),
    }[op]


def check(op, fn, inputs, shape, bits):
    """(ok, message): fn's outputs against float64 evaluations."""
    got = fn(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    if op == "quant_pack":
        ref = quant_pack(inputs[0], bits)  # eager float32 steps: the rule
        bad = (got[0] != ref[0]).float().mean().item()
        # a compiled graph contracts (x - min) * inv + c into an fma, which
        # decides some 8-bit ties the other way: 5.6e-4 of the words there
        ok = bad <= 1e-3 and torch.equal(got[1], ref[1]) and torch.equal(got[2], ref[2])
        return ok, f"words differing {bad:.2e}"
    if op == "dequant_unpack":
        w, s, m = inputs
        K, C = shape
        # the codes, exact through dequant with scale 1 and min 0
        q = dequant(w, torch.ones_like(s), torch.zeros_like(m), bits, C).double()
        G = s.shape[1]
        s64 = s.double().repeat_interleave(GROUP, 1)[:, :C]
        m64 = m.double().repeat_interleave(GROUP, 1)[:, :C]
        ref = q * s64 + m64
        err = ((got[0].double() - ref).abs() / (ref.abs() + 1e-30)).max().item()
        return err <= 2.0 ** -8, f"max rel err {err:.2e} (G={G})"
    if op == "relu_pack":
        x = inputs[0]
        ok = torch.equal(got[0], torch.relu(x)) and torch.equal(got[1], relu_pack(x)[1])
        return ok, "exact"
    if op == "relu_unpack_backward":
        ok = torch.equal(got[0], relu_unpack_backward(*inputs))
        return ok, "exact"
    dy, w, s, m = inputs
    C = shape[1]
    ref = dy.double().t() @ dequant(w, s, m, bits, C).double()
    err = (got[0].double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
    return err <= 2.0 ** -7, f"max err / max|ref| {err:.2e}"


def params_of(op, bits, dtype):
    if op in ("relu_pack", "relu_unpack_backward"):
        return ""
    if op == "dw_from_packed":
        return f"bits={bits} dtype={dtype}"
    return f"bits={bits}"


def io_bytes(op, inputs, outs):
    return sum(t.numel() * t.element_size() for t in inputs) + sum(t.numel() * t.element_size() for t in outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="result JSON (fuseport's schema)")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--shapes", default="seed", help="'seed' or a comma list of KxC (pack ops), KxCINxCOUT (dw)")
    ap.add_argument("--bits", default="2", help="comma list of 1,2,4,8")
    ap.add_argument("--modes", default="eager,compile,gemm")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--warmup-ms", type=float, default=10.0)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--seed", type=int, default=20230814)
    args = ap.parse_args()
    if not args.check_only and not args.out:
        ap.error("--out is required unless --check-only")
    ops = args.ops.split(",")
    if any(op not in OPS for op in ops):
        ap.error(f"ops are {OPS}")
    bits_list = [int(b) for b in args.bits.split(",")]
    if any(b not in (1, 2, 4, 8) for b in bits_list):
        ap.error("bits: 1, 2, 4, 8")
    modes = args.modes.split(",")
    if args.shapes == "seed":
        shapes = PACK_SEED + DW_SEED
    else:
        shapes = [tb.parse_shape(s) for s in args.shapes.split(",")]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    all_ok = True
    # correctness first, on small shapes, every bits
    for op in ops:
        for bits in (1, 2, 4, 8):
            shape = (300, 513, 136) if op == "dw_from_packed" else (300, 1000)
            inputs = inputs_of(op, shape, bits, "cuda", gen)
            fn = function_of(op, shape, bits)
            for mode, f in (("eager", fn), ("compile", torch.compile(fn, dynamic=False))):
                ok, msg = check(op, f, inputs, shape, bits)
                all_ok &= ok
                print(f"{'PASS' if ok else 'FAIL'}  {op} bits={bits} {mode}: {msg}", flush=True)
            torch._dynamo.reset()
    if args.check_only:
        print("torch_compress: correctness", "OK" if all_ok else "FAILED")
        return 0 if all_ok else 1

    timer = tb.Timer(args.warmup_ms, args.rep_ms, 5, 10000, 0)
    copy_gbps = tb.measure_copy_gbps(timer)
    props = torch.cuda.get_device_properties(0)
    doc = {"meta": {
        "device": props.name, "driver": torch.version.cuda, "backend": "torch",
        "platform": f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}",
        "fuseport_version": "bench/torch_compress.py", "git_commit": os.environ.get("FUSEPORT_GIT_COMMIT", "unknown"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "options": vars(args), "copy_gbps": copy_gbps,
    }, "cells": []}
    for op in ops:
        rank = 3 if op == "dw_from_packed" else 2
        for shape in [s for s in shapes if len(s) == rank]:
            for bits in (bits_list if op not in ("relu_pack", "relu_unpack_backward") else [1]):
                torch._dynamo.reset()
                try:
                    inputs = inputs_of(op, shape, bits, "cuda", gen)
                except torch.cuda.OutOfMemoryError:
                    continue
                fn = function_of(op, shape, bits)
                flops = 2.0 * math.prod(shape) if op == "dw_from_packed" else None
                for mode in modes:
                    if mode == "gemm" and op != "dw_from_packed":
                        continue
                    if mode == "gemm":
                        x = dequant(*inputs[1:], bits, shape[1])
                        f = lambda dy=inputs[0], x=x: torch.mm(dy.t(), x)  # noqa: E731
                        args_ = ()
                    else:
                        f = fn if mode == "eager" else torch.compile(fn, dynamic=False)
                        args_ = inputs
                    try:
                        out = f(*args_)
                        outs = out if isinstance(out, tuple) else (out,)
                        nbytes = io_bytes(op, inputs, outs)
                        del out, outs
                        med, lo, hi, reps = timer.run(lambda: f(*args_))
                        gbps = nbytes / (med * 1e-6) / 1e9
                        doc["cells"].append(tb.cell(
                            op, mode, shape, params_of(op, bits, "bf16"), median_us=med, min_us=lo, max_us=hi,
                            reps=reps, bytes=nbytes, gbps=gbps, bw_frac=gbps / copy_gbps, flops=flops,
                            gflops=flops / (med * 1e-6) / 1e9 if flops else None))
                    except torch.cuda.OutOfMemoryError as e:
                        doc["cells"].append(tb.cell(op, mode, shape, params_of(op, bits, "bf16"), status="oom",
                                                    ok=False, message=str(e).splitlines()[0]))
                    torch.cuda.empty_cache()
                del inputs
                tb.write_atomic(args.out, doc)
                print(f"torch_compress: {op} bits={bits} {'x'.join(map(str, shape))} done", flush=True)
    tb.write_atomic(args.out, doc)
    print("torch_compress: correctness", "OK" if all_ok else "FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
