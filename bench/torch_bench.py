#!/usr/bin/env python3
"""PyTorch eager and torch.compile on fuseport's ops and shapes, timed as
`fuseport bench` times (device events around each repetition, the L2 flushed
by a write of at least twice its size before each one, warm-up excluded,
median/min/max; a GPU sleep ahead of each flush keeps the host's issue time
out of the events), written in fuseport's JSON schema so that

    fuseport compare cuda.json torch.json --variants fused:compile

sets fuseport beside PyTorch cell by cell. Cells carry variant "eager" or
"compile" and backend "torch".

The op definitions follow ../SPEC.md exactly (see OPS below). Before timing,
each op is checked on Philox4x32-10 inputs bit-identical to fuseport's (the
generator of kernels/common/fp_device_common.h, reimplemented on the GPU with
int64 arithmetic) against a float64 evaluation of the same definition, with
fuseport's tolerances; with --fuseport-dump DIR the outputs are also compared
element by element with those `fuseport check --dump DIR` wrote.

torch.compile runs in its default mode. A sweep of 100 shapes would compile
100 graphs per op; instead dim0 (rows) is marked dynamic, so one compiled
graph per dim1 serves a whole column of the grid -- what the default's
automatic dynamic shapes does after the first recompile -- while dim1, the
reduced and vectorised dimension, stays static. --dynamic none compiles every
shape statically (slow: one compile per cell).
"""
import argparse
import datetime
import json
import math
import os
import platform
import socket
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

SEED_GRID = [128 << k for k in range(10)]  # 128 .. 65536

# ---- Philox4x32-10, as kernels/common/fp_device_common.h -----------------------------
MASK = 0xFFFFFFFF
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
DOMAIN_FILL = 0x46494C4C


def philox_word0(seed, index, stream, domain):
    """First output word for counter (index lo, index hi, stream, domain) and
    key (seed lo, seed hi); index is an int64 tensor. 32-bit products are
    taken in int64: the wrapped bit pattern equals the unsigned product."""
    c0 = index & MASK
    c1 = (index >> 32) & MASK
    c2 = torch.full_like(index, stream)
    c3 = torch.full_like(index, domain)
    k0, k1 = seed & MASK, (seed >> 32) & MASK
    for _ in range(10):
        p0 = c0 * PHILOX_M0
        p1 = c2 * PHILOX_M1
        hi0, lo0 = (p0 >> 32) & MASK, p0 & MASK
        hi1, lo1 = (p1 >> 32) & MASK, p1 & MASK
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + PHILOX_W0) & MASK, (k1 + PHILOX_W1) & MASK
    return c0


def uniform_like_fuseport(seed, stream, n, scale, positive, device):
    """fp_uniform_f32 for storage indices 0..n-1 (chunked to bound memory)."""
    out = torch.empty(n, dtype=torch.float32, device=device)
    chunk = 1 << 24
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(n, start + chunk), dtype=torch.int64, device=device)
        bits = philox_word0(seed, idx, stream, DOMAIN_FILL) >> 8
        if positive:
            unit = bits.to(torch.float32) * (1.0 / 16777216.0)
        else:
            unit = (bits - 8388608).to(torch.float32) * (1.0 / 8388608.0)
        out[start : start + idx.numel()] = unit * scale
    return out


def check_philox_known_answers():
    """Random123's known answers, through the int64 formulation above."""
    dev = "cuda"
    idx = torch.zeros(1, dtype=torch.int64, device=dev)
    assert int(philox_word0(0, idx, 0, 0)[0]) == 0x6627E8D5
    counter = 0x85A308D3_243F6A88 - (1 << 64)  # the same 64 bits as a signed int64
    idx = torch.tensor([counter], dtype=torch.int64, device=dev)
    assert int(philox_word0(0x299F31D0_A4093822, idx, 0x13198A2E, 0x03707344)[0]) == 0xD16CFE09


# ---- the ops (SPEC.md) ------------------------------------------------------------------
def pointwise_chain(x):
    y = torch.cos(x)
    x = x * y
    y = torch.maximum(x, y)
    return x + y


def bias_gelu(inp, bias):
    x = inp + bias
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def bias_dropout_add(inp, bias, residual):
    # training=False as in the seed: dropout is the identity
    return residual + F.dropout(inp + bias, p=0.5, training=False)


