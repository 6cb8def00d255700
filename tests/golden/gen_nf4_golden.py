#!/usr/bin/python3
"""Golden data for fitgrad's 4-bit weight quantization: bitsandbytes' NF4 / FP4, bit for bit.

How to run (standard library and NumPy only, /usr/bin/python3; CI does NOT run this, it only
reads the committed output):

    /usr/bin/python3 tests/golden/gen_nf4_golden.py            # rewrites tests/golden/nf4_quant.gtb
    /usr/bin/python3 tests/golden/gen_nf4_golden.py --out DIR  # writes elsewhere (to compare)

The file uses the .gtb format of tests/golden/golden_file.h, written by gtb_numpy.write_gtb
(floats as f32, integers as i64); the output is deterministic (fixed seed, sorted JSON keys).

What is computed, written here from the published description of bitsandbytes'
quantize_4bit / dequantize_4bit (CUDA kernels kQuantizeBlockwise / kDequantizeBlockwise),
every operation in IEEE float32 with one rounding each, in the order given (no fused
multiply-add; NumPy is never allowed to widen, the dtypes are asserted):

  * Blocks: the input flattened to n values, cut into blocks of `blocksize` consecutive
    values (the last block partial). absmax = max |a| over the block; r = 1.0f / absmax
    (absmax 0 gives r = inf); x = a * r (0 * inf = NaN).
  * NF4 codes: the 16 values NF4_CODES (float32). The thresholds t_k (k = 0..14) are the
    midpoints of neighbouring codes computed in float64 from the float32 codes and rounded
    to float32 once; they are asserted equal to the decimal literals of bitsandbytes'
    decision tree read as np.float32(float(text)) (NF4_TREE_LITERALS, in the tree's
    pre-order). code = number of t_k with x > t_k (strictly: a value exactly on a threshold
    takes the LOWER code); NaN -> 0. The decision tree itself is evaluated as well and must
    agree on every value.
    CAUTION: the compiled kernel reads those literals as C `float` literals (correctly
    rounded decimal -> float32; nvcc 13.0's PTX holds exactly these), and four of them are
    one ulp off t_k: at t_0, t_8, t_12, t_14 the float64 midpoint is an exact float32 tie,
    float64 -> float32 rounds it to even, and the printed 17-digit decimal lies a hair to
    the other side. So this file follows the midpoint definition, and a C++ port that pastes
    bitsandbytes' `...f` literals codes 8 values of case 0 differently (meta
    "nf4_thresholds_c_literal", and the case's "c_literal_code_differs" lists the indices);
    random data never lands on those four values.
  * FP4 codes: sign = 8 if x < 0 else 0 (NaN and -0.0: 0); y = |x|; the float32 constants
    FP4_T compared as y > c: y > 0.29166667 ? (y > 0.583333 ? (y > 0.8333333 ? 3 : 2)
    : (y > 0.4166667 ? 5 : 4)) : (y > 0.0859375 ? (y > 0.20833333 ? 7 : 6)
    : (y > 0.00260417 ? 1 : 0)); code = that + sign (NaN -> 0).
  * Packing: two codes per byte, the FIRST value in the HIGH nibble:
    byte k = (code[2k] << 4) | code[2k+1]; for odd n the last low nibble is the code of
    x = 0.0f * r of the last block (the kernel loads the missing value as 0, so it is NaN
    -> code 0 when that block's absmax is 0, else NF4 7 / FP4 0).
  * Dequantization: value = cv * absmax (one float32 product), cv = NF4_CODES[nibble] for
    NF4; for FP4 cv = float32(1 - 2*bit3) * FP4_MAGNITUDES[nibble & 7] (so code 8 gives
    -0.0; this equals bitsandbytes' (magnitude * absmax) * sign bit for bit, multiplying by
    +-1 being exact). Recorded as float32 and rounded to bf16 (round to nearest even on the
    bits) and to f16 (np.float16, one rounding from float32), both widened back to float32.
  * Double quantization (compress_statistics): offset = float32(sum of the float32
    absmaxes accumulated in float64 / number of blocks) (fitgrad's mean: one rounding; the
    script asserts sequential, pairwise and exact float64 sums give the same offset);
    d = absmax - offset (float32); d quantized with bitsandbytes' 8-bit blockwise quantizer
    in blocks of 256 onto the SIGNED dynamic map (gen_adam8bit_golden.dynamic_map(True)):
    absmax2 = max |d| per block, r2 = 1.0f / absmax2, y = d * r2, code = dquantize(y)
    (the binary search of bitsandbytes' dQuantize, with its two end adjustments, see
    dquantize below). The absmax then dequantizes as float32(map[q] * absmax2) + offset (two
    float32 operations, in that order), and the 4-bit values as cv * that.
  * Storage, asserted: 2**20 values at blocksize 64 take (n/2 + n/64 + 4*n/64/256 + 4)
    bytes with double quantization, ~4.127 bits per parameter, and (n/2 + 4*n/64) bytes,
    4.5 bits per parameter, without (meta bits_per_param).

The cases, nf4_quant.gtb (meta "cases" lists each one's quant_type, blocksize, n,
double_quant and what; see make_cases below): NF4 and FP4; blocksizes 32, 64, 128, 4096; n a
multiple of the blocksize, with a partial last block, and odd; a block of all zeros (also as
the last block of an odd n, so the padding nibble is NaN -> 0); blocks of absmax exactly 1
whose values sit exactly on the NF4 (or FP4) thresholds and their float32 neighbours; N(0,1)
float32 data, heavy-tailed N(0,1)^3 data, per-block scaled data; double quantization with
301 and 270 blocks (two 256-blocks of absmaxes, the second partial).
  Tensors: "nf4.codes" (f32 (16,)), "nf4.thresholds" (f32 (15,), ascending); per case c:
  "case.<c>.input" (f32 (n,)), "case.<c>.packed" (the ceil(n/2) bytes packed eight per i64,
  gtb_numpy.pack_bytes: byte j is byte j % 8, little-endian, of element j // 8, zero padded),
  "case.<c>.absmax" (f32 (blocks,), the float32 absmaxes before any double quantization),
  with double quantization also "case.<c>.qabsmax" (the 8-bit codes of d, packed the same
  way), "case.<c>.absmax2" (f32 (ceil(blocks/256),)), "case.<c>.offset" (f32, 0-d) and
  "case.<c>.absmax_dq" (f32 (blocks,), the dequantized absmaxes the values are scaled by);
  "case.<c>.dequant_f32", "case.<c>.dequant_bf16", "case.<c>.dequant_f16" (f32 (n,)).
  meta: cases (quant_type, blocksize, n, double_quant, what, and c_literal_code_differs
  where non-empty), nf4_codes, nf4_thresholds (ascending), nf4_thresholds_c_literal
  (ascending), fp4_magnitudes, fp4_thresholds (decimal text -> float32 value), dq_blocksize,
  bits_per_param {double_quant, plain}, seed.
"""

