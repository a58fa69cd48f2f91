"""The matmul family for torch_bench.py (SPEC.md "Matmul family"; ops/matmul.c): the
ops as PyTorch runs them, their inputs as fuseport fills them, the float64 check with
ops/matmul_reference.c's tolerance, and the GEMM-alone peer."""
import itertools
import math

import torch
import torch.nn.functional as F

from torch_fill import ceil_log2, compare, uniform_like_fuseport

# ---- the matmul family (SPEC.md "Matmul family"; ops/matmul.c) ------------------------------
# Shapes are [M, N, K] (matmul_matmul: [M, N, K, P]); a cell's "params" is the op's
# non-shape params as `name=value` in this order, as fuseport writes them.
MM_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
MM_EPS = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}
_DTYPE = ("dtype", ("f32", "f16", "bf16"), "f16")
_TRANS_B = ("trans_b", ("false", "true"), "false")
_ADD = ("add", ("bias", "full"), "bias")
MM_PARAMS = {  # op -> [(name, choices, default)] in fuseport's order
    "matmul_add": [_DTYPE, _TRANS_B, _ADD],
    "matmul_relu": [_DTYPE, _TRANS_B],
    "matmul_add_relu": [_DTYPE, _TRANS_B, _ADD],
    "matmul_matmul": [_DTYPE, _TRANS_B],
    "matmul_split_act": [_DTYPE, _TRANS_B],
    # a linear layer's weight is stored [2N, K]: trans_b is the default here
    "linear_geglu": [_DTYPE, ("trans_b", ("false", "true"), "true")],
}
MM_OPS = list(MM_PARAMS)


def mm_rank(op):
    return 4 if op == "matmul_matmul" else 3


# `--shapes seed` for the family: ops/matmul.c's seed list (keep the two equal)
MM_SEED_SHAPES = [
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (8192, 1024, 4096), (8192, 4096, 1024), (4096, 1024, 8192), (2048, 11008, 4096),
    (1024, 2048, 2048), (2048, 4096, 4096), (1, 4096, 4096), (4, 4096, 4096),
    (16, 8192, 8192), (4097, 4097, 4097), (4096, 4095, 4096), (2048, 50257, 1024),
    (8192, 64, 4096, 4096), (8192, 128, 4096, 4096), (8192, 256, 4096, 4096),
    (16384, 128, 1024, 1024), (4096, 1024, 4096, 4096),
]
MM_CHECK_SHAPES = "7x33x100,33x65x1000,128x256x512,7x33x100x17,64x128x256x96"


def mm_function(op, p):
    """The PyTorch a user writes for op under params p (a dict of strings).
    With trans_b the stored operand is [N, K] and is used through b.t(), a
    view, as a linear layer uses its weight -- never a copied transpose."""
    trans_b = p["trans_b"] == "true"

    def rhs(b):
        return b.t() if trans_b else b

    if op == "matmul_add":
        def matmul_add(a, b, c):
            return a @ rhs(b) + c
        return matmul_add
    if op == "matmul_relu":
        def matmul_relu(a, b):
            return torch.relu(a @ rhs(b))
        return matmul_relu
    if op == "matmul_add_relu":
        def matmul_add_relu(a, b, c):
            return torch.relu(a @ rhs(b) + c)
        return matmul_add_relu
    if op == "matmul_matmul":
        def matmul_matmul(a, b, d):
            return (a @ rhs(b)) @ d
        return matmul_matmul
    if op == "matmul_split_act":
        def matmul_split_act(a, b):  # the split-activation notebook's torch_splacc
            c = torch.matmul(a, rhs(b))
            cl, cr = torch.tensor_split(c, 2, dim=1)
            return torch.sigmoid(cl) * torch.tanh(cr)
        return matmul_split_act
    if op == "linear_geglu":
        def linear_geglu(x, w, bias):
            z = F.linear(x, w, bias) if trans_b else x @ w + bias
            z1, z2 = z.chunk(2, -1)
            return z1 * F.gelu(z2)  # erf gelu (approximate="none")
        return linear_geglu
    raise KeyError(op)


def mm_gemm_only(op, p):
    """The op's GEMMs alone, as eager PyTorch runs them (cuBLAS): A @ B (the
    [M, 2N] product for the paired ops), both products for matmul_matmul
    (two cuBLAS calls). Mode "gemm": the bound a fused epilogue aims at,
    checked against the same GEMMs in float64, not against the op."""
    trans_b = p["trans_b"] == "true"

    def rhs(b):
        return b.t() if trans_b else b

    if op == "matmul_matmul":
        def gemms(a, b, d):
            return (a @ rhs(b)) @ d
        return gemms

    def gemm(a, b, *_):
        return a @ rhs(b)
    return gemm


