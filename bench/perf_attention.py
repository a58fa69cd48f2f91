#!/usr/bin/env python3
"""The attention family's tables (ops/attention.c) for docs/PERF.md: fuseport
beside PyTorch, from `fuseport bench` JSON(s) and bench/torch_attention.py
JSON(s):

    python3 bench/perf_attention.py attention-cuda.json attention-torch.json [--copy-gbs 3000]
    python3 bench/perf_attention.py docs/results/DATE-h100-attention-COMMIT      # every *.json in it

A file is PyTorch's when its meta.backend is "torch", fuseport's otherwise;
only op "attention" is read. Cells match on (B, H, S, SK, D, causal, dtype)
from the shape (BxHxSxD: SK = S, or an SK param; BxHxSxSKxD) and the params
(causal, dtype; a scale other than 0 / 1/sqrt(D) is kept in the key); a
fuseport cell's other params (e.g. a split count) make rows of their own,
each against the same PyTorch cells.

Prefill rows (S > --decode-s), one markdown table per (D, causal, dtype):
shape, fuseport's TFLOP/s per variant (fused, memeff, unfused, any other),
PyTorch's per mode (sdpa with the backend it picked), then per PyTorch mode
the ratio peer median / fused median (> 1: fuseport's fused variant is faster;
the same as fused TFLOP/s over the peer's). FLOPs are fuseport's: 4 * D * the
(query, key) pairs the mask leaves. Under each table a line per peer: the
geometric mean of the ratio, its min and max (with their shapes).
Decode rows (S <= --decode-s, default 1): per (D, causal, dtype), the GB/s
of the k and v reads (2 * B*H*SK*D * element size / median) and their
fraction of the copy bandwidth (--copy-gbs, else meta.copy_gbps of a fuseport
record, else of a CUDA PyTorch record), with the same ratios.
A cell that is not ok shows its status (unsup, oom, err); a "fail" cell (it
failed its float64 check) shows its number with "!" and is left out of the
summaries. Standard library only.
"""
import argparse
import glob
import json
import math
import os
import sys