import argparse
import math
import os
from fractions import Fraction

import numpy as np

from gen_adam8bit_golden import dynamic_map, quantize
from gtb_numpy import pack_bytes, write_gtb

F = np.float32
SEED = 4096
DQ_BLOCKSIZE = 256
BLOCKSIZES = (32, 64, 128, 256, 512, 1024, 2048, 4096)


def c_float_literal(text):
    """The float32 nearest the decimal text (correct rounding), as a C/CUDA compiler reads the
    literal `textf` (nvcc 13.0's PTX holds exactly these)."""
    exact = Fraction(text)
    v = F(float(text))
    candidates = (np.nextafter(v, F(-np.inf)), v, np.nextafter(v, F(np.inf)))
    dist = [abs(exact - Fraction(float(c))) for c in candidates]
    assert sorted(dist)[0] < sorted(dist)[1], text  # no exact tie
    return candidates[dist.index(min(dist))]


def f32_literal(text):
    """float32(text): the decimal read as float64 then rounded to float32, asserted equal to
    the C literal `textf` (so the double rounding does not matter here)."""
    v = F(float(text))
    assert v.view(np.int32) == c_float_literal(text).view(np.int32), text
    return v


def f32_array(texts):
    return np.array([f32_literal(x) for x in texts], dtype=F)


NF4_CODES = f32_array([
    "-1.0", "-0.6961928009986877", "-0.5250730514526367", "-0.39491748809814453",
    "-0.28444138169288635", "-0.18477343022823334", "-0.09105003625154495", "0.0",
    "0.07958029955625534", "0.16093020141124725", "0.24611230194568634", "0.33791524171829224",
    "0.44070982933044434", "0.5626170039176941", "0.7229568362236023", "1.0"])
