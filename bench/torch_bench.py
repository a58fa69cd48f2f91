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

The matmul family (SPEC.md "Matmul family": matmul_add, matmul_relu,
matmul_add_relu, matmul_matmul, matmul_split_act, linear_geglu; --ops matmul)
has shapes [M, N, K] ([M, N, K, P] for matmul_matmul), params
"dtype=.. trans_b=.. [add=..]" swept with --param, and a third variant,
"autotune": torch.compile(mode="max-autotune"), the peer a user picks for
GEMMs. Both compiled variants use static shapes (one compile, and for
autotune one max-autotune search, per shape). float32 is true float32 (TF32
off); PyTorch's other defaults stay and are recorded in meta.torch_settings.
Each params combination is checked against float64 with ops/matmul_reference.c's
tolerance; a cell of a failed combination is timed and recorded as "fail".

    python3 bench/torch_bench.py --ops matmul --check-only
    python3 bench/torch_bench.py --ops matmul --param dtype=f16,bf16 --out mm.json

The matmul family's ops, inputs and check are in torch_matmul.py; the Philox inputs
and the comparison gate that every script here shares, in torch_fill.py.
"""
import argparse
import datetime
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

# torch_fill.py: fuseport's inputs and gate; torch_matmul.py: the matmul family. The
# family scripts beside this one reach some of these as tb.*.
from torch_fill import (
    ceil_log2,
    check_philox_known_answers,
    compare,
    uniform_like_fuseport,
)
from torch_matmul import (
    MM_DTYPES,
    MM_PARAMS,
    MM_OPS,
    mm_rank,
    MM_SEED_SHAPES,
    MM_CHECK_SHAPES,
    mm_function,
    mm_scale,  # for torch_conv.py, as tb.mm_scale
    mm_make_inputs,
    mm_flops,
    mm_variant,
    mm_combos,
    mm_params_str,
    shape_str,
    check_mm,
    mm_mark_static,
)

SEED_GRID = [128 << k for k in range(10)]  # 128 .. 65536


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


# ---- timing ------------------------------------------------------------------------------
def find_fuseport(given):
    """The fuseport binary whose `list` names an op's params: `given` ('none':
    none), else the first of build/, build-gpu/, .gpu/bin/, /tmp/fp-build/ and
    PATH that has one."""
    if given:
        return given if given != "none" else None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cands = [os.path.join(root, d, "fuseport") for d in ("build", "build-gpu", os.path.join(".gpu", "bin"))]
    for cand in cands + ["/tmp/fp-build/fuseport"]:  # bench/gpu_session.sh's binary or its own build
        if os.access(cand, os.X_OK):
            return cand
    return shutil.which("fuseport")


class WallTimer:
    """--device cpu with --out: the host's clock around each call (a debug
    aid for the JSON path; not fuseport's method)."""

    def __init__(self, reps):
        self.reps = reps or 5

    def run(self, fn):
        fn()
        times = []
        for _ in range(self.reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        times.sort()
        return times[len(times) // 2], times[0], times[-1], len(times)


def is_oom(e):
    return isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower()


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
def make_inputs(op, M, N, seed, exact, device="cuda"):
    ts = []
    for k, (name, shape, scale, positive) in enumerate(inputs_of(op, M, N)):
        numel = math.prod(shape)
        if exact:
            t = uniform_like_fuseport(seed, k, numel, scale, positive, device).view(shape)
        else:  # timing only: any random data of the same range
            t = torch.rand(shape, device=device, dtype=torch.float32)
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


def cell(op, variant, shape, params, **fields):
    base = {
        "op": op, "variant": variant, "backend": "torch", "params": params,
        "shape": list(shape), "status": "ok",
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


def load_dump(dump_dir, op, M, N, device="cuda"):
    """Outputs `fuseport check --dump` wrote for the fused variant, or None."""
    path = os.path.join(dump_dir, f"{op}_fused_{M}x{N}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        manifest = json.load(f)
    outs = []
    for spec in manifest["outputs"]:
        raw = open(os.path.join(dump_dir, spec["file"]), "rb").read()
        outs.append(torch.frombuffer(bytearray(raw), dtype=torch.float32).to(device))
    return manifest["seed"], outs


def check_op(op, M, N, seed, variants, dump_dir, device="cuda"):
    """The modes ({mode: fn}) on fuseport-identical inputs against float64; with a dump,
    fuseport's fused outputs against eager's on the inputs of the dump's seed."""
    fn, tol = OPS[op]
    lines, ok = [], True
    inputs = make_inputs(op, M, N, seed, exact=True, device=device)
    refs = reference_f64(op, inputs)
    for mode, f in variants.items():
        outs = as_tuple(f(*inputs))
        for k, (o, r) in enumerate(zip(outs, refs)):
            bad, ma, mr, l2 = compare(o, r, tol)
            ok &= bad == 0
            lines.append(f"  {op:18s} {mode:7s} {M}x{N} out{k}: bad={bad} max_abs={ma:.2e} max_rel={mr:.2e} rel_l2={l2:.2e}")
    dumped = load_dump(dump_dir, op, M, N, device) if dump_dir else None
    if dumped is not None:
        dump_seed, fp_outs = dumped
        outs = as_tuple(fn(*make_inputs(op, M, N, dump_seed, exact=True, device=device)))
        for k, (o, fo) in enumerate(zip(outs, fp_outs)):
            bad, ma, mr, l2 = compare(fo, o.flatten(), tol)
            ok &= bad == 0
            lines.append(f"  {op:18s} fuseport-vs-eager {M}x{N} out{k}: bad={bad} max_abs={ma:.2e} rel_l2={l2:.2e}")
    elif dump_dir:
        lines.append(f"  {op:18s} no fuseport dump for {M}x{N} in {dump_dir}")
        ok = False
    return ok, lines


def sweep_elementwise(op, shapes, modes, args, timer, copy_gbps, doc):
    """The elementwise ops' grid: one compiled graph per dim1 (--dynamic)."""
    fn, _ = OPS[op]
    torch._dynamo.reset()
    # --dynamic none: dynamic=False, or dynamo's automatic dynamic shapes
    # would compile one dynamic graph at the second shape and reuse it
    # for every later one (no recompile: compile_ms under 1 ms)
    compiled = torch.compile(fn, dynamic=False) if args.dynamic == "none" else torch.compile(fn)
    seen_n = set()
    for (M, N) in shapes:
        try:
            inputs = make_inputs(op, M, N, args.seed, exact=False)
        except torch.cuda.OutOfMemoryError:
            for mode in modes:
                doc["cells"].append(cell(op, mode, [M, N], PARAMS.get(op, ""), status="oom", ok=False, message="inputs do not fit"))
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
                    op, mode, [M, N], PARAMS.get(op, ""), median_us=med, min_us=lo, max_us=hi, reps=reps, bytes=nbytes,
                    gbps=nbytes / (med * 1e-6) / 1e9, bw_frac=nbytes / (med * 1e-6) / 1e9 / copy_gbps,
                    peak_bytes=peak + sum(t.numel() * 4 for t in inputs), compile_ms=compile_ms))
            except torch.cuda.OutOfMemoryError as e:
                doc["cells"].append(cell(op, mode, [M, N], PARAMS.get(op, ""), status="oom", ok=False, message=str(e).splitlines()[0]))
            except Exception as e:  # recorded, the sweep goes on
                doc["cells"].append(cell(op, mode, [M, N], PARAMS.get(op, ""), status="error", ok=False, message=f"{type(e).__name__}: {e}"[:400]))
            torch.cuda.empty_cache()
        seen_n.add(N)
        del inputs
        write_atomic(args.out, doc)


def sweep_mm(op, combos, shapes, modes, checked, args, timer, copy_gbps, doc):
    """A matmul-family op on every combination of the swept params x every
    shape of its rank, each compiled mode statically (one compile, and for
    autotune one max-autotune search, per shape). A cell's ok is its params'
    and mode's float64 check (check_mm); a failed one is timed all the same
    and recorded as status "fail", as fuseport bench does."""
    shapes = [s for s in shapes if len(s) == mm_rank(op)]
    for p in combos:
        ps = mm_params_str(op, p)
        fn = mm_function(op, p)
        esize = MM_DTYPES[p["dtype"]].itemsize
        torch._dynamo.reset()
        variants = {mode: mm_variant(fn, mode, op, p) for mode in modes}
        for shape in shapes:
            flops = mm_flops(op, shape)
            try:
                inputs = mm_make_inputs(op, shape, p, args.seed, "cuda", exact=False)
            except torch.cuda.OutOfMemoryError:
                for mode in modes:
                    doc["cells"].append(cell(op, mode, shape, ps, status="oom", ok=False, message="inputs do not fit", flops=flops))
                torch.cuda.empty_cache()
                write_atomic(args.out, doc)
                continue
            mm_mark_static(inputs)
            in_bytes = sum(t.numel() for t in inputs) * esize
            for mode in modes:
                f = variants[mode]
                ok = checked.get((ps, mode), False)
                try:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    t0 = time.perf_counter()
                    out = f(*inputs)  # compiles (and autotunes) this shape
                    torch.cuda.synchronize()
                    first_ms = (time.perf_counter() - t0) * 1e3
                    nbytes = in_bytes + out.numel() * esize
                    del out
                    med, lo, hi, reps = timer.run(lambda: f(*inputs))
                    peak = torch.cuda.max_memory_allocated() - base
                    gbps = nbytes / (med * 1e-6) / 1e9
                    doc["cells"].append(cell(
                        op, mode, shape, ps, status="ok" if ok else "fail", median_us=med, min_us=lo, max_us=hi,
                        reps=reps, bytes=nbytes, gbps=gbps, bw_frac=gbps / copy_gbps,
                        flops=flops, gflops=flops / (med * 1e-6) / 1e9, peak_bytes=peak + in_bytes,
                        compile_ms=0.0 if mode == "eager" else first_ms,
                        ok=ok, message="" if ok else "failed the float64 check"))
                except torch.cuda.OutOfMemoryError as e:
                    doc["cells"].append(cell(op, mode, shape, ps, status="oom", ok=False, message=str(e).splitlines()[0], flops=flops))
                except Exception as e:  # recorded, the sweep goes on
                    doc["cells"].append(cell(op, mode, shape, ps, status="error", ok=False, message=f"{type(e).__name__}: {e}"[:400], flops=flops))
                torch.cuda.empty_cache()
            del inputs
            write_atomic(args.out, doc)
            print(f"torch_bench: {op} {ps} {shape_str(shape)} done", flush=True)


def torch_settings():
    """PyTorch's numerics and compile settings in force (meta.torch_settings)."""
    mm = torch.backends.cuda.matmul
    out = {}
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction", "fp32_precision"):
        try:
            out[f"backends.cuda.matmul.{name}"] = getattr(mm, name)
        except (AttributeError, RuntimeError):  # absent in this version
            pass
    out["backends.cudnn.allow_tf32"] = torch.backends.cudnn.allow_tf32
    out["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    try:
        import torch._inductor.config as inductor_config
        for name in ("max_autotune_gemm_backends", "max_autotune_gemm_search_space"):
            if hasattr(inductor_config, name):
                out[f"inductor.{name}"] = getattr(inductor_config, name)
    except ImportError:
        pass
    out["compile"] = ("torch.compile default mode; elementwise ops per --dynamic (none: dynamic=False, "
                      "one static graph per shape), the matmul family dynamic=False")
    out["autotune"] = "torch.compile mode=max-autotune, dynamic=False; inputs marked static (no CUDA-graph input copies)"
    return out


def parse_shape(s):
    return tuple(int(v) for v in s.lower().split("x"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="result JSON (fuseport's schema); not needed with --check-only or --device cpu")
    ap.add_argument("--ops", default="all",
                    help="comma list of ops, 'elementwise' (the grid ops), 'matmul' (the matmul family) or 'all' (both)")
    ap.add_argument("--shapes", default="seed",
                    help="'seed' (the 10x10 grid 128..65536; the matmul family's seed list) or a comma list of "
                    "MxN (grid ops), MxNxK (matmul family), MxNxKxP (matmul_matmul); an op skips shapes of another rank")
    ap.add_argument("--modes", default=None,
                    help="comma list of eager, compile, autotune (torch.compile mode=max-autotune; matmul family only), "
                    "gemm (matmul family: the op's GEMMs alone in eager, cuBLAS without the epilogue; both products "
                    "for matmul_matmul). "
                    "Default: eager,compile for the grid ops, eager,compile,autotune for the family (eager on --device cpu)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                    help="matmul family: sweep these values of dtype (f32,f16,bf16), trans_b (false,true), add (bias,full); "
                    "repeatable; unswept params keep their defaults (dtype=f16)")
    ap.add_argument("--warmup-ms", type=float, default=10.0)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--reps", type=int, default=0, help="fixed repetitions (0: --rep-ms decides)")
    ap.add_argument("--seed", type=int, default=20230814)
    ap.add_argument("--check-shapes", default="3x1000,128x4096,7x65537", help="shapes of the grid ops' correctness check")
    ap.add_argument("--mm-check-shapes", default=MM_CHECK_SHAPES,
                    help="shapes of the matmul family's check (MxNxK; MxNxKxP for matmul_matmul)")
    ap.add_argument("--mm-check", choices=["rotate", "all", "swept"], default="rotate",
                    help="matmul family's check: every params combination (all dtypes, trans_b, add), eager on every "
                    "check shape and the compiled modes on one each, in turn (rotate); every mode on every shape (all: "
                    "a static compile, and a max-autotune search, each); or only the combinations --param sweeps, "
                    "every mode on every shape (swept: for timing runs after a full check)")
    ap.add_argument("--check-only", action="store_true", help="run the correctness check, time nothing")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: debug only; runs the correctness check on CPU PyTorch and times nothing")
    ap.add_argument("--fuseport-dump", default=None, help="directory written by `fuseport check --dump` (grid ops)")
    ap.add_argument("--dynamic", choices=["dim0", "none"], default="dim0", help="grid ops' torch.compile shapes")
    ap.add_argument("--flush", choices=["write", "read"], default="write",
                    help="L2 flush before each repetition: write 2x L2 (default, as Triton's do_bench) "
                    "or read it (leaves the L2 clean; fuseport bench --flush read)")
    args = ap.parse_args()
    device = args.device
    timing = device == "cuda" and not args.check_only
    if timing and not args.out:
        ap.error("--out is required unless --check-only or --device cpu")

    if args.ops == "all":
        ops = list(OPS) + MM_OPS
    else:
        ops = []
        for name in args.ops.split(","):
            ops += {"elementwise": list(OPS), "matmul": MM_OPS}.get(name, [name])
    unknown = [op for op in ops if op not in OPS and op not in MM_PARAMS]
    if unknown:
        ap.error(f"unknown ops {unknown}")
    if args.shapes == "seed":
        grid_shapes = [(m, n) for m in SEED_GRID for n in SEED_GRID]
        mm_shapes = list(MM_SEED_SHAPES)
    else:
        given = [parse_shape(s) for s in args.shapes.split(",")]
        grid_shapes = [s for s in given if len(s) == 2]
        mm_shapes = [s for s in given if len(s) in (3, 4)]
    mm_check_shapes = [parse_shape(s) for s in args.mm_check_shapes.split(",")]
    allowed = {name: choices for spec in MM_PARAMS.values() for name, choices, _ in spec}
    sweep_choices = {}
    for item in args.param:
        name, _, values = item.partition("=")
        values = values.split(",")
        if name not in allowed or any(v not in allowed[name] for v in values):
            ap.error(f"--param {item}: expected one of " + "; ".join(f"{n}={','.join(c)}" for n, c in allowed.items()))
        sweep_choices[name] = values
    bad = [m for m in (args.modes or "eager").split(",") if m not in ("eager", "compile", "autotune", "gemm")]
    if bad:
        ap.error(f"unknown modes {bad} (eager, compile, autotune, gemm)")

    # float32 is true float32 (no TF32) for the matmul family as for the rest;
    # PyTorch's other defaults (reduced-precision f16/bf16 reductions) stay and
    # are recorded in meta.torch_settings
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch._dynamo.config.cache_size_limit = 256
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = 4096
    check_philox_known_answers(device)

    def modes_for(op):
        if args.modes:
            modes = args.modes.split(",")
        elif device == "cpu":
            modes = ["eager"]
        else:
            modes = ["eager", "compile", "autotune"] if op in MM_PARAMS else ["eager", "compile"]
        # max-autotune is the GEMM user's peer; the grid ops keep eager and compile
        return modes if op in MM_PARAMS else [m for m in modes if m not in ("autotune", "gemm")]

    doc = timer = copy_gbps = None
    if timing:
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
                "torch_settings": torch_settings(),
            },
            "cells": [],
        }
        print(f"torch_bench: {props.name}, copy {copy_gbps:.0f} GB/s, {len(ops)} ops x "
              f"({len(grid_shapes)} grid + {len(mm_shapes)} matmul) shapes", flush=True)
    else:
        print(f"torch_bench: correctness check only, on {device}, {len(ops)} ops", flush=True)
    all_ok = True
    for op in ops:
        modes = modes_for(op)
        if op in OPS:
            fn, _ = OPS[op]
            torch._dynamo.reset()
            # correctness first, on fuseport's inputs: eager and compile (on
            # CPU, the modes asked for)
            check_modes = ["eager", "compile"] if device == "cuda" else modes
            variants = {m: (fn if m == "eager" else torch.compile(fn)) for m in check_modes}
            for cs in args.check_shapes.split(","):
                m, n = parse_shape(cs)
                ok, lines = check_op(op, m, n, args.seed, variants, args.fuseport_dump, device)
                all_ok &= ok
                print("\n".join(lines), flush=True)
            if timing:
                sweep_elementwise(op, grid_shapes, modes, args, timer, copy_gbps, doc)
        else:
            checked, lines = check_mm(op, mm_check_shapes, modes, args.seed, device, args.mm_check, sweep_choices)
            all_ok &= all(checked.values())
            print("\n".join(lines), flush=True)
            if timing:
                sweep_mm(op, list(mm_combos(op, sweep_choices)), mm_shapes, modes, checked, args, timer, copy_gbps, doc)
        if timing:
            done = [c for c in doc["cells"] if c["op"] == op and c["status"] == "ok"]
            print(f"torch_bench: {op}: {len(done)} cells", flush=True)
    if timing:
        write_atomic(args.out, doc)
    print("torch_bench: correctness", "OK" if all_ok else "FAILED", flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
