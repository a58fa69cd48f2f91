#!/usr/bin/env python3
"""PyTorch beside fuseport's convolution family (conv_add, conv_relu, conv_bn;
issue 24), timed as torch_bench.py times (its Timer: device events, the L2
flushed before each repetition, a GPU sleep ahead of each) and written in
fuseport's JSON schema, so that

    fuseport compare conv-cuda.json conv-torch.json --variants fused:eager

sets them side by side. Modes (a cell's variant):
  eager        what PyTorch eager runs: F.conv2d(x, w, bias) [+ residual] [relu],
               or F.conv2d then F.batch_norm(training=False)
  compile      the same function under torch.compile (default mode, dynamic=False)
  compile-max  the same under torch.compile(mode="max-autotune", dynamic=False)
               (not in the default --modes: a search per shape takes long)
  conv         F.conv2d(x, w) alone, no bias: cuDNN's convolution, the baseline
               the issue's goals are stated against (timed once per shape,
               dtype, layout, S, padding, dilation; the cell is written under
               each op's params, so that every op finds its baseline)

Shapes are fuseport's conv grid, N x C x H x W x K x R x stride (R the filter
height); a 5-dim N x C x H x W x K takes R and stride from --param. As
`fuseport bench` writes them, a cell's shape is the shape as given and its
params are the op's other params in ops/conv.c's order, R and stride among
them for a 5-dim shape: "S=0 padding=-1 dilation=1 layout=nhwc dtype=f16
add=bias" for a 7-dim one (`fuseport list` is read for the order where a fuseport binary
knows the ops; see --fuseport). padding=-1 is (R-1)*dilation/2 on both axes.
layout=nhwc is channels_last memory format for x, w, the output (and the
residual), nchw contiguous. float32 is true float32: TF32 off for cuDNN and
cuBLAS; cudnn.benchmark stays off (PyTorch's default). f16/bf16 BN statistics and affine parameters are in the
activations' dtype (a model after .half()).

Before timing, every cell's outputs (each mode's first call: for the compiled
modes the compiling call) are checked against a float64 evaluation of the op
on the same inputs (the epilogue spelled out, not F.batch_norm), with the
gate of ops/conv.c (the GEMM family's for K = C*R*S): with a = 4 eps + 16
2^-24 sqrt(CRS), |got-ref| <= max(a max|ref|, a + 4 eps) + 4 eps |ref|. A
mismatch prints FAIL on stderr, the cell is timed all the same and recorded
with status "fail" (its errors in max_abs_err etc.), and the script exits 1.
A cell that does not fit is recorded as "oom"; any other exception as "error".
--out is rewritten after every shape; --resume continues a partial one.

    python3 bench/torch_conv.py --out conv-torch.json                 # seed, f16+f32 nhwc
    python3 bench/torch_conv.py --out conv-torch.json --batches 8,32 --resume
    python3 bench/torch_conv.py --out t.json --ops conv_relu --param bias=true \\
        --shapes 32x64x56x56x64 --param R=3,1 --param stride=1,2 --modes eager,compile,compile-max,conv
    python3 bench/torch_conv.py --check-only --shapes 3x17x7x7x5x3x1 --dtype f32,f16,bf16 --layout nchw,nhwc
    python3 bench/torch_conv.py --device cpu --shapes 3x17x7x7x5x3x1     # the check on CPU PyTorch
"""
import argparse
import datetime
import itertools
import json
import math
import os
import socket
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench as tb  # noqa: E402  (Timer, cell, write_atomic, compare, copy bandwidth)

OPS = ["conv_add", "conv_relu", "conv_bn"]
MODES = ["eager", "compile", "compile-max", "conv"]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
EPS = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
GRID = ["N", "C", "H", "W", "K", "R", "stride"]
# ResNet-50's distinct convolutions: (C, H=W, K, R, stride), padding R//2
RESNET50 = [(3, 224, 64, 7, 2), (64, 56, 64, 1, 1), (64, 56, 64, 3, 1), (64, 56, 256, 1, 1), (256, 56, 64, 1, 1),
            (256, 56, 128, 1, 1), (128, 56, 128, 3, 2), (128, 28, 512, 1, 1), (256, 56, 512, 1, 2),
            (512, 28, 128, 1, 1), (128, 28, 128, 3, 1), (512, 28, 256, 1, 1), (256, 28, 256, 3, 2),
            (256, 14, 1024, 1, 1), (512, 28, 1024, 1, 2), (1024, 14, 256, 1, 1), (256, 14, 256, 3, 1),
            (1024, 14, 512, 1, 1), (512, 14, 512, 3, 2), (512, 7, 2048, 1, 1), (1024, 14, 2048, 1, 2),
            (2048, 7, 512, 1, 1), (512, 7, 512, 3, 1)]