def mm_scale(x):
    """Fill scale of an operand whose rows are summed over x terms: about
    1/sqrt(x), a power of two, so that outputs stay O(1)."""
    return 2.0 ** (1 - (ceil_log2(x) + 1) // 2)


def mm_inputs_of(op, shape, p):
    """Inputs as (name, stored shape, fill scale), in fuseport's order: input k
    is filled from Philox stream k, signed ([-scale, scale)), in storage order."""
    M, N, K = shape[:3]
    trans_b = p["trans_b"] == "true"
    nb = 2 * N if op in ("matmul_split_act", "linear_geglu") else N  # columns of A@B
    geglu = op == "linear_geglu"
    a = ("x" if geglu else "a", (M, K), 1.0)
    b = ("w" if geglu else "b", (nb, K) if trans_b else (K, nb), mm_scale(K))
    if op in ("matmul_add", "matmul_add_relu"):
        return [a, b, ("c", (N,) if p["add"] == "bias" else (M, N), 1.0)]
    if op == "matmul_matmul":
        return [a, b, ("d", (N, shape[3]), mm_scale(N))]
    if geglu:
        return [a, b, ("bias", (2 * N,), 1.0)]
    return [a, b]


def mm_make_inputs(op, shape, p, seed, device, exact):
    dtype = MM_DTYPES[p["dtype"]]
    ts = []
    for k, (_, sh, scale) in enumerate(mm_inputs_of(op, shape, p)):
        if exact:
            # fuseport fills float32 then rounds to nearest even: .to() is bit-identical
            t = uniform_like_fuseport(seed, k, math.prod(sh), scale, False, device).view(sh).to(dtype)
        else:  # timing only: any data of the same range, made in place
            t = torch.empty(sh, dtype=dtype, device=device).uniform_(-scale, scale)
        ts.append(t)
    return ts


def mm_tolerance(op, shape, dtype):
    """fuseport's gate for the family (ops/matmul_reference.c): (rtol, atol*max|ref|, abs)."""
    eps = MM_EPS[dtype]
    atol = 4 * eps + 16 * 2.0 ** -24 * math.sqrt(shape[2])
    if op == "matmul_matmul":
        atol += 16 * 2.0 ** -24 * math.sqrt(shape[1])
    return 4 * eps, atol, 0.0


def mm_flops(op, shape):
    M, N, K = shape[:3]
    if op == "matmul_matmul":
        return 2 * M * N * K + 2 * M * N * shape[3]
    if op in ("matmul_split_act", "linear_geglu"):
        return 2 * M * (2 * N) * K
    return 2 * M * N * K


def mm_variant(fn, mode, op=None, p=None):
    """eager, or torch.compile with static shapes (one compile per shape) in
    the default mode or max-autotune, or (gemm) the op's GEMMs alone in eager.
    Each mode wraps fn in a lambda of its own, so the two compiled wrappers
    never share dynamo's per-code-object cache (and recompile limit)."""
    if mode == "eager":
        return fn
    if mode == "gemm":
        return mm_gemm_only(op, p)
    if mode == "compile":
        return torch.compile(lambda *t: fn(*t), dynamic=False)
    if mode == "autotune":
        return torch.compile(lambda *t: fn(*t), mode="max-autotune", dynamic=False)
    raise ValueError(f"unknown mode {mode!r} (eager, compile, autotune, gemm)")


def mm_combos(op, choices):
    """The cartesian product of the op's params, each from choices[name] (a
    list) or its default, in fuseport's order."""
    spec = MM_PARAMS[op]
    lists = [choices.get(name, [default]) for name, _, default in spec]
    for values in itertools.product(*lists):
        yield {name: v for (name, _, _), v in zip(spec, values)}


def mm_params_str(op, p):
    return " ".join(f"{name}={p[name]}" for name, _, _ in MM_PARAMS[op])


def shape_str(shape):
    return "x".join(str(v) for v in shape)


def check_mm(op, check_shapes, modes, seed, device, how, swept):
    """Every combination of op's params (all dtypes, both trans_b, both add)
    against a float64 evaluation of the same definition on the same stored
    inputs, upcast. Eager runs on every check shape of the op's rank; each
    compiled mode on one of them per combination, in turn, so that every
    combination and every shape is covered without a static compile (and a
    max-autotune search) per combination x shape. how="all" compiles them
    all; how="swept" checks only the combinations to be timed (swept: the
    --param choices), each mode on every check shape.
    Returns ({(params, mode): ok}, lines)."""
    shapes = [s for s in check_shapes if len(s) == mm_rank(op)]
    every = swept if how == "swept" else {name: list(choices) for name, choices, _ in MM_PARAMS[op]}
    full = how != "rotate"
    result, lines = {}, []
    for i, p in enumerate(mm_combos(op, every)):
        ps = mm_params_str(op, p)
        fn = mm_function(op, p)
        torch._dynamo.reset()
        variants = {mode: mm_variant(fn, mode, op, p) for mode in modes}
        for j, shape in enumerate(shapes):
            run_modes = [m for m in modes if m in ("eager", "gemm") or full or j == i % len(shapes)]
            if not run_modes:
                continue
            inputs = mm_make_inputs(op, shape, p, seed, device, exact=True)
            ref_op = fn(*[t.double() for t in inputs])
            tol = mm_tolerance(op, shape, p["dtype"])
            for mode in run_modes:
                ref = mm_gemm_only(op, p)(*[t.double() for t in inputs]) if mode == "gemm" else ref_op
                try:
                    # clone: a CUDA-graphed output is overwritten by the next replay
                    out = variants[mode](*inputs).clone()
                    bad, ma, mr, l2 = compare(out, ref, tol)
                    if out.dtype != inputs[0].dtype or out.shape != ref.shape:
                        bad = max(bad, 1)
                    line = f"bad={bad} max_abs={ma:.2e} max_rel={mr:.2e} rel_l2={l2:.2e}"
                    del out
                except Exception as e:  # a failed compile fails the check, the rest goes on
                    bad, line = 1, f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                result[(ps, mode)] = result.get((ps, mode), True) and bad == 0
                lines.append(f"  {op:18s} {mode:8s} {ps} {shape_str(shape)}: {line}")
            del inputs, ref, ref_op
    return result, lines


def mm_mark_static(inputs):
    """max-autotune runs the graph under CUDA graphs, which copy every input
    that is not static into the graph's own buffers on each replay: the
    events would time those copies too (a 4096^3 f16 GEMM's 64 MiB of
    operands). In a model the weights are static parameters and the
    activations come from the previous graph, so nothing is copied: mark the
    inputs static (unguarded: a new address re-records the graph, it does
    not recompile)."""
    mark = getattr(torch._dynamo, "mark_static_address", None)
    if mark is not None:
        for t in inputs:
            mark(t, guard=False)