OP = "attention"
TORCH_MODES = ["eager", "compile", "compile-max", "sdpa", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math"]
FP_ORDER = ["fused", "memeff", "unfused"]
ESIZE = {"f32": 4, "f16": 2, "bf16": 2}
SHORT = {"unsupported": "unsup", "oom": "oom", "error": "err"}


def die(msg):
    sys.exit(f"perf_attention: {msg}")


def gm(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    except ValueError as e:
        die(f"{path} is not JSON: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list) or not isinstance(doc.get("meta"), dict):
        die(f"{path}: not a fuseport bench / torch_attention.py record (no meta and cells)")
    return doc


class Key:
    """A cell's problem, normalised."""

    def __init__(self, shape, params, where):
        p = {}
        for kv in (params or "").split():
            name, sep, value = kv.partition("=")
            if not sep:
                die(f"{where}: params '{params}': '{kv}' is not name=value")
            p[name] = value
        low = {k.lower(): (k, v) for k, v in p.items()}
        shape = [int(x) for x in shape]
        if len(shape) == 4:
            self.B, self.H, self.S, self.D = shape
            sk = low.get("sk", (None, "0"))[1]
            try:
                self.SK = int(sk) or self.S
            except ValueError:
                die(f"{where}: SK={sk} is not an integer")
        elif len(shape) == 5:
            self.B, self.H, self.S, self.SK, self.D = shape
        else:
            die(f"{where}: shape {shape} is not BxHxSxD or BxHxSxSKxD")
        causal = low.get("causal", (None, "false"))[1].lower()
        if causal not in ("true", "false", "1", "0"):
            die(f"{where}: causal={causal}")
        self.causal = causal in ("true", "1")
        self.dtype = low.get("dtype", (None, "?"))[1]
        scale = low.get("scale", (None, "0"))[1]
        try:
            s = float(scale) if scale not in ("", "default") else 0.0
        except ValueError:
            die(f"{where}: scale={scale} is not a number")
        self.scale = "" if s == 0 or abs(s * math.sqrt(self.D) - 1) < 1e-6 else f"scale={scale}"
        self.label = ""
        self.extra = " ".join(f"{k}={v}" for k, v in p.items()
                              if k.lower() not in ("sk", "causal", "dtype", "scale"))

    def core(self):
        return (self.B, self.H, self.S, self.SK, self.D, self.causal, self.dtype, self.scale)

    def shape_text(self):
        sk = "" if self.SK == self.S else f"x{self.SK}"
        return f"{self.B}x{self.H}x{self.S}{sk}x{self.D}"

    def pairs(self):
        S, SK = self.S, self.SK
        if not self.causal:
            return S * SK
        return S * (2 * SK - S + 1) // 2 if S <= SK else SK * (SK + 1) // 2

    def flops(self):
        return 4 * self.B * self.H * self.D * self.pairs()

    def kv_bytes(self):
        return 2 * self.B * self.H * self.SK * self.D * ESIZE.get(self.dtype, 2)


def collect(paths):
    """(fuseport {(core, extra): {variant: cell}}, torch {core: {mode: cell}}, keys, fp metas, torch metas)."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(glob.glob(os.path.join(p, "*.json")))
            if not found:
                die(f"{p}: no *.json in it")
            files += found
        elif os.path.exists(p):
            files.append(p)
        else:
            die(f"{p}: no such file or folder")
    fp, th, keys, fmetas, tmetas = {}, {}, {}, [], []
    replaced = 0
    for path in files:
        doc = load(path)
        is_torch = doc["meta"].get("backend") == "torch"
        n = 0
        for i, c in enumerate(doc["cells"]):
            if c.get("op") != OP:
                continue
            if "median_us" not in c or "variant" not in c or "shape" not in c:
                die(f"{path}: cell {i} lacks variant, shape or median_us")
            k = Key(c["shape"], c.get("params", ""), f"{path}: cell {i}")
            n += 1
            if is_torch:
                slot = th.setdefault(k.core(), {})
            else:
                slot = fp.setdefault((k.core(), k.extra), {})
                keys[(k.core(), k.extra)] = k
            keys.setdefault((k.core(), ""), k)
            if c["variant"] in slot and slot[c["variant"]].get("status") == "ok" and c.get("status") != "ok":
                continue  # an ok cell is not replaced by a later failed try
            replaced += c["variant"] in slot
            slot[c["variant"]] = c
        if n == 0:
            print(f"perf_attention: note: {path} has no {OP} cells", file=sys.stderr)
        (tmetas if is_torch else fmetas).append((path, doc["meta"], n))
    if not fp and not th:
        die(f"no {OP} cells in {', '.join(files)}")
    if replaced:
        print(f"perf_attention: note: {replaced} cells appear in more than one record: the later file's is used",
              file=sys.stderr)
    return fp, th, keys, fmetas, tmetas


def ok(c):
    return c is not None and c.get("status") in ("ok", "fail") and c.get("median_us")


def time_ratio(peer, ref):
    """peer median / ref median, both ok (not failed)."""
    if peer and ref and peer.get("status") == "ok" and ref.get("status") == "ok" \
            and peer.get("median_us") and ref.get("median_us"):
        return peer["median_us"] / ref["median_us"]
    return None


def show(c, value):
    """A cell's number (value(c)), its status, or '-' when absent."""
    if c is None:
        return "-"
    if not ok(c):
        return SHORT.get(c.get("status"), c.get("status") or "?")
    return f"{value(c)}{'!' if c.get('status') == 'fail' else ''}"


def impl_tag(c):
    """sdpa's backend choice, short."""
    impl = (c or {}).get("impl") or ""
    return impl.split()[0] if impl else ""


def summary_lines(rows, peers, ref, label):
    out = []
    for m in peers:
        rs = [(r, k) for k, fpc, thc in rows for r in [time_ratio(thc.get(m), fpc.get(ref))] if r is not None]
        if not rs:
            continue
        lo, hi = min(rs, key=lambda x: x[0]), max(rs, key=lambda x: x[0])
        out.append(f"{label}{m} / {ref}: geometric mean {gm([r for r, _ in rs]):.2f}, min {lo[0]:.2f} "
                   f"({lo[1].shape_text()}), max {hi[0]:.2f} ({hi[1].shape_text()}), {len(rs)} shapes")
    return out


def table(title, rows, fp_variants, peers, ref, decode, copy_gbs):
    print(f"\n#### {title}\n")
    if decode:
        head = ["shape (BxHxSxSKxD)", "k+v MiB", f"{ref} us"]
        head += [f"{v} GB/s" + (" (of copy)" if copy_gbs else "") for v in fp_variants]
        head += [f"{m} GB/s" for m in peers]
    else:
        head = ["shape (BxHxS[xSK]xD)"] + [f"{v} TFLOP/s" for v in fp_variants] + [f"{m} TFLOP/s" for m in peers]
    head += [f"{m} / {ref}" for m in peers] if any(ref in f for _, f, _ in rows) else []
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))

    def tf(k):
        return lambda c: f"{k.flops() / c['median_us'] / 1e6:.0f}" if k.flops() / c["median_us"] / 1e6 >= 10 \
            else f"{k.flops() / c['median_us'] / 1e6:.2f}"

    def gbs(k, frac):
        def f(c):
            g = k.kv_bytes() / c["median_us"] / 1e3
            return f"{g:.0f} ({g / copy_gbs:.2f})" if frac and copy_gbs else f"{g:.0f}"
        return f

    for k, fpc, thc in rows:
        if decode:
            cols = [k.shape_text() + (f" {k.label}" if k.label else ""), f"{k.kv_bytes() / 2**20:.1f}",
                    show(fpc.get(ref), lambda c: f"{c['median_us']:.1f}")]
            cols += [show(fpc.get(v), gbs(k, True)) for v in fp_variants]
            cols += [show(thc.get(m), gbs(k, False)) for m in peers]
        else:
            cols = [k.shape_text() + (f" {k.label}" if k.label else "")]
            cols += [show(fpc.get(v), tf(k)) for v in fp_variants]
            cols += [show(thc.get(m), tf(k)) for m in peers]
        if m_sdpa := (thc.get("sdpa") if "sdpa" in peers else None):
            i = len(cols) - len(peers) + peers.index("sdpa")
            if ok(m_sdpa) and impl_tag(m_sdpa):
                cols[i] += f" ({impl_tag(m_sdpa)})"
        if len(head) > len(cols):
            for m in peers:
                r = time_ratio(thc.get(m), fpc.get(ref))
                cols.append(f"{r:.2f}" if r is not None else "-")
        print("| " + " | ".join(cols) + " |")
    lines = summary_lines(rows, peers, ref, "")
    for v in fp_variants:  # fuseport's other variants: their speed against ref's (> 1: v faster)
        rs = [(r, k) for k, fpc, _ in rows for r in [time_ratio(fpc.get(ref), fpc.get(v))] if r is not None]
        if v != ref and rs:
            lo, hi = min(rs, key=lambda x: x[0]), max(rs, key=lambda x: x[0])
            lines.append(f"{ref} / {v} (time; {v}'s speed over {ref}'s): geometric mean {gm([r for r, _ in rs]):.2f}, "
                         f"min {lo[0]:.2f} ({lo[1].shape_text()}), max {hi[0]:.2f} ({hi[1].shape_text()}), "
                         f"{len(rs)} shapes")
    if lines:
        print()
        for line in lines:
            print(f"- {line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="fuseport bench and torch_attention.py JSON files, or folders of them")
    ap.add_argument("--copy-gbs", type=float, default=None,
                    help="copy bandwidth in GB/s for the decode tables (default: meta.copy_gbps of a fuseport "
                    "record, else of a CUDA PyTorch record)")
    ap.add_argument("--decode-s", type=int, default=1, help="rows with S <= this go to the decode tables (default 1)")
    ap.add_argument("--ref", default="fused", help="fuseport variant the ratios divide by (default fused)")
    ap.add_argument("--peers", default=None, help="comma list of PyTorch modes to show (default: every one recorded)")
    ap.add_argument("--dtypes", default=None, help="comma list: only these dtypes")
    args = ap.parse_args()
    if args.copy_gbs is not None and not args.copy_gbs > 0:
        ap.error("--copy-gbs must be > 0")
    if args.decode_s < 0:
        ap.error("--decode-s must be >= 0")
    fp, th, keys, fmetas, tmetas = collect(args.records)

    for path, m, n in fmetas + tmetas:
        print(f"- `{os.path.basename(path)}`: {m.get('backend')} on {m.get('device')}, {str(m.get('date'))[:10]}, "
              f"{m.get('platform')}, commit {m.get('git_commit')}; {n} {OP} cells")
    devices = {m.get("device") for _, m, n in fmetas + tmetas if n}
    if len(devices) > 1:
        print(f"\n**The records come from different devices ({', '.join(map(str, sorted(map(str, devices))))}): "
              "the ratios compare nothing.**")
    copy_gbs, copy_src = args.copy_gbs, "--copy-gbs"
    if copy_gbs is None:
        for path, m, _ in fmetas + [t for t in tmetas if "cpu" not in str(t[1].get("device"))]:
            if isinstance(m.get("copy_gbps"), (int, float)) and m["copy_gbps"] > 0:
                copy_gbs, copy_src = float(m["copy_gbps"]), f"meta.copy_gbps of {os.path.basename(path)}"
                break

    recorded = {v for cells in th.values() for v in cells}
    if args.peers:
        peers = [m.strip() for m in args.peers.split(",") if m.strip()]
        unknown = [m for m in peers if m not in recorded]
        if unknown:
            ap.error(f"--peers {','.join(unknown)}: not in the PyTorch records (they have: "
                     f"{', '.join(sorted(recorded)) or 'none'})")
    else:
        peers = [m for m in TORCH_MODES if m in recorded] + sorted(recorded - set(TORCH_MODES))
    fp_seen = {v for cells in fp.values() for v in cells}
    fp_variants = [v for v in FP_ORDER if v in fp_seen] + sorted(fp_seen - set(FP_ORDER))
    if fp and args.ref not in fp_seen:
        ap.error(f"--ref {args.ref}: no fuseport cell of that variant (they have: {', '.join(fp_variants)})")
    dtypes = args.dtypes.split(",") if args.dtypes else None

    # a fuseport param outside the key (splits, chunk, ...) is shown in a row's label only where it
    # differs from its most common value (the default, in a plain sweep)
    counts = {}
    for k in keys.values():
        for kv in k.extra.split():
            name, _, value = kv.partition("=")
            counts.setdefault(name, {}).setdefault(value, 0)
            counts[name][value] += 1
    usual = {name: max(vals, key=vals.get) for name, vals in counts.items()}
    for k in keys.values():
        k.label = " ".join(kv for kv in k.extra.split() if usual.get(kv.partition("=")[0]) != kv.partition("=")[2])

    # rows: every fuseport (core, extra), and PyTorch's cores fuseport lacks
    row_keys = list(fp)
    have = {core for core, _ in fp}
    row_keys += [(core, "") for core in th if core not in have]
    rows = []
    for rk in row_keys:
        k = keys[rk]
        if dtypes and k.dtype not in dtypes:
            continue
        rows.append((k, fp.get(rk, {}), th.get(rk[0], {})))
    if not rows:
        die("no rows left (--dtypes?)")
    rows.sort(key=lambda r: (r[0].D, r[0].causal, r[0].dtype, r[0].scale, r[0].S, r[0].SK, r[0].B, r[0].H,
                             r[0].extra))

    print(f"\nRatios: PyTorch's median over fuseport's {args.ref} median (> 1: fuseport faster). "
          f"Decode copy bandwidth: " + (f"{copy_gbs:.0f} GB/s ({copy_src})" if copy_gbs else "unknown"))
    groups = {}
    for r in rows:
        k = r[0]
        groups.setdefault((k.S <= args.decode_s, k.D, k.causal, k.dtype, k.scale), []).append(r)
    for (decode, D, causal, dtype, scale), grows in sorted(groups.items(), key=lambda g: (g[0][0], str(g[0][1:]))):
        what = "decode (GB/s of k+v)" if decode else "prefill"
        title = f"attention D={D} causal={'true' if causal else 'false'} {dtype}{' ' + scale if scale else ''}: {what}"
        table(title, grows, fp_variants, peers, args.ref, decode, copy_gbs)

    if fp and th:
        print("\n#### Summary: every table\n")
        for decode in (False, True):
            sel = [r for r in rows if (r[0].S <= args.decode_s) == decode]
            for line in summary_lines(sel, peers, args.ref, "decode, " if decode else "prefill, "):
                print(f"- {line}")
        missing = sum(1 for k, fpc, thc in rows if fpc.get(args.ref) and not thc)
        if missing:
            print(f"\n{missing} fuseport rows have no PyTorch cell (not run?).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