SEED_BATCHES = [1, 8, 32, 128]
SEED_ODD = [(8, 3, 33, 33, 17, 3, 2), (3, 17, 7, 7, 5, 3, 1)]

# Non-grid params: (name, choices or None (an int/float), default as fuseport prints it)
COMMON = [("S", None, "0"), ("padding", None, "-1"), ("dilation", None, "1"),
          ("layout", ("nchw", "nhwc"), "nchw"), ("dtype", ("f32", "f16", "bf16"), "f32")]
SPECIFIC = {"conv_add": [("add", ("bias", "full"), "bias")],
            "conv_relu": [("bias", ("false", "true"), "false")],
            "conv_bn": [("eps", None, "1e-05")]}
SWEEPABLE = ["R", "stride", "S", "padding", "dilation", "add", "bias", "eps"]


def seed_shapes():
    return [(n, c, h, h, k, r, s) for n in SEED_BATCHES for (c, h, k, r, s) in RESNET50] + SEED_ODD


def param_order(binary):
    """{op: [param names after N C H W K, in fuseport's order]}, from
    `fuseport list` where it knows the op; else ops/conv.c's order (R, stride,
    then COMMON, then the op's own)."""
    order = {op: ["R", "stride"] + [n for n, _, _ in COMMON + SPECIFIC[op]] for op in OPS}
    source = "built-in"
    if binary:
        try:
            text = subprocess.run([binary, "list"], capture_output=True, text=True, timeout=120).stdout
        except (OSError, subprocess.SubprocessError) as e:
            text = ""
            print(f"torch_conv: {binary} list failed ({e}); using the built-in param order", file=sys.stderr)
        for line in text.splitlines():
            words = line.split()
            if words and words[0] in OPS:
                names = [w.split("=")[0] for w in words if "=" in w]
                order[words[0]] = [n for n in names if n not in GRID[:5]]
                source = f"{binary} list"
    return order, source


class Problem:
    """One cell's problem: the 7 grid dims and the op's params (strings as
    fuseport prints them), resolved (S=0 -> R, padding=-1 -> (R-1)*dilation/2)."""

    def __init__(self, op, shape, p):
        self.op, self.p = op, p
        self.N, self.C, self.H, self.W, self.K, self.R, self.stride = shape
        self.shape = self.given = tuple(shape)
        self.S = int(p["S"]) or self.R
        self.dil = int(p["dilation"])
        pad = int(p["padding"])
        self.ph = (self.R - 1) * self.dil // 2 if pad == -1 else pad
        self.pw = self.ph  # one padding for both axes, from R (ops/conv.c)
        self.P = (self.H + 2 * self.ph - self.dil * (self.R - 1) - 1) // self.stride + 1 if self.stride > 0 else 0
        self.Q = (self.W + 2 * self.pw - self.dil * (self.S - 1) - 1) // self.stride + 1 if self.stride > 0 else 0
        self.dtype = DTYPES[p["dtype"]]
        self.nhwc = p["layout"] == "nhwc"

    def invalid(self):
        if min(self.shape) < 1 or self.S < 1 or self.dil < 1 or min(self.ph, self.pw) < 0:
            return "dims, stride, S and dilation must be >= 1, padding >= -1"
        if self.P < 1 or self.Q < 1:
            return f"the filter ({self.R}x{self.S}, dilation {self.dil}) is larger than the padded input"
        return None

    def flops(self):
        return 2 * self.N * self.K * self.P * self.Q * self.C * self.R * self.S

    def crs(self):
        return self.C * self.R * self.S


def params_str(op, p, order, given, full):
    """fuseport's cell params: the op's params but the shape's own dims (a
    5-dim shape leaves R and stride in the params, as `fuseport bench` does)."""
    p = dict(p, R=str(full[5]), stride=str(full[6]))
    return " ".join(f"{n}={p[n]}" for n in order[op] if n not in GRID[:len(given)])


