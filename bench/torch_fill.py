"""What torch_bench.py and the family scripts beside it share to check PyTorch against
fuseport: inputs bit-identical to fuseport's (Philox4x32-10, as
kernels/common/fp_device_common.h, on the GPU with int64 arithmetic) and fuseport's
comparison gate (ops/check.c)."""
import math

import torch

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


def check_philox_known_answers(dev="cuda"):
    """Random123's known answers, through the int64 formulation above."""
    idx = torch.zeros(1, dtype=torch.int64, device=dev)
    assert int(philox_word0(0, idx, 0, 0)[0]) == 0x6627E8D5
    counter = 0x85A308D3_243F6A88 - (1 << 64)  # the same 64 bits as a signed int64
    idx = torch.tensor([counter], dtype=torch.int64, device=dev)
    assert int(philox_word0(0x299F31D0_A4093822, idx, 0x13198A2E, 0x03707344)[0]) == 0xD16CFE09


def ceil_log2(n):
    return max(0, (n - 1).bit_length())


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