def softmax(x):
    return torch.softmax(x, 1)


def double_softmax(x):
    return torch.softmax(torch.softmax(x, 1), 1)


def softmax_backward(grad_out, y):
    # PyTorch's own softmax backward: y * (grad_out - sum(grad_out * y, 1))
    return torch.ops.aten._softmax_backward_data(grad_out, y, 1, torch.float32)


def layernorm(x, w, b):
    out, mean, rstd = torch.native_layer_norm(x, [x.shape[1]], w, b, 1e-5)
    return out, mean.view(-1), rstd.view(-1)


def norm_chain(x):
    for _ in range(3):
        x = x * torch.sum(x, 1, keepdim=True)
    return x


def hreduce_pointwise(a):
    return torch.sum(a, 1), torch.cos(a)


def hreduce_reduce(a):
    return torch.sum(a, 1), torch.amax(a, 1)


def ceil_log2(n):
    return max(0, (n - 1).bit_length())


# Per op: the function, its inputs as (name, shape(M, N), fill scale, positive),
# the float64 reference, the tolerance (rtol, atol*max|ref|, abs floor) -- all
# as fuseport's ops/*.c describe them.
def inputs_of(op, M, N):
    if op == "pointwise_chain":
        return [("x", (M, N), 4.0, False)]
    if op == "bias_gelu":
        return [("inp", (M, N), 4.0, False), ("bias", (N,), 1.0, False)]
    if op == "bias_dropout_add":
        return [("inp", (M, N), 4.0, False), ("bias", (N,), 1.0, False), ("residual", (M, N), 1.0, False)]
    if op in ("softmax", "double_softmax"):
        return [("x", (M, N), 4.0, False)]
    if op == "softmax_backward":
        return [("grad_out", (M, N), 1.0, False), ("y", (M, N), 1.0, True)]
    if op == "layernorm":
        return [("x", (M, N), 8.0, True), ("weight", (N,), 1.0, False), ("bias", (N,), 1.0, False)]
    if op == "norm_chain":
        return [("x", (M, N), 2.0 ** -ceil_log2(N), True)]
    if op == "hreduce_pointwise":
        return [("a", (M, N), 4.0, False)]
    if op == "hreduce_reduce":
        return [("a", (M, N), 1.0, False)]
    raise KeyError(op)


OPS = {
    "pointwise_chain": (pointwise_chain, (1e-5, 1e-6, 1e-6)),
    "bias_gelu": (bias_gelu, (1e-5, 1e-6, 1e-6)),
    "bias_dropout_add": (bias_dropout_add, (1e-5, 1e-6, 1e-6)),
    "softmax": (softmax, (1e-4, 1e-5, 0.0)),
    "double_softmax": (double_softmax, (1e-4, 1e-5, 0.0)),
    "softmax_backward": (softmax_backward, (1e-4, 1e-5, 1e-6)),
    "layernorm": (layernorm, (1e-4, 1e-5, 1e-6)),
    "norm_chain": (norm_chain, (1e-4, 1e-5, 0.0)),
    "hreduce_pointwise": (hreduce_pointwise, (1e-4, 1e-5, 1e-6)),
    "hreduce_reduce": (hreduce_reduce, (1e-4, 1e-5, 1e-6)),
}


def reference_f64(op, inputs):
    """The SPEC definition evaluated in float64 (independent of the torch
    kernels under test: no native softmax backward, layer norm spelled out)."""
    d = [t.double() for t in inputs]
    if op == "softmax_backward":
        g, y = d
        return (y * (g - (g * y).sum(1, keepdim=True)),)
    if op == "layernorm":
        x, w, b = d
        mean = x.mean(1, keepdim=True)
        var = ((x - mean) ** 2).mean(1, keepdim=True)
        rstd = 1.0 / torch.sqrt(var + float(torch.tensor(1e-5, dtype=torch.float32)))
        return ((x - mean) * rstd * w + b, mean.view(-1), rstd.view(-1))
    out = OPS[op][0](*d)
    return out if isinstance(out, tuple) else (out,)