def conv_of(pb):
    stride, pad, dil = pb.stride, (pb.ph, pb.pw), pb.dil

    def conv(x, w, b=None):
        return F.conv2d(x, w, b, stride, pad, dil)
    return conv


def function_of(pb):
    """The PyTorch a user writes for the op (eager and the compiled modes)."""
    conv, op, p = conv_of(pb), pb.op, pb.p
    if op == "conv_add" and p["add"] == "bias":
        def conv_add_bias(x, w, b):
            return conv(x, w, b)
        return conv_add_bias
    if op == "conv_add":
        def conv_add_full(x, w, r):
            return conv(x, w) + r
        return conv_add_full
    if op == "conv_relu" and p["bias"] == "true":
        def conv_bias_relu(x, w, b):
            return torch.relu(conv(x, w, b))
        return conv_bias_relu
    if op == "conv_relu":
        def conv_relu(x, w):
            return torch.relu(conv(x, w))
        return conv_relu
    eps = float(p["eps"])

    def conv_bn(x, w, mean, var, gamma, beta):
        return F.batch_norm(conv(x, w), mean, var, gamma, beta, False, 0.0, eps)
    return conv_bn


def conv_only(pb):
    conv = conv_of(pb)

    def conv_alone(x, w, *_):
        return conv(x, w)
    return conv_alone


def reference_f64(pb, inputs, c64):
    """The op in float64 from the float64 convolution c64 of the same inputs,
    the epilogue spelled out (eps rounded to float32, as fuseport's param)."""
    ch = lambda t: t.double().view(1, -1, 1, 1)  # noqa: E731
    op, p = pb.op, pb.p
    if op == "conv_add":
        return c64 + (ch(inputs[2]) if p["add"] == "bias" else inputs[2].double())
    if op == "conv_relu":
        return torch.relu(c64 + ch(inputs[2]) if p["bias"] == "true" else c64)
    mean, var, gamma, beta = inputs[2:]
    eps = float(torch.tensor(float(p["eps"]), dtype=torch.float32))
    return (c64 - ch(mean)) / torch.sqrt(ch(var) + eps) * ch(gamma) + ch(beta)


def tolerance(pb):
    """(rtol, atol * max|ref|, abs): fuseport's gate (ops/conv.c), the GEMM
    family's for K = C*R*S, with room for the epilogue's own roundings (eager
    rounds the convolution to the dtype before the bias, residual or BN step)."""
    eps = EPS[pb.p["dtype"]]
    acc = 16 * 2.0 ** -24 * math.sqrt(pb.crs())
    return 4 * eps, 4 * eps + acc, 8 * eps + acc


def make_inputs(pb, gen, device):
    """x [N,C,H,W] in [-1,1), w [K,C,R,S] scaled ~1/sqrt(CRS), then the op's
    extras: bias [K], residual [N,K,P,Q], or BN mean, var (in [0.5,1.5)),
    gamma, beta [K]; made in float32, rounded to the dtype; channels_last
    for nhwc."""
    def rnd(shape, lo=-1.0, hi=1.0):
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
        t = (t * (hi - lo) + lo).to(pb.dtype)
        return t.contiguous(memory_format=torch.channels_last) if (pb.nhwc and t.dim() == 4) else t
    K = pb.K
    ts = [rnd((pb.N, pb.C, pb.H, pb.W))]
    s = tb.mm_scale(pb.crs())
    ts.append(rnd((K, pb.C, pb.R, pb.S), -s, s))
    op, p = pb.op, pb.p
    if (op == "conv_add" and p["add"] == "bias") or (op == "conv_relu" and p["bias"] == "true"):
        ts.append(rnd((K,)))
    elif op == "conv_add":
        ts.append(rnd((pb.N, K, pb.P, pb.Q)))
    elif op == "conv_bn":
        ts += [rnd((K,)), rnd((K,), 0.5, 1.5), rnd((K,)), rnd((K,))]
    return ts


def variant_of(fn, pb, mode):
    """Each compiled mode wraps fn in a lambda of its own (dynamo's caches are
    per code object)."""
    if mode == "eager":
        return fn
    if mode == "conv":
        return conv_only(pb)
    if mode == "compile":
        return torch.compile(lambda *t: fn(*t), dynamic=False)
    if mode == "compile-max":
        return torch.compile(lambda *t: fn(*t), mode="max-autotune", dynamic=False)
    raise ValueError(mode)