# bitsandbytes' NF4 decision-tree constants, in the order the tree tests them (pre-order).
# Read as np.float32(float(text)) they equal the float64 midpoints rounded to float32; read
# as the C literals the kernel is compiled from, four of them are one ulp away (see
# check_thresholds): at t_0, t_8, t_12 and t_14 the float64 midpoint is an exact float32 tie,
# and its 17-digit decimal lies a hair off the tie.
NF4_TREE_TEXTS = [
    "0.03979014977812767", "0.3893125355243683", "0.6427869200706482", "0.8614784181118011",
    "0.5016634166240692", "0.2035212516784668", "0.2920137718319893", "0.1202552504837513",
    "-0.33967943489551544", "-0.13791173323988914", "-0.045525018125772476",
    "-0.23460740596055984", "-0.6106329262256622", "-0.4599952697753906",
    "-0.8480964004993439"]
NF4_TREE_LITERALS = np.array([F(float(x)) for x in NF4_TREE_TEXTS], dtype=F)
NF4_TREE_C_LITERALS = np.array([c_float_literal(x) for x in NF4_TREE_TEXTS], dtype=F)
NF4_C_LITERAL_DIFFER = (0, 8, 12, 14)  # thresholds whose C literal is 1 ulp off t_k
FP4_MAGNITUDES = f32_array(["0.0", "0.005208333333", "0.66666667", "1.0", "0.33333333", "0.5",
                            "0.16666667", "0.25"])
FP4_T = {k: f32_literal(k) for k in ("0.29166667", "0.583333", "0.8333333", "0.4166667",
                                     "0.0859375", "0.20833333", "0.00260417")}


# ---------------------------------------------------------------------------- NF4 thresholds


def nf4_thresholds():
    """t_k = float32((float64(code[k]) + float64(code[k+1])) / 2), k = 0..14."""
    c = NF4_CODES.astype(np.float64)
    t = ((c[:-1] + c[1:]) / 2.0).astype(F)
    assert t.dtype == F and np.all(np.diff(t) > 0)
    return t


def tree_preorder(lo=0, hi=15):
    """Threshold indices of the balanced decision tree over codes lo..hi, in pre-order (the
    threshold k separates code k from code k+1)."""
    if lo == hi:
        return []
    k = (lo + hi) // 2
    return [k] + tree_preorder(k + 1, hi) + tree_preorder(lo, k)


def check_thresholds(t):
    """The computed thresholds against bitsandbytes' literals read as np.float32 (must agree
    bit for bit: returns the mismatches) and read as C literals (must differ exactly at
    NF4_C_LITERAL_DIFFER, by one ulp). Returns (mismatches, C-literal thresholds ascending)."""
    order = tree_preorder()
    assert sorted(order) == list(range(15))
    bad = []
    t_c = np.empty(15, dtype=F)
    for lit, c_lit, k in zip(NF4_TREE_LITERALS, NF4_TREE_C_LITERALS, order):
        if lit.view(np.int32) != t[k].view(np.int32):
            bad.append(f"t_{k}: computed {float(t[k])!r} ({float(t[k]).hex()}), "
                       f"literal {float(lit)!r} ({float(lit).hex()})")
        t_c[k] = c_lit
    ulps = t_c.view(np.int32).astype(np.int64) - t.view(np.int32).astype(np.int64)
    assert tuple(np.nonzero(ulps)[0]) == NF4_C_LITERAL_DIFFER and np.all(np.abs(ulps) <= 1)
    return bad, t_c


def nf4_tree(x, lo=0, hi=15, it=None):
    """bitsandbytes' NF4 decision tree on the literals (x > literal at every node)."""
    if it is None:
        it = iter(NF4_TREE_LITERALS)
    if lo == hi:
        return np.full(x.shape, lo, dtype=np.int64)
    k = (lo + hi) // 2
    lit = next(it)
    high = nf4_tree(x, k + 1, hi, it)
    low = nf4_tree(x, lo, k, it)
    return np.where(x > lit, high, low)


# ---------------------------------------------------------------------------- 4-bit codes