def compare(got, ref, tol):
    """fuseport's gate (ops/check.c): |g-r| <= max(abs, atol*max|r|) + rtol*|r|."""
    rtol, atol, absf = tol
    g, r = got.double().flatten(), ref.double().flatten()
    finite = torch.isfinite(r)
    maxref = r[finite].abs().max().item() if finite.any() else 0.0
    bound = max(absf, atol * maxref) + rtol * r.abs()
    err = (g - r).abs()
    nan_ok = torch.isnan(r) == torch.isnan(g)
    bad = (~nan_ok) | (finite & ~(err <= bound))
    max_abs = err[finite].max().item() if finite.any() else 0.0
    sig = finite & (r.abs() >= 1e-6 * maxref) & (r != 0)
    max_rel = (err[sig] / r[sig].abs()).max().item() if sig.any() else 0.0
    den = (r[finite] ** 2).sum().item()
    l2 = math.sqrt((err[finite] ** 2).sum().item() / den) if den > 0 else 0.0
    return int(bad.sum().item()), max_abs, max_rel, l2


# ---- timing ------------------------------------------------------------------------------
class Timer:
    def __init__(self, warmup_ms, rep_ms, min_reps, max_reps, fixed_reps, flush_read=False):
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 50 << 20)
        self.flush = torch.ones(max(2 * l2, 8 << 20) // 4, dtype=torch.int32, device="cuda")
        self.flush_read = flush_read
        self.warmup_ms, self.rep_ms = warmup_ms, rep_ms
        self.min_reps, self.max_reps, self.fixed_reps = min_reps, max_reps, fixed_reps
        self.cycles_per_us = self._sleep_rate()

    @staticmethod
    def _sleep_rate():
        """Clock cycles of torch.cuda._sleep per microsecond, measured."""
        torch.cuda._sleep(1000)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(2_000_000)
        b.record()
        torch.cuda.synchronize()
        return 2_000_000 / max(a.elapsed_time(b) * 1e3, 1.0)

    def _flush(self, k):
        # a device write of 2x L2 evicts the inputs and leaves the L2 dirty;
        # --flush read (a sum over the buffer) evicts them and leaves it clean,
        # as fuseport bench --flush read does
        if self.flush_read:
            self.flush.sum()
        else:
            self.flush.fill_(k)

    def run(self, fn):
        fn()
        torch.cuda.synchronize()
        # warm-up for warmup_ms, which also estimates one call
        t0 = time.perf_counter()
        calls = 0
        while (time.perf_counter() - t0) * 1e3 < self.warmup_ms or calls < 1:
            fn()
            torch.cuda.synchronize()
            calls += 1
        est_ms = (time.perf_counter() - t0) * 1e3 / calls
        reps = self.fixed_reps or int(min(self.max_reps, max(self.min_reps, self.rep_ms / max(est_ms, 1e-3))))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        # The events must time the GPU's work only. When the host takes longer
        # to issue a repetition (flush, events, fn: tens of microseconds for a
        # compiled graph's guards and wrapper) than the GPU takes to flush, the
        # GPU reaches the start event before fn's kernels are queued and the
        # wait is timed (before this, compile's 128 x 128 cells measured
        # 30-90 us for kernels of 5). So each repetition first queues a GPU
        # sleep longer than the host's issue time, measured here, untimed.
        t0 = time.perf_counter()
        for k in range(3):
            self._flush(k)
            starts[0].record()
            fn()
            ends[0].record()
        issue_us = (time.perf_counter() - t0) * 1e6 / 3
        torch.cuda.synchronize()
        sleep_cycles = int(1.5 * issue_us * self.cycles_per_us)
        for k in range(reps):
            torch.cuda._sleep(sleep_cycles)
            self._flush(k)
            starts[k].record()
            fn()
            ends[k].record()
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
        mid = len(times) // 2
        median = times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])
        return median, times[0], times[-1], reps