def combos(op, sweep):
    names = [n for n, _, _ in COMMON + SPECIFIC[op]]
    defaults = {n: d for n, _, d in COMMON + SPECIFIC[op]}
    lists = [sweep.get(n, [defaults[n]]) for n in names]
    for values in itertools.product(*lists):
        yield dict(zip(names, values))


def run_cell(pb, modes, fns, conv_cache, args, timer, copy_gbps, gen, device, ps, log):
    """Every mode of one problem: inputs, the float64 reference, then per mode
    the check (first call) and the timing. Returns [(mode, cell fields)]."""
    flops = pb.flops()
    esize = pb.dtype.itemsize
    out = []
    try:
        inputs = make_inputs(pb, gen, device)
        if device == "cuda":
            tb.mm_mark_static(inputs)  # max-autotune's CUDA graphs copy no input
        with torch.no_grad():
            c64 = F.conv2d(inputs[0].double(), inputs[1].double(), None, pb.stride, (pb.ph, pb.pw), pb.dil)
            ref_op = reference_f64(pb, inputs, c64)
    except Exception as e:  # noqa: BLE001
        if not tb.is_oom(e):
            raise
        return [(m, dict(status="oom", ok=False, message="inputs or the float64 reference do not fit: "
                         + str(e).splitlines()[0][:200], flops=flops)) for m in modes]
    in_bytes = sum(t.numel() for t in inputs) * esize
    out_bytes = pb.N * pb.K * pb.P * pb.Q * esize
    tol = tolerance(pb)
    for mode in modes:
        ckey = (pb.shape, pb.p["S"], pb.p["padding"], pb.p["dilation"], pb.p["dtype"], pb.p["layout"])
        if mode == "conv" and ckey in conv_cache:
            out.append((mode, dict(conv_cache[ckey])))
            continue
        f = fns[mode]
        ref = c64 if mode == "conv" else ref_op
        try:
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            t0 = time.perf_counter()
            with torch.no_grad():
                got = f(*inputs).clone()  # clone: a CUDA-graphed output is overwritten by the next replay
            if device == "cuda":
                torch.cuda.synchronize()
            first_ms = (time.perf_counter() - t0) * 1e3
            bad, ma, mr, l2 = tb.compare(got, ref, tol)
            layout_ok = got.is_contiguous(memory_format=torch.channels_last) if pb.nhwc else got.is_contiguous()
            if got.dtype != pb.dtype or tuple(got.shape) != tuple(ref.shape):
                bad = max(bad, 1)
            ok = bad == 0
            msg = "" if ok else f"failed the float64 check: {bad} elements, max_abs {ma:.2e}, rel_l2 {l2:.2e}"
            if not layout_ok:
                msg = (msg + "; " if msg else "") + "output not in the layout's memory format"
            log(f"  {'PASS' if ok else 'FAIL'}  {pb.op:9s} {mode:11s} {ps} {tb.shape_str(pb.given)}: bad={bad} "
                f"max_abs={ma:.2e} max_rel={mr:.2e} rel_l2={l2:.2e}{'' if layout_ok else ' (layout differs)'}",
                not ok)
            del got
            fields = dict(status="ok" if ok else "fail", ok=ok, message=msg, flops=flops, max_abs_err=ma,
                          max_rel_err=mr, rel_l2_err=l2, compile_ms=first_ms if mode.startswith("compile") else 0.0)
            if timer is not None:
                with torch.no_grad():
                    med, lo, hi, reps = timer.run(lambda: f(*inputs))
                peak = torch.cuda.max_memory_allocated() - base if device == "cuda" else 0
                nbytes = (inputs[0].numel() + inputs[1].numel()) * esize + out_bytes if mode == "conv" \
                    else in_bytes + out_bytes
                gbps = nbytes / (med * 1e-6) / 1e9
                fields.update(median_us=med, min_us=lo, max_us=hi, reps=reps, bytes=nbytes, gbps=gbps,
                              bw_frac=gbps / copy_gbps, gflops=flops / (med * 1e-6) / 1e9,
                              peak_bytes=peak + in_bytes)
            if mode == "conv":
                conv_cache[ckey] = fields
            out.append((mode, fields))
        except Exception as e:  # noqa: BLE001  recorded, the sweep goes on
            if tb.is_oom(e):
                out.append((mode, dict(status="oom", ok=False, message=str(e).splitlines()[0][:300], flops=flops)))
            else:
                first = str(e).splitlines()[0][:300] if str(e) else ""
                log(f"  ERROR {pb.op} {mode} {ps} {tb.shape_str(pb.given)}: {type(e).__name__}: {first}", True)
                out.append((mode, dict(status="error", ok=False, message=f"{type(e).__name__}: {first}",
                                       flops=flops)))
        if device == "cuda":
            torch.cuda.empty_cache()
    return out