def nf4_code(x, t):
    assert x.dtype == F and t.dtype == F
    codes = np.sum(x[:, None] > t[None, :], axis=1).astype(np.int64)  # NaN: 0
    assert np.array_equal(codes, nf4_tree(x))
    return codes


def fp4_code(x):
    assert x.dtype == F
    sign = np.where(x < F(0), 8, 0)
    y = np.abs(x)
    assert y.dtype == F
    T = FP4_T
    c = np.where(y > T["0.29166667"],
                 np.where(y > T["0.583333"], np.where(y > T["0.8333333"], 3, 2),
                          np.where(y > T["0.4166667"], 5, 4)),
                 np.where(y > T["0.0859375"], np.where(y > T["0.20833333"], 7, 6),
                          np.where(y > T["0.00260417"], 1, 0)))
    return (c + sign).astype(np.int64)


def code_values(quant_type, codes):
    """The float32 code value of each 4-bit code."""
    if quant_type == "nf4":
        return NF4_CODES[codes]
    sign = (1 - 2 * (codes >> 3)).astype(F)
    v = sign * FP4_MAGNITUDES[codes & 7]
    assert v.dtype == F
    return v


def block_absmax(a, blocksize):
    starts = np.arange(0, a.size, blocksize)
    absmax = np.maximum.reduceat(np.abs(a), starts)
    assert absmax.dtype == F
    return absmax


