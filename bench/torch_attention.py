#!/usr/bin/env python3
"""PyTorch beside fuseport's attention family (ops/attention.c): out =
softmax(q k^T * scale + mask) v, q [B,H,S,D], k and v [B,H,SK,D], scale
1/sqrt(D), the causal mask aligned to the bottom right (query i sees the keys
j <= i + SK - S; the lower triangle when S == SK). Timed as torch_bench.py
times (its Timer: device events, the L2 flushed before each repetition, a GPU
sleep ahead of each, warm-up excluded, the median) and written in fuseport's
JSON schema (op "attention", the mode as the variant), so that

    fuseport compare attention-cuda.json attention-torch.json --variant fused:sdpa

sets them side by side; bench/perf_attention.py prints the tables.

Modes (a cell's variant; its field "impl" says what actually ran):
  eager           FlashAttention's benchmark baseline (attention_pytorch):
                  torch.baddbmm(beta=0, alpha=scale) into a preallocated
                  [B*H, S, SK] scores tensor, + a causal mask of -10000.0 made
                  with torch.triu (in float32, cast to the dtype; bottom-right
                  aligned), torch.softmax, torch.bmm with v; all in the dtype
  compile         torch.compile of that function (default mode, dynamic=False)
  compile-max     the same, mode="max-autotune" (inputs marked static)
  sdpa-flash, sdpa-efficient, sdpa-cudnn, sdpa-math
                  F.scaled_dot_product_attention under
                  torch.nn.attention.sdpa_kernel(that one SDPBackend); a
                  backend that refuses the shape or dtype gives the cell
                  status "unsupported" (PyTorch's reasons in its message)
  sdpa            F.scaled_dot_product_attention with PyTorch's own choice;
                  "impl" names the backend it picks (torch._fused_sdp_choice,
                  and for an S != SK causal mask CausalBias's own order:
                  flash, efficient, then a materialised mask), "default" when
                  that cannot be found out
Causal with S == SK passes is_causal=True; with S != SK an explicit
torch.nn.attention.bias.causal_lower_right(S, SK) (PyTorch's is_causal is
top-left aligned).

Shapes: BxHxSxD (SK = S) or BxHxSxSKxD; 'seed' is ops/attention.c's seed
sweep (SEED_SHAPES: S = 128 .. 16384, B = 16384 / S, D=64 H=32 and D=128
H=16, written BxHxSxSxD as fuseport writes them), 'default' its default list,
'decode' a few S=1 shapes of this script's (DECODE_SHAPES). A cell's params are the
op's other params in fuseport's order (read from `fuseport list` where the
binary knows the op; else BUILTIN_PARAMS, "SK=0 causal=.. dtype=.. scale=0
splits=0 chunk=2048", SK only for a 4-dim shape). FLOPs are fuseport's:
4 * D * the (query, key) pairs the mask leaves, summed over B*H (causal about
halves them); "bytes" is q + k + v + out.

Before timing, each mode's first call (for the compiled modes the compiling
call) is checked on a sample of query rows (--check-rows, from up to 8
heads) against a float64 evaluation: |got-ref| <= max(4 eps + acc,
4 eps max|ref|) + 4 eps |ref| with acc = 16 2^-24 (sqrt(D) + sqrt(SK)), and
the rows' relative L2 error <= 4 eps + acc. Rows that see no key
(causal, S > SK) are left out (fuseport writes 0 there, eager a uniform
average). A mismatch prints FAIL, the cell is timed all the same and
recorded with status "fail", and the script exits 1. A cell that does not fit
is "oom" (torch.cuda.empty_cache() after), any other exception "error".
--out is rewritten after every shape; --resume keeps its cells (but errors)
and runs only the modes a shape lacks; --time-limit stops cleanly between
shapes (exit 3: incomplete, rerun with --resume).

    python3 bench/torch_attention.py --out attention-torch.json               # seed, f16+bf16, both masks
    python3 bench/torch_attention.py --out a.json --shapes seed --dtypes f16 --causal false,true \\
        --modes eager,sdpa,sdpa-flash,sdpa-efficient,sdpa-cudnn,sdpa-math --time-limit 230
    python3 bench/torch_attention.py --out d.json --shapes decode,8x32x1x4096x128 --causal true --dtypes f16
    python3 bench/torch_attention.py --device cpu --check-only --shapes 2x3x17x5x16,1x2x9x9x8 --dtypes f32,bf16
Exit status: 0 ok, 1 a check failed or a cell raised an error, 2 bad arguments,
3 stopped by --time-limit, 130 interrupted (SIGINT, e.g. timeout -s INT).
"""
import argparse
import contextlib
import datetime
import json
import math
import os
import socket
import subprocess
import sys
import time
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench as tb  # noqa: E402  (Timer, cell, write_atomic, compare, copy bandwidth)