def parse_shapes(text, rs, strides):
    """[(the shape as given, its 7 dims)]: a 5-dim shape once per R x stride
    of the sweep (written 5-dim, R and stride in the params); no repeats."""
    given = seed_shapes() if text == "seed" else [tb.parse_shape(s) for s in text.split(",")]
    out = []
    for s in given:
        if len(s) not in (5, 7):
            raise ValueError(f"shape {'x'.join(map(str, s))}: NxCxHxWxK or NxCxHxWxKxRxstride")
        for full in ([tuple(s)] if len(s) == 7 else [tuple(s) + (r, st) for r in rs for st in strides]):
            if (tuple(s), full) not in out:
                out.append((tuple(s), full))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="result JSON (fuseport's schema); needed unless --check-only; with --device cpu: "
                    "times on the host's clock (a debug aid)")
    ap.add_argument("--ops", default=",".join(OPS), help="comma list of " + ", ".join(OPS))
    ap.add_argument("--shapes", default="seed",
                    help="'seed' (ResNet-50's distinct convolutions at batch 1, 8, 32, 128 and two odd shapes) "
                    "or a comma list of NxCxHxWxKxRxstride or NxCxHxWxK (R, stride from --param)")
    ap.add_argument("--dtype", default="f16,f32", help="comma list of f32, f16, bf16")
    ap.add_argument("--layout", default="nhwc", help="comma list of nchw, nhwc")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                    help="sweep " + ", ".join(SWEEPABLE) + " (R, stride: for 5-dim shapes); repeatable; "
                    "unswept params keep fuseport's defaults (S=0 padding=-1 dilation=1 add=bias bias=false eps=1e-05)")
    ap.add_argument("--modes", default="eager,compile,conv", help="comma list of " + ", ".join(MODES))
    ap.add_argument("--check-only", action="store_true", help="check every cell against float64, time nothing")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: debug only, the check on CPU PyTorch (timed on the host's clock only with --out)")
    ap.add_argument("--fuseport", default=None,
                    help="fuseport binary whose `list` gives the params' order ('none': the built-in order; "
                    "default: the first of build/, build-gpu/, .gpu/bin/, /tmp/fp-build/ and PATH that has one)")
    ap.add_argument("--batches", default=None, help="comma list: only the shapes of these batch sizes N")
    ap.add_argument("--resume", action="store_true",
                    help="keep the cells already in --out and run only the (op, params, shape) groups it lacks")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark = True (PyTorch's default is False: heuristics)")
    ap.add_argument("--warmup-ms", type=float, default=10.0)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--reps", type=int, default=0, help="fixed repetitions (0: --rep-ms decides)")
    ap.add_argument("--seed", type=int, default=20230814)
    args = ap.parse_args()
    device = args.device
    timing = not args.check_only and (device == "cuda" or args.out is not None)
    if timing and not args.out:
        ap.error("--out is required unless --check-only")
    ops = args.ops.split(",")
    modes = args.modes.split(",")
    if any(op not in OPS for op in ops):
        ap.error(f"ops are {OPS}")
    if any(m not in MODES for m in modes):
        ap.error(f"modes are {MODES}")
    sweep = {"dtype": args.dtype.split(","), "layout": args.layout.split(",")}
    if any(d not in DTYPES for d in sweep["dtype"]) or any(x not in ("nchw", "nhwc") for x in sweep["layout"]):
        ap.error("--dtype: f32, f16, bf16; --layout: nchw, nhwc")
    for item in args.param:
        name, _, values = item.partition("=")
        name = {"r": "R", "s": "S"}.get(name, name)
        if name not in SWEEPABLE or not values:
            ap.error(f"--param {item}: one of {', '.join(SWEEPABLE)}")
        vals = values.split(",")
        try:
            if name == "eps":
                vals = ["%g" % float(v) for v in vals]
            elif name == "add" or name == "bias":
                if any(v not in (("bias", "full") if name == "add" else ("false", "true")) for v in vals):
                    raise ValueError(name)
            else:
                vals = [str(int(v)) for v in vals]
        except ValueError:
            ap.error(f"--param {item}: bad value")
        sweep[name] = vals
    try:
        shapes = parse_shapes(args.shapes, [int(r) for r in sweep.pop("R", ["3"])],
                              [int(st) for st in sweep.pop("stride", ["1"])])
    except ValueError as e:
        ap.error(str(e))
    if args.batches:
        keep = {int(b) for b in args.batches.split(",")}
        shapes = [(g, f) for g, f in shapes if f[0] in keep]

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = 1 << 16
    order, order_source = param_order(tb.find_fuseport(args.fuseport))
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    failures = []
    conv_cache = {}  # the conv mode's cell per (shape, S, padding, dilation, dtype, layout): timed once
    for op in ops:
        unknown = [n for n in order[op] if n not in ["R", "stride"] + [c[0] for c in COMMON + SPECIFIC[op]]]
        if unknown:
            print(f"torch_conv: WARNING: {order_source} gives {op} params {unknown} this script does not "
                  "know: its cells' params will not match fuseport's", file=sys.stderr)

    def log(line, bad=False):
        print(line, file=sys.stderr if bad else sys.stdout, flush=True)
        if bad:
            failures.append(line)

    doc = timer = copy_gbps = None
    if timing:
        if device == "cuda":
            timer = tb.Timer(args.warmup_ms, args.rep_ms, 5, 10000, args.reps)
            copy_gbps = tb.measure_copy_gbps(timer)
            name = torch.cuda.get_device_properties(0).name
        else:
            timer, copy_gbps, name = tb.WallTimer(args.reps), 1.0, "cpu (wall clock, debug)"
        settings = tb.torch_settings()
        settings.update({"backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
                         "compile": "torch.compile default mode, dynamic=False (one compile per shape)",
                         "compile-max": "torch.compile mode=max-autotune, dynamic=False; inputs marked static",
                         "params_order": order_source})
        doc = {"meta": {
            "device": name, "driver": torch.version.cuda, "backend": "torch",
            "platform": f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
                        f"CUDA {torch.version.cuda}",
            "fuseport_version": "bench/torch_conv.py", "git_commit": os.environ.get("FUSEPORT_GIT_COMMIT", "unknown"),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "options": vars(args), "copy_gbps": copy_gbps,
            "torch_settings": settings}, "cells": []}
        if args.resume and os.path.exists(args.out):
            with open(args.out) as fh:
                doc["cells"] = [c for c in json.load(fh)["cells"] if c["status"] != "error"]
            print(f"torch_conv: resuming {args.out}: {len(doc['cells'])} cells kept", flush=True)
        done = {}
        for c in doc["cells"]:
            done.setdefault((c["op"], c["params"], tuple(c["shape"])), set()).add(c["variant"])
        print(f"torch_conv: {name}, copy {copy_gbps:.0f} GB/s; params order from {order_source}", flush=True)
    else:
        print(f"torch_conv: correctness check only, on {device}; params order from {order_source}", flush=True)

    for op in ops:
        for p in combos(op, sweep):
            torch._dynamo.reset()
            for given, full in shapes:
                pb = Problem(op, full, p)
                pb.given = given
                ps = params_str(op, p, order, given, full)
                if doc is not None and set(modes) <= done.get((op, ps, tuple(given)), set()):
                    continue  # --resume: this group is in --out already
                why = pb.invalid()
                if why:
                    log(f"  SKIP  {op} {ps} {tb.shape_str(given)}: {why}", False)
                    continue
                fn = function_of(pb)
                fns = {m: variant_of(fn, pb, m) for m in modes}
                cells = run_cell(pb, modes, fns, conv_cache, args, timer, copy_gbps, gen, device, ps, log)
                if doc is not None:
                    for mode, fields in cells:
                        doc["cells"].append(tb.cell(op, mode, given, ps, **fields))
                    tb.write_atomic(args.out, doc)
                    print(f"torch_conv: {op} {ps} {tb.shape_str(given)} done", flush=True)
    if doc is not None:
        tb.write_atomic(args.out, doc)
    if failures:
        print(f"torch_conv: correctness FAILED ({len(failures)}):\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print("torch_conv: correctness OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