def measure_copy_gbps(timer):
    n = 1 << 28  # 1 GiB of float32
    a = torch.empty(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    med, _, _, _ = timer.run(lambda: b.copy_(a))
    del a, b
    return 2.0 * n * 4 / (med * 1e-6) / 1e9


# ---- the sweep -----------------------------------------------------------------------------
def make_inputs(op, M, N, seed, exact):
    ts = []
    for k, (name, shape, scale, positive) in enumerate(inputs_of(op, M, N)):
        numel = math.prod(shape)
        if exact:
            t = uniform_like_fuseport(seed, k, numel, scale, positive, "cuda").view(shape)
        else:  # timing only: any random data of the same range
            t = torch.rand(shape, device="cuda", dtype=torch.float32)
            t = t * scale if positive else (t * 2 - 1) * scale
        ts.append(t)
    return ts


def io_bytes(op, inputs, outputs):
    return sum(t.numel() * 4 for t in inputs) + sum(t.numel() * 4 for t in outputs)


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


# fuseport's cell "params": the op's non-shape parameters as `fuseport list`
# prints them (cells are matched on it by `fuseport compare`).
PARAMS = {
    "bias_dropout_add": "p=0.5 training=false seed=20230814 layout=contiguous",
    "layernorm": "eps=1e-05",
}


def cell(op, variant, M, N, **fields):
    base = {
        "op": op, "variant": variant, "backend": "torch", "params": PARAMS.get(op, ""),
        "shape": [M, N], "status": "ok",
        "median_us": None, "min_us": None, "max_us": None, "reps": 0, "kernels": None,
        "bytes": None, "gbps": None, "bw_frac": None, "flops": None, "gflops": None,
        "footprint_bytes": None, "peak_bytes": None, "compile_ms": None,
        "max_abs_err": None, "max_rel_err": None, "rel_l2_err": None, "ok": True, "message": "",
    }
    base.update(fields)
    return base


def write_atomic(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_dump(dump_dir, op, M, N):
    """Outputs `fuseport check --dump` wrote for the fused variant, or None."""
    path = os.path.join(dump_dir, f"{op}_fused_{M}x{N}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        manifest = json.load(f)
    outs = []
    for spec in manifest["outputs"]:
        raw = open(os.path.join(dump_dir, spec["file"]), "rb").read()
        outs.append(torch.frombuffer(bytearray(raw), dtype=torch.float32).cuda())
    return manifest["seed"], outs


def check_op(op, M, N, seed, compiled, dump_dir):
    """Both modes on fuseport-identical inputs against float64; with a dump,
    fuseport's fused outputs against eager's on the inputs of the dump's seed."""
    fn, tol = OPS[op]
    lines, ok = [], True
    inputs = make_inputs(op, M, N, seed, exact=True)
    refs = reference_f64(op, inputs)
    for mode, f in (("eager", fn), ("compile", compiled)):
        outs = as_tuple(f(*inputs))
        for k, (o, r) in enumerate(zip(outs, refs)):
            bad, ma, mr, l2 = compare(o, r, tol)
            ok &= bad == 0
            lines.append(f"  {op:18s} {mode:7s} {M}x{N} out{k}: bad={bad} max_abs={ma:.2e} max_rel={mr:.2e} rel_l2={l2:.2e}")
    dumped = load_dump(dump_dir, op, M, N) if dump_dir else None
    if dumped is not None:
        dump_seed, fp_outs = dumped
        outs = as_tuple(fn(*make_inputs(op, M, N, dump_seed, exact=True)))
        for k, (o, fo) in enumerate(zip(outs, fp_outs)):
            bad, ma, mr, l2 = compare(fo, o.flatten(), tol)
            ok &= bad == 0
            lines.append(f"  {op:18s} fuseport-vs-eager {M}x{N} out{k}: bad={bad} max_abs={ma:.2e} rel_l2={l2:.2e}")
    elif dump_dir:
        lines.append(f"  {op:18s} no fuseport dump for {M}x{N} in {dump_dir}")
        ok = False
    return ok, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="result JSON (fuseport's schema)")
    ap.add_argument("--ops", default="all", help="comma list of ops or 'all'")
    ap.add_argument("--shapes", default="seed", help="'seed' (10x10 grid 128..65536) or MxN,MxN,...")
    ap.add_argument("--modes", default="eager,compile", help="eager, compile")
    ap.add_argument("--warmup-ms", type=float, default=10.0)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--reps", type=int, default=0, help="fixed repetitions (0: --rep-ms decides)")
    ap.add_argument("--seed", type=int, default=20230814)
    ap.add_argument("--check-shapes", default="3x1000,128x4096,7x65537", help="shapes of the correctness check")
    ap.add_argument("--fuseport-dump", default=None, help="directory written by `fuseport check --dump`")
    ap.add_argument("--dynamic", choices=["dim0", "none"], default="dim0")
    ap.add_argument("--flush", choices=["write", "read"], default="write",
                    help="L2 flush before each repetition: write 2x L2 (default, as Triton's do_bench) "
                    "or read it (leaves the L2 clean; fuseport bench --flush read)")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.config.cache_size_limit = 256
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = 4096
    check_philox_known_answers()
    ops = list(OPS) if args.ops == "all" else args.ops.split(",")
    if args.shapes == "seed":
        shapes = [(m, n) for m in SEED_GRID for n in SEED_GRID]
    else:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",")]
    modes = args.modes.split(",")
    timer = Timer(args.warmup_ms, args.rep_ms, 5, 10000, args.reps, args.flush == "read")
    props = torch.cuda.get_device_properties(0)
    copy_gbps = measure_copy_gbps(timer)
    # FUSEPORT_GIT_COMMIT (gpu_session.sh passes the fuseport binary's) wins
    # over git: a tree copied to another machine may carry a stale .git
    commit = os.environ.get("FUSEPORT_GIT_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
        except OSError:
            commit = "unknown"
    import triton

    doc = {
        "meta": {
            "device": props.name, "driver": torch.version.cuda, "backend": "torch",
            "platform": f"PyTorch {torch.__version__}, Triton {triton.__version__}, CUDA {torch.version.cuda}",
            "fuseport_version": "bench/torch_bench.py", "git_commit": commit or "unknown",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "options": vars(args), "copy_gbps": copy_gbps,
        },
        "cells": [],
    }
    print(f"torch_bench: {props.name}, copy {copy_gbps:.0f} GB/s, {len(ops)} ops x {len(shapes)} shapes", flush=True)
    all_ok = True
    for op in ops:
        fn, _ = OPS[op]
        torch._dynamo.reset()
        compiled = torch.compile(fn)
        # correctness first, on fuseport's inputs
        for cs in args.check_shapes.split(","):
            m, n = (int(v) for v in cs.lower().split("x"))
            ok, lines = check_op(op, m, n, args.seed, compiled, args.fuseport_dump)
            all_ok &= ok
            print("\n".join(lines), flush=True)
        torch._dynamo.reset()
        compiled = torch.compile(fn)
        seen_n = set()
        for (M, N) in shapes:
            try:
                inputs = make_inputs(op, M, N, args.seed, exact=False)
            except torch.cuda.OutOfMemoryError:
                for mode in modes:
                    doc["cells"].append(cell(op, mode, M, N, status="oom", ok=False, message="inputs do not fit"))
                torch.cuda.empty_cache()
                continue
            if args.dynamic == "dim0":
                for t in inputs:
                    if t.dim() == 2:
                        torch._dynamo.mark_dynamic(t, 0)
            for mode in modes:
                f = fn if mode == "eager" else compiled
                try:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    t0 = time.perf_counter()
                    outs = as_tuple(f(*inputs))
                    torch.cuda.synchronize()
                    first_ms = (time.perf_counter() - t0) * 1e3
                    nbytes = io_bytes(op, inputs, outs)
                    del outs
                    med, lo, hi, reps = timer.run(lambda: f(*inputs))
                    peak = torch.cuda.max_memory_allocated() - base
                    compile_ms = first_ms if (mode == "compile" and (N not in seen_n or args.dynamic == "none")) else 0.0
                    doc["cells"].append(cell(
                        op, mode, M, N, median_us=med, min_us=lo, max_us=hi, reps=reps, bytes=nbytes,
                        gbps=nbytes / (med * 1e-6) / 1e9, bw_frac=nbytes / (med * 1e-6) / 1e9 / copy_gbps,
                        peak_bytes=peak + sum(t.numel() * 4 for t in inputs), compile_ms=compile_ms))
                except torch.cuda.OutOfMemoryError as e:
                    doc["cells"].append(cell(op, mode, M, N, status="oom", ok=False, message=str(e).splitlines()[0]))
                except Exception as e:  # recorded, the sweep goes on
                    doc["cells"].append(cell(op, mode, M, N, status="error", ok=False, message=f"{type(e).__name__}: {e}"[:400]))
                torch.cuda.empty_cache()
            seen_n.add(N)
            del inputs
            write_atomic(args.out, doc)
        done = [c for c in doc["cells"] if c["op"] == op and c["status"] == "ok"]
        print(f"torch_bench: {op}: {len(done)} cells", flush=True)
    write_atomic(args.out, doc)
    print("torch_bench: correctness", "OK" if all_ok else "FAILED", flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