OP = "attention"
SDPA_MODES = {"sdpa-flash": "FLASH_ATTENTION", "sdpa-efficient": "EFFICIENT_ATTENTION",
              "sdpa-cudnn": "CUDNN_ATTENTION", "sdpa-math": "MATH"}
MODES = ["eager", "compile", "compile-max", "sdpa", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math"]
DEFAULT_MODES = "eager,compile,sdpa,sdpa-flash,sdpa-efficient,sdpa-cudnn,sdpa-math"
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
EPS = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
BACKEND_NAMES = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable", -1: "none"}

# `--shapes seed`: ops/attention.c's seed sweep (at_seed; keep the two equal). FlashAttention's
# benchmark: 16k tokens per batch (B = 16384 / S), S = 128 .. 16384, D=64 with H=32 and D=128
# with H=16; written as fuseport writes them, (B, H, S, SK, D) with SK = S.
SEED_TOKENS = 16384
SEED_SEQLENS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
SEED_HEADS = [(64, 32), (128, 16)]  # (D, H)
SEED_SHAPES = [(SEED_TOKENS // s, h, s, s, d) for d, h in SEED_HEADS for s in SEED_SEQLENS]
# `--shapes default`: ops/attention.c's quick default list (at_default)
DEFAULT_SHAPES = [(4, 16, 4096, 4096, 128), (4, 32, 4096, 4096, 64), (1, 16, 8192, 8192, 128),
                  (8, 32, 1, 8192, 128), (1, 32, 1, 32768, 128)]
# `--shapes decode`: this script's own S=1 list, one query per head against a KV cache
DECODE_SHAPES = [(1, 32, 1, 4096, 128), (8, 32, 1, 4096, 128), (32, 32, 1, 4096, 128),
                 (8, 32, 1, 16384, 128), (1, 32, 1, 131072, 128), (8, 32, 1, 4096, 64)]

GRID_NAMES = {"b": "B", "h": "H", "s": "S", "sq": "S", "sk": "SK", "d": "D"}
# ops/attention.c's params after the grid, as `fuseport list` prints them (used where no
# fuseport binary that knows the op is found; keep equal to the op's table)
BUILTIN_PARAMS = [("SK", "0"), ("causal", "false"), ("dtype", "f16"), ("scale", "0"), ("splits", "0"),
                  ("chunk", "2048")]
KNOWN_PARAMS = {"sk", "causal", "dtype", "scale", "splits", "chunk"}  # scale: 0 (1/sqrt(D)) only


def param_order(binary):
    """([(name, fuseport's default)] of the op's non-grid params in
    fuseport's order, where from). The grid names (B H S SK D, any case) are
    left out, except SK when `fuseport list` shows it but a 4-dim shape is
    given (see params_str)."""
    if binary:
        try:
            text = subprocess.run([binary, "list"], capture_output=True, text=True, timeout=120).stdout
        except (OSError, subprocess.SubprocessError) as e:
            text = ""
            print(f"torch_attention: {binary} list failed ({e}); using the built-in param order", file=sys.stderr)
        for line in text.splitlines():
            words = line.split()
            if words and words[0] == OP:
                pairs = [tuple(w.split("=", 1)) for w in words if "=" in w]
                return [(n, v) for n, v in pairs if GRID_NAMES.get(n.lower()) in (None, "SK")], f"{binary} list"
    return list(BUILTIN_PARAMS), "built-in (" + " ".join(n for n, _ in BUILTIN_PARAMS) + ")"


def params_str(order, shape, causal, dtype):
    """fuseport's cell params for this shape: every listed param, SK only for
    a 4-dim shape (a 5-dim one carries it), at its listed default unless it
    is causal or dtype."""
    out = []
    for name, default in order:
        low = name.lower()
        if GRID_NAMES.get(low) == "SK":
            if len(shape) == 5:
                continue
            value = default if default in ("0", "-1") else str(shape[2])
        elif low == "causal":
            value = "true" if causal else "false"
        elif low == "dtype":
            value = dtype
        else:
            value = default
        out.append(f"{name}={value}")
    return " ".join(out)


class Problem:
    def __init__(self, given, causal, dtype):
        self.given = tuple(given)
        if len(given) == 4:
            self.B, self.H, self.S, self.D = given
            self.SK = self.S
        else:
            self.B, self.H, self.S, self.SK, self.D = given
        self.causal, self.dname, self.dtype = causal, dtype, DTYPES[dtype]
        self.scale = 1.0 / math.sqrt(self.D)
        self.esize = self.dtype.itemsize

    def pairs(self):
        """(query, key) pairs one head's mask leaves (bottom-right causal)."""
        S, SK = self.S, self.SK
        if not self.causal:
            return S * SK
        return S * (2 * SK - S + 1) // 2 if S <= SK else SK * (SK + 1) // 2

    def flops(self):
        return 4 * self.B * self.H * self.D * self.pairs()

    def nbytes(self):
        return (2 * self.B * self.H * self.S * self.D + 2 * self.B * self.H * self.SK * self.D) * self.esize

    def sees(self, i):
        """Keys query i sees: j < sees(i)."""
        return max(0, min(self.SK, i + self.SK - self.S + 1)) if self.causal else self.SK


def attention_pytorch(q, k, v, causal, scale):
    """The seed's attention_pytorch (FlashAttention's benchmark baseline) on
    q [B,H,S,D], k, v [B,H,SK,D]: baddbmm into a preallocated scores tensor,
    a -10000.0 triu mask (made in float32: triu lacks bf16 on older
    PyTorch), softmax, bmm. The mask is bottom-right aligned."""
    B, H, S, D = q.shape
    SK = k.shape[2]
    qf = q.reshape(B * H, S, D)
    kt = k.reshape(B * H, SK, D).transpose(1, 2)
    scores = torch.empty(B * H, S, SK, dtype=q.dtype, device=q.device)
    scores = torch.baddbmm(scores, qf, kt, beta=0, alpha=scale).view(B, H, S, SK)
    if causal:
        mask = torch.triu(torch.full((S, SK), -10000.0, device=scores.device), SK - S + 1)
        scores = scores + mask.to(dtype=scores.dtype)
    attention = torch.softmax(scores, dim=-1)
    out = torch.bmm(attention.view(B * H, S, SK), v.reshape(B * H, SK, D))
    return out.view(B, H, S, D)


def sdpa_args(pb):
    """(attn_mask, is_causal) for F.scaled_dot_product_attention."""
    if not pb.causal:
        return None, False
    if pb.S == pb.SK:
        return None, True
    from torch.nn.attention.bias import causal_lower_right
    return causal_lower_right(pb.S, pb.SK), False


def make_mode(pb, mode):
    """(fn(q, k, v), context manager factory) for one mode."""
    causal, scale = pb.causal, pb.scale
    if mode in ("eager", "compile", "compile-max"):
        def eager(q, k, v):
            return attention_pytorch(q, k, v, causal, scale)
        if mode == "eager":
            return eager, contextlib.nullcontext
        if mode == "compile":
            return torch.compile(lambda q, k, v: eager(q, k, v), dynamic=False), contextlib.nullcontext
        return torch.compile(lambda q, k, v: eager(q, k, v), mode="max-autotune", dynamic=False), \
            contextlib.nullcontext
    mask, is_causal = sdpa_args(pb)

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    if mode == "sdpa":
        return sdpa, contextlib.nullcontext
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, SDPA_MODES[mode])
    return sdpa, (lambda: sdpa_kernel(backend))


def default_backend(pb, q, k, v):
    """The backend F.scaled_dot_product_attention picks by default, as
    PyTorch decides it; "default" when that cannot be found out."""
    try:
        mask, is_causal = sdpa_args(pb)
        if mask is None:
            return BACKEND_NAMES.get(int(torch._fused_sdp_choice(q, k, v, None, 0.0, is_causal)), "default")
        # CausalBias(LOWER_RIGHT)._dispatch: flash, efficient, else the math / a fused kernel
        # with the mask materialised
        from torch.backends.cuda import SDPAParams, can_use_efficient_attention, can_use_flash_attention
        try:
            params = SDPAParams(q, k, v, None, 0.0, False, False)
        except TypeError:  # before enable_gqa
            params = SDPAParams(q, k, v, None, 0.0, False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if can_use_flash_attention(params):
                return "flash"
            if can_use_efficient_attention(params):
                return "efficient"
        dense = mask._materialize(q.device)
        return BACKEND_NAMES.get(int(torch._fused_sdp_choice(q, k, v, dense, 0.0, False)), "default")
    except Exception:  # noqa: BLE001  (a private API: absent or changed)
        return "default"


def impl_of(mode, pb, q, k, v):
    if mode == "eager":
        return "eager (baddbmm, softmax, bmm)"
    if mode == "compile":
        return "inductor"
    if mode == "compile-max":
        return "inductor max-autotune"
    if mode == "sdpa":
        return default_backend(pb, q, k, v)
    return mode[len("sdpa-"):]


def kernel_names_from_profile(fn, ctx, device):
    """Names of the device kernels one call launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CUDA] if device == "cuda" else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof, ctx(), torch.no_grad():
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
    names = []
    for e in prof.events():
        dev = getattr(e, "device_type", None)
        if device == "cuda" and str(dev).endswith("CUDA"):
            names.append(e.name)
    return names


def backend_from_kernels(names):
    text = " ".join(names).lower()
    # cuDNN's SDPA kernels are named cudnn_generated_..._sdpa_..._flash_...: cudnn first
    for key, name in (("cudnn", "cudnn"), ("fmha", "efficient"), ("mem_eff", "efficient"),
                      ("efficient", "efficient"), ("flash", "flash")):
        if key in text:
            return name
    return None


def make_inputs(pb, gen, device):
    """q, k, v uniform in [-1, 1), made in the dtype."""
    shapes = [(pb.B, pb.H, pb.S, pb.D), (pb.B, pb.H, pb.SK, pb.D), (pb.B, pb.H, pb.SK, pb.D)]
    return [torch.empty(s, dtype=pb.dtype, device=device).uniform_(-1.0, 1.0, generator=gen) for s in shapes]


def check_rows(pb, rows, seed):
    """{head index bh: [query rows]} to check: up to 8 heads (the first, the
    last, others at random), on each up to rows/heads query rows (the first,
    the last, the first that sees a key, others at random), rows that see no
    key left out."""
    g = torch.Generator()
    g.manual_seed(seed)
    BH = pb.B * pb.H
    heads = sorted({0, BH - 1} | {int(x) for x in torch.randint(BH, (6,), generator=g)}) if BH > 2 else list(range(BH))
    per = max(2, rows // len(heads))
    first_seen = next((i for i in range(max(0, pb.S - pb.SK), pb.S) if pb.sees(i) > 0), None)
    out = {}
    for bh in heads:
        cand = {0, pb.S - 1} | ({first_seen} if first_seen is not None else set())
        if pb.S > per:
            cand |= {int(x) for x in torch.randint(pb.S, (per,), generator=g)}
        else:
            cand |= set(range(pb.S))
        rs = sorted(i for i in cand if pb.sees(i) > 0)[:max(per, 3)]
        if rs:
            out[bh] = rs
    return out


def reference_rows(pb, q, k, v, sample):
    """{bh: float64 [len(rows), D]} on the sampled rows: the definition with
    the mask as -inf (fuseport's)."""
    qf = q.reshape(pb.B * pb.H, pb.S, pb.D)
    kf = k.reshape(pb.B * pb.H, pb.SK, pb.D)
    vf = v.reshape(pb.B * pb.H, pb.SK, pb.D)
    out = {}
    for bh, rows in sample.items():
        idx = torch.tensor(rows, device=q.device)
        qs, kk, vv = qf[bh, idx].double(), kf[bh].double(), vf[bh].double()
        s = (qs @ kk.T) * pb.scale
        if pb.causal:
            seen = torch.tensor([pb.sees(i) for i in rows], device=q.device)
            j = torch.arange(pb.SK, device=q.device)
            s = s.masked_fill(j[None, :] >= seen[:, None], float("-inf"))
        out[bh] = torch.softmax(s, dim=-1) @ vv
    return out


def tolerance(pb):
    """(rtol, atol * max|ref|, abs floor) for tb.compare: outputs are
    averages of v in [-1, 1); room for the probabilities rounded to the dtype
    and float32 sums over D and SK."""
    eps = EPS[pb.dname]
    acc = 16 * 2.0 ** -24 * (math.sqrt(pb.D) + math.sqrt(pb.SK))
    return 4 * eps, 4 * eps, 4 * eps + acc


def l2_bound(pb):
    """The sampled rows' relative L2 error must stay below this too (a
    wrong scale moves bf16 outputs by less than the elementwise bound)."""
    return 4 * EPS[pb.dname] + 16 * 2.0 ** -24 * (math.sqrt(pb.D) + math.sqrt(pb.SK))


def compare_rows(pb, got, refs, sample):
    gf = got.reshape(pb.B * pb.H, pb.S, pb.D)
    g = torch.cat([gf[bh, torch.tensor(rows, device=got.device)] for bh, rows in sample.items()])
    r = torch.cat([refs[bh] for bh in sample])
    bad, ma, mr, l2 = tb.compare(g, r, tolerance(pb))
    return max(bad, int(l2 > l2_bound(pb))), ma, mr, l2


def is_unsupported(e):
    text = str(e)
    return isinstance(e, RuntimeError) and ("No available kernel" in text or "No viable backend" in text)


def first_line(text, n=300):
    return text.strip().splitlines()[0][:n] if text and text.strip() else ""


def run_shape(pb, modes, args, timer, copy_gbps, gen, device, ps, log):
    """Every mode of one problem. Returns [(mode, cell fields)]."""
    flops, nbytes = pb.flops(), pb.nbytes()
    out = []
    try:
        q, k, v = make_inputs(pb, gen, device)
        if device == "cuda":
            tb.mm_mark_static([q, k, v])  # max-autotune's CUDA graphs copy no input
        sample = check_rows(pb, args.check_rows, args.seed)
        refs = reference_rows(pb, q, k, v, sample)
    except Exception as e:  # noqa: BLE001
        if not tb.is_oom(e):
            raise
        if device == "cuda":
            torch.cuda.empty_cache()
        return [(m, dict(status="oom", ok=False, flops=flops, bytes=nbytes,
                         message="inputs do not fit: " + first_line(str(e), 200))) for m in modes]
    in_bytes = (q.numel() + k.numel() + v.numel()) * pb.esize
    nrows = sum(len(r) for r in sample.values())
    for mode in modes:
        impl = impl_of(mode, pb, q, k, v)
        base_fields = dict(flops=flops, bytes=nbytes, impl=impl)
        got = None
        try:
            fn, ctx = make_mode(pb, mode)
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    t0 = time.perf_counter()
                    with ctx(), torch.no_grad():
                        got = fn(q, k, v).clone()  # clone: a CUDA-graphed output is overwritten by the next replay
                    if device == "cuda":
                        torch.cuda.synchronize()
                    first_ms = (time.perf_counter() - t0) * 1e3
                except RuntimeError as e:
                    if not is_unsupported(e):
                        raise
                    why = "; ".join(dict.fromkeys(first_line(str(w.message), 200) for w in caught))
                    msg = f"{impl} refused: " + (why or first_line(str(e), 200))
                    log(f"  n/a   {mode:14s} {ps} {tb.shape_str(pb.given)}: {msg[:160]}", False)
                    out.append((mode, dict(base_fields, status="unsupported", ok=False, message=msg[:500])))
                    continue
            bad, ma, mr, l2 = compare_rows(pb, got, refs, sample)
            if got.dtype != pb.dtype or tuple(got.shape) != (pb.B, pb.H, pb.S, pb.D):
                bad = max(bad, 1)
            ok = bad == 0
            msg = "" if ok else f"failed the float64 check on {nrows} sampled rows: {bad} elements, " \
                f"max_abs {ma:.2e}, rel_l2 {l2:.2e}"
            log(f"  {'PASS' if ok else 'FAIL'}  {mode:14s} {ps} {tb.shape_str(pb.given)} [{impl}]: bad={bad} "
                f"max_abs={ma:.2e} max_rel={mr:.2e} rel_l2={l2:.2e} ({nrows} rows)", not ok)
            got = None
            fields = dict(base_fields, status="ok" if ok else "fail", ok=ok, message=msg, max_abs_err=ma,
                          max_rel_err=mr, rel_l2_err=l2, compile_ms=first_ms if mode.startswith("compile") else 0.0)
            if args.kernels and device == "cuda":
                try:
                    names = kernel_names_from_profile(lambda: fn(q, k, v), ctx, device)
                except Exception as e:  # noqa: BLE001  (the profiler is an extra: never fails the cell)
                    names = None
                    fields["kernel_names"] = [f"profiler failed: {type(e).__name__}: {first_line(str(e), 200)}"]
                if names is not None:
                    launches = [n for n in names if not n.startswith(("Memcpy", "Memset"))]
                    fields.update(kernels=len(launches), kernel_names=sorted(set(names))[:12])
                    seen = backend_from_kernels(names)
                    if seen and mode == "sdpa" and not impl.startswith(seen):
                        fields["impl"] = f"{seen} (its kernels; _fused_sdp_choice said {impl})"
                    elif seen and mode.startswith("compile"):
                        fields["impl"] = f"{impl} (calls {seen} kernels)"
            if timer is not None:
                with ctx(), torch.no_grad():
                    med, lo, hi, reps = timer.run(lambda: fn(q, k, v))
                peak = torch.cuda.max_memory_allocated() - base if device == "cuda" else 0
                gbps = nbytes / (med * 1e-6) / 1e9
                fields.update(median_us=med, min_us=lo, max_us=hi, reps=reps, gbps=gbps,
                              bw_frac=gbps / copy_gbps, gflops=flops / (med * 1e-6) / 1e9,
                              peak_bytes=peak + in_bytes, median_ms=med * 1e-3,
                              tflops=flops / (med * 1e-6) / 1e12)
            out.append((mode, fields))
        except Exception as e:  # noqa: BLE001  recorded, the sweep goes on
            got = None
            if tb.is_oom(e):
                log(f"  OOM   {mode:14s} {ps} {tb.shape_str(pb.given)}", False)
                out.append((mode, dict(base_fields, status="oom", ok=False, message=first_line(str(e)))))
            else:
                log(f"  ERROR {mode:14s} {ps} {tb.shape_str(pb.given)}: {type(e).__name__}: {first_line(str(e))}",
                    True)
                out.append((mode, dict(base_fields, status="error", ok=False,
                                       message=f"{type(e).__name__}: {first_line(str(e))}")))
        if device == "cuda":
            torch.cuda.empty_cache()
    return out


def parse_shapes(text):
    out = []
    for item in text.split(","):
        item = item.strip().lower()
        if item == "seed":
            cand = SEED_SHAPES
        elif item == "default":
            cand = DEFAULT_SHAPES
        elif item == "decode":
            cand = DECODE_SHAPES
        else:
            try:
                s = tuple(int(v) for v in item.split("x"))
            except ValueError:
                raise ValueError(f"shape '{item}': BxHxSxD or BxHxSxSKxD (integers), 'seed', 'default' or "
                                 "'decode'") from None
            if len(s) not in (4, 5) or min(s) < 1:
                raise ValueError(f"shape '{item}': BxHxSxD or BxHxSxSKxD, every dim >= 1")
            cand = [s]
        for s in cand:
            if tuple(s) not in out:
                out.append(tuple(s))
    return out


def parse_list(text, allowed, what):
    vals = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in vals if v not in allowed]
    if bad or not vals:
        raise ValueError(f"{what}: {', '.join(bad) or '(empty)'} not among {', '.join(allowed)}")
    return list(dict.fromkeys(vals))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", "--json", dest="out",
                    help="result JSON (fuseport's schema); needed unless --check-only; with --device cpu: "
                    "times on the host's clock (a debug aid)")
    ap.add_argument("--shapes", default="seed",
                    help="comma list of BxHxSxD, BxHxSxSKxD, 'seed' (ops/attention.c's seed sweep: S = 128 .. "
                    "16384, B = 16384 / S, D=64 H=32 and D=128 H=16), 'default' (ops/attention.c's default list) "
                    "and 'decode' (S=1 shapes of this script)")
    ap.add_argument("--causal", default="false,true", help="comma list of false, true")
    ap.add_argument("--dtypes", "--dtype", dest="dtypes", default="f16,bf16", help="comma list of f16, bf16, f32")
    ap.add_argument("--modes", default=DEFAULT_MODES, help="comma list of " + ", ".join(MODES) + " or 'all'")
    ap.add_argument("--check-only", action="store_true", help="check every cell against float64, time nothing")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: debug only (CPU PyTorch; timed on the host's clock only with --out)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the cells already in --out (errors dropped) and run only the modes a shape lacks")
    ap.add_argument("--time-limit", type=float, default=0.0, metavar="SECONDS",
                    help="stop between shapes before this many seconds have passed (0: no limit); exit 3")
    ap.add_argument("--check-rows", type=int, default=256, help="query rows checked against float64 per shape")
    ap.add_argument("--kernels", action="store_true",
                    help="profile one call per cell: kernel count and names (and the default's backend from them)")
    ap.add_argument("--fuseport", default=None,
                    help="fuseport binary whose `list` gives the params' order ('none': the built-in order; "
                    "default: the first of build/, build-gpu/, .gpu/bin/, /tmp/fp-build/ and PATH that has one)")
    ap.add_argument("--warmup-ms", type=float, default=10.0)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--reps", type=int, default=0, help="fixed repetitions (0: --rep-ms decides)")
    ap.add_argument("--seed", type=int, default=20230814)
    args = ap.parse_args()
    started = time.monotonic()
    device = args.device
    try:
        shapes = parse_shapes(args.shapes)
        causals = [v == "true" for v in parse_list(args.causal, ["false", "true"], "--causal")]
        dtypes = parse_list(args.dtypes, list(DTYPES), "--dtypes")
        modes = MODES if args.modes == "all" else parse_list(args.modes, MODES, "--modes")
    except ValueError as e:
        ap.error(str(e))
    if args.check_rows < 1 or args.time_limit < 0 or args.reps < 0 or args.rep_ms <= 0 or args.warmup_ms < 0:
        ap.error("--check-rows >= 1, --time-limit >= 0, --reps >= 0, --rep-ms > 0, --warmup-ms >= 0")
    timing = not args.check_only and (device == "cuda" or args.out is not None)
    if timing and not args.out:
        ap.error("--out is required unless --check-only")
    if device == "cuda" and not torch.cuda.is_available():
        ap.error("no CUDA device visible to PyTorch (torch.cuda.is_available() is False); "
                 "--device cpu for the debug path")
    if args.out and os.path.dirname(os.path.abspath(args.out)) and \
            not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        ap.error(f"--out {args.out}: the folder does not exist")
    if args.resume and not args.out:
        ap.error("--resume needs --out")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # causal_lower_right(S, SK) with S > SK warns of NaN rows: those rows see no key, and the check leaves them out
    warnings.filterwarnings("ignore", message="Lower right causal bias will produce NaNs")
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = 1 << 16
    order, order_source = param_order(tb.find_fuseport(args.fuseport))
    unknown = [n for n, d in order if n.lower() not in KNOWN_PARAMS]
    bad_scale = [d for n, d in order if n.lower() == "scale" and d not in ("0", "0.0")]
    if unknown or bad_scale:
        print(f"torch_attention: {order_source} gives params {unknown} this script does not sweep: written at "
              f"fuseport's defaults ({' '.join(f'{n}={d}' for n, d in order if n in unknown)}); every torch cell "
              "uses scale = 1/sqrt(D)", file=sys.stderr)
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    failures = []

    def log(line, bad=False):
        print(line, file=sys.stderr if bad else sys.stdout, flush=True)
        if bad:
            failures.append(line)

    doc = timer = None
    copy_gbps = 1.0
    done = {}
    if device == "cuda":
        name = torch.cuda.get_device_properties(0).name
    else:
        name = "cpu (wall clock, debug)"
    if timing:
        if device == "cuda":
            timer = tb.Timer(args.warmup_ms, args.rep_ms, 5, 10000, args.reps)
            copy_gbps = tb.measure_copy_gbps(timer)
        else:
            timer = tb.WallTimer(args.reps)
        settings = tb.torch_settings()
        settings.update({
            "compile": "torch.compile default mode, dynamic=False (one compile per shape)",
            "compile-max": "torch.compile mode=max-autotune, dynamic=False; inputs marked static",
            "sdpa": "F.scaled_dot_product_attention, PyTorch's default backend choice",
            "sdpa-<backend>": "under torch.nn.attention.sdpa_kernel(that backend alone)",
            "causal": "is_causal=True for S == SK, causal_lower_right(S, SK) otherwise; eager: -10000.0 triu",
            "params_order": order_source})
        try:
            cudnn = torch.backends.cudnn.version()
        except Exception:  # noqa: BLE001
            cudnn = None
        doc = {"meta": {
            "device": name, "driver": torch.version.cuda, "backend": "torch",
            "platform": f"PyTorch {torch.__version__}, cuDNN {cudnn}, CUDA {torch.version.cuda}",
            "fuseport_version": "bench/torch_attention.py",
            "git_commit": os.environ.get("FUSEPORT_GIT_COMMIT", "unknown"),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "options": vars(args), "copy_gbps": copy_gbps,
            "torch_settings": settings}, "cells": []}
        if args.resume and os.path.exists(args.out):
            try:
                with open(args.out) as fh:
                    old = json.load(fh)
                kept = [c for c in old["cells"] if c.get("status") != "error"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                sys.exit(f"torch_attention: --resume: cannot read {args.out}: {e}")
            if old.get("meta", {}).get("device") not in (None, name):
                print(f"torch_attention: WARNING: {args.out} was written on {old['meta'].get('device')}, "
                      f"this is {name}", file=sys.stderr)
            doc["cells"] = kept
            print(f"torch_attention: resuming {args.out}: {len(kept)} cells kept", flush=True)
        for c in doc["cells"]:
            done.setdefault((c["op"], c["params"], tuple(c["shape"])), set()).add(c["variant"])
        print(f"torch_attention: {name}, copy {copy_gbps:.0f} GB/s; PyTorch {torch.__version__}, "
              f"CUDA {torch.version.cuda}; params order from {order_source}", flush=True)
    else:
        print(f"torch_attention: correctness check only, on {device}; params order from {order_source}", flush=True)
    per_cell = {"torch_version": torch.__version__, "cuda_version": torch.version.cuda, "gpu": name}

    groups = [(dt, c, s) for dt in dtypes for c in causals for s in shapes]
    longest = 0.0
    stopped = None
    try:
        for n, (dt, causal, given) in enumerate(groups):
            pb = Problem(given, causal, dt)
            ps = params_str(order, given, causal, dt)
            todo = [m for m in modes if m not in done.get((OP, ps, tuple(given)), set())]
            if doc is not None and not todo:
                continue  # --resume: this shape is in --out already
            elapsed = time.monotonic() - started
            if args.time_limit and elapsed + 1.2 * longest > args.time_limit:
                stopped = len(groups) - n
                break
            t0 = time.monotonic()
            if any(m.startswith("compile") for m in todo):
                torch._dynamo.reset()  # one static compile per shape; nothing to keep
            cells = run_shape(pb, todo, args, timer, copy_gbps, gen, device, ps, log)
            if doc is not None:
                for mode, fields in cells:
                    doc["cells"].append(tb.cell(OP, mode, given, ps, causal=causal, dtype=dt, **per_cell, **fields))
                tb.write_atomic(args.out, doc)
            longest = max(longest, time.monotonic() - t0)
            print(f"torch_attention: {ps} {tb.shape_str(given)} done ({time.monotonic() - t0:.1f} s)", flush=True)
    except KeyboardInterrupt:
        print(f"torch_attention: interrupted; {args.out or 'nothing'} holds the shapes done "
              "(rerun with --resume)", file=sys.stderr, flush=True)
        return 130
    if doc is not None:
        tb.write_atomic(args.out, doc)
    fails = [f for f in failures if f.lstrip().startswith("FAIL")]
    errors = [f for f in failures if not f.lstrip().startswith("FAIL")]
    if errors:
        print(f"torch_attention: {len(errors)} cells raised an error (recorded as status \"error\"; "
              "--resume retries them):\n" + "\n".join(errors), file=sys.stderr)
    if fails:
        print(f"torch_attention: correctness FAILED ({len(fails)}):\n" + "\n".join(fails), file=sys.stderr)
    if stopped:
        print(f"torch_attention: --time-limit {args.time_limit:.0f} s: stopped with {stopped} shape(s) of "
              f"{len(groups)} left; rerun with --resume to continue", flush=True)
    if failures:
        return 1
    if stopped:
        return 3
    print("torch_attention: correctness OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