def quantize_4bit(a, blocksize, quant_type, t):
    """-> (codes (n,), pad code or None, absmax (blocks,), x (n,))."""
    assert a.dtype == F and a.ndim == 1 and blocksize in BLOCKSIZES
    n = a.size
    absmax = block_absmax(a, blocksize)
    r = F(1) / absmax
    x = a * r[np.arange(n) // blocksize]
    assert r.dtype == F and x.dtype == F
    coder = (lambda v: nf4_code(v, t)) if quant_type == "nf4" else fp4_code
    codes = coder(x)
    pad = None
    if n % 2:
        pad = int(coder(np.array([F(0) * r[-1]], dtype=F))[0])
    return codes, pad, absmax, x


def pack_nibbles(codes, pad):
    assert codes.min() >= 0 and codes.max() <= 15
    if pad is not None:
        codes = np.append(codes, pad)
    assert codes.size % 2 == 0
    return (codes[0::2] << 4) | codes[1::2]


# ---------------------------------------------------------------------------- double quant


def dquantize(code, y):
    """bitsandbytes' dQuantize (8-bit blockwise, nearest) on all of y (float32) -> int64."""
    return quantize(code, y, True, end_bounds=True)


def mean_offset(absmax):
    """float32(float64 sum / count), one rounding to float32; the summation order is checked
    not to matter for the result."""
    s = 0.0
    for v in absmax:
        s += float(v)
    off = F(s / absmax.size)
    assert off == F(math.fsum(float(v) for v in absmax) / absmax.size)
    assert off == F(np.sum(absmax.astype(np.float64)) / absmax.size)
    return off


def double_quantize(absmax, dmap):
    """-> (qabsmax codes, absmax2, offset, dequantized absmax)."""
    offset = mean_offset(absmax)
    d = absmax - offset
    absmax2 = block_absmax(d, DQ_BLOCKSIZE)
    r2 = F(1) / absmax2
    blk2 = np.arange(d.size) // DQ_BLOCKSIZE
    y = d * r2[blk2]
    assert d.dtype == F and r2.dtype == F and y.dtype == F
    q = dquantize(dmap, y)
    absmax_dq = (dmap[q] * absmax2[blk2]) + offset
    assert absmax_dq.dtype == F and type(offset) is F
    return q, absmax2, offset, absmax_dq


# ---------------------------------------------------------------------------- rounding


def to_bf16(v):
    """float32 -> bf16 (round to nearest even on the bits) -> float32."""
    assert v.dtype == F and np.all(np.isfinite(v))
    u = v.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return (u & 0xFFFFFFFF).astype(np.uint32).view(F)


def to_f16(v):
    assert v.dtype == F
    return v.astype(np.float16).astype(F)


def bits_per_param(n, blocksize, double_quant):
    blocks = -(-n // blocksize)
    nbytes = -(-n // 2)
    if double_quant:
        nbytes += blocks + 4 * -(-blocks // DQ_BLOCKSIZE) + 4
    else:
        nbytes += 4 * blocks
    return nbytes * 8 / n


# ---------------------------------------------------------------------------- the cases


def neighbours(v):
    v = np.asarray(v, dtype=F)
    return np.concatenate([v, np.nextafter(v, F(np.inf)), np.nextafter(v, F(-np.inf))])


def nf4_threshold_block(t):
    """64 values of absmax exactly 1.0: every NF4 code value, every threshold and both its
    float32 neighbours, -0.0 and two tiny values."""
    tiny = np.array([-0.0, 1e-30, -1e-30], dtype=F)
    block = np.concatenate([NF4_CODES, neighbours(t), tiny])
    assert block.size == 64 and block.dtype == F and np.max(np.abs(block)) == F(1)
    return block


def fp4_threshold_block():
    """60 values of absmax exactly 1.0: +- every FP4 tree constant and its float32
    neighbours, +- every FP4 magnitude (0 and -0 among them), two tiny values."""
    c = np.array(list(FP4_T.values()), dtype=F)
    block = np.concatenate([neighbours(c), -neighbours(c), FP4_MAGNITUDES, -FP4_MAGNITUDES,
                            np.array([1e-6, -1e-6], dtype=F)])
    assert block.size == 60 and block.dtype == F and np.max(np.abs(block)) == F(1)
    return block


def make_cases(t):
    rng = np.random.default_rng(SEED)
    normal = lambda n: rng.standard_normal(n, dtype=F)
    cube = lambda n: (lambda z: z * z * z)(normal(n))

    def scaled(n, blocksize):  # N(0,1) times a per-block power of two between 1/4 and 4
        blocks = -(-n // blocksize)
        scale = np.exp2(rng.integers(-2, 3, size=blocks)).astype(F)
        return normal(n) * scale[np.arange(n) // blocksize]

    def zeroed(a, blocksize, *blocks):
        a = a.copy()
        for b in blocks:
            a[b * blocksize:(b + 1) * blocksize] = 0
        return a

    nf4_block = nf4_threshold_block(t)
    cases = [
        ("nf4", 64, False, np.concatenate([nf4_block, (F(2) * nf4_block)[::-1]]),
         "on-threshold: block 0 every NF4 code, threshold t_k and its float32 neighbours "
         "(absmax exactly 1, x = a); block 1 the same times 2, reversed (absmax 2, r 0.5)"),
        ("fp4", 64, False, fp4_threshold_block(),
         "on-threshold: +- every FP4 tree constant and its float32 neighbours, +- every FP4 "
         "magnitude, absmax exactly 1; one partial block"),
        ("nf4", 64, False, normal(1024), "N(0,1), 16 full blocks"),
        ("fp4", 64, False, normal(1024), "N(0,1), 16 full blocks"),
        ("nf4", 128, False, zeroed(cube(717), 128, 2),
         "N(0,1)^3, odd n, partial last block (77), block 2 all zeros"),
        ("fp4", 32, False, zeroed(normal(233), 32, 3, 7),
         "N(0,1), odd n, block 3 and the partial last block (9 values) all zeros: "
         "the padding nibble is NaN -> 0"),
        ("nf4", 32, False, zeroed(cube(197), 32, 6),
         "N(0,1)^3, odd n, partial last block (5 values) all zeros: the padding nibble is "
         "NaN -> 0 (not 7)"),
        ("nf4", 4096, False, normal(4397), "N(0,1), odd n, one full block and 301 values"),
        ("fp4", 4096, False, cube(2500), "N(0,1)^3, one partial block"),
        ("nf4", 32, True, zeroed(scaled(9617, 32), 32, 5),
         "N(0,1) times per-block powers of two (1/4 to 4), double quant: 301 blocks (the "
         "last 17 values, odd n) -> absmax 256-blocks of 256 and 45; block 5 all zeros"),
        ("fp4", 32, True, cube(8640) * F(0.25),
         "N(0,1)^3 / 4, double quant: 270 full blocks -> absmax 256-blocks of 256 and 14"),
    ]
    for q, b, dq, a, what in cases:
        assert a.dtype == F and a.ndim == 1 and q in ("nf4", "fp4") and b in BLOCKSIZES
    return cases


def run_case(c, case, t, t_c, dmap, tensors):
    quant_type, blocksize, dq, a, what = case
    n = a.size
    codes, pad, absmax, x = quantize_4bit(a, blocksize, quant_type, t)
    differ = []
    if quant_type == "nf4":  # where the kernel's C-literal thresholds would code differently
        codes_c = np.sum(x[:, None] > t_c[None, :], axis=1)
        differ = [int(i) for i in np.nonzero(codes_c != codes)[0]]
    packed = pack_nibbles(codes, pad)
    tensors[f"case.{c}.input"] = a
    tensors[f"case.{c}.packed"] = pack_bytes(packed)
    tensors[f"case.{c}.absmax"] = absmax
    scale = absmax
    if dq:
        q, absmax2, offset, scale = double_quantize(absmax, dmap)
        assert absmax.size > DQ_BLOCKSIZE
        tensors[f"case.{c}.qabsmax"] = pack_bytes(q)
        tensors[f"case.{c}.absmax2"] = absmax2
        tensors[f"case.{c}.offset"] = np.array(offset, dtype=F)
        tensors[f"case.{c}.absmax_dq"] = scale
    deq = code_values(quant_type, codes) * scale[np.arange(n) // blocksize]
    assert deq.dtype == F
    tensors[f"case.{c}.dequant_f32"] = deq
    tensors[f"case.{c}.dequant_bf16"] = to_bf16(deq)
    tensors[f"case.{c}.dequant_f16"] = to_f16(deq)
    # unpacking the stored bytes gives back the codes (high nibble first)
    unpacked = np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)[:n]
    assert np.array_equal(unpacked, codes)
    meta = {"quant_type": quant_type, "blocksize": blocksize, "n": n, "double_quant": dq,
            "what": what}
    if differ:
        meta["c_literal_code_differs"] = differ
    return meta, codes, packed, pad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    t = nf4_thresholds()
    bad, t_c = check_thresholds(t)
    if bad:
        raise SystemExit("NF4 thresholds differ from bitsandbytes' literals:\n  "
                         + "\n  ".join(bad))
    print("nf4 thresholds: all 15 equal bitsandbytes' literals as np.float32 bit for bit; "
          "as C float literals t_" + ", t_".join(
              f"{k} {float(t_c[k]).hex()} (midpoint {float(t[k]).hex()})"
              for k in NF4_C_LITERAL_DIFFER) + " differ by one ulp")

    dmap = dynamic_map(True)
    assert dmap.dtype == F and dmap.shape == (256,)
    bpp = {"double_quant": bits_per_param(2 ** 20, 64, True),
           "plain": bits_per_param(2 ** 20, 64, False)}
    assert abs(bpp["double_quant"] - 4.127) < 5e-4 and bpp["plain"] == 4.5
    print(f"bits per parameter (2**20 values, blocksize 64): double quant "
          f"{bpp['double_quant']:.6f}, plain {bpp['plain']}")

    tensors = {"nf4.codes": NF4_CODES, "nf4.thresholds": t}
    metas = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for c, case in enumerate(make_cases(t)):
            meta, codes, packed, pad = run_case(c, case, t, t_c, dmap, tensors)
            metas.append(meta)
            print(f"case {c}: {meta['quant_type']} blocksize {meta['blocksize']} n {meta['n']}"
                  f"{' dq' if meta['double_quant'] else ''}; first bytes "
                  f"{bytes(packed[:4].astype(np.uint8)).hex()}"
                  f"{'' if pad is None else f', pad nibble {pad}'}"
                  + (f"; C-literal thresholds would code {meta['c_literal_code_differs']} "
                     "differently" if "c_literal_code_differs" in meta else ""))
    for name, a in tensors.items():
        assert a.dtype in (F, np.int64), name
    meta = {
        "cases": metas,
        "nf4_codes": [float(v) for v in NF4_CODES],
        "nf4_thresholds": [float(v) for v in t],
        "nf4_thresholds_c_literal": [float(v) for v in t_c],
        "fp4_magnitudes": [float(v) for v in FP4_MAGNITUDES],
        "fp4_thresholds": {k: float(v) for k, v in FP4_T.items()},
        "dq_blocksize": DQ_BLOCKSIZE,
        "bits_per_param": bpp,
        "seed": SEED,
    }
    path = os.path.join(args.out, "nf4_quant.gtb")
    write_gtb(path, tensors, meta)
    print(f"nf4_quant: {len(tensors)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
