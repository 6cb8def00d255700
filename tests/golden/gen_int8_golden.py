#!/usr/bin/python3
"""Golden data for fitgrad's int8 weights: Q-GaLore's group quantization and its stochastic
re-quantization after an update.

How to run (standard library and NumPy only, /usr/bin/python3; CI does NOT run this, it only
reads the committed output):

    /usr/bin/python3 tests/golden/gen_int8_golden.py            # rewrites tests/golden/int8_quant.gtb
    /usr/bin/python3 tests/golden/gen_int8_golden.py --out DIR  # writes elsewhere (to compare)

The file uses the .gtb format of tests/golden/golden_file.h, written by gtb_numpy.write_gtb
(floats as f32, integers as i64: the u8 codes and zeros are stored one per i64 value); the
output is deterministic (fixed seed, sorted JSON keys).

What is computed, written here from Q-GaLore's published code (q_galore_torch/utils/
quantization.py, _quantize_tensor_int8, and q_galore_adamw8bit.py, _quantize_stochastic_round
and _dequantize), every operation in IEEE float32 with one rounding each (fitgrad keeps the
scale in f32 where the reference computes in the weight's dtype):

  * Groups: the weight flattened row-major and cut into groups of `group_size` consecutive
    values (group_size divides the count; reshape(-1, group_size)).
  * scale = max(max(w) - min(w), 1e-5) / 255; zero = clamp(-round(min(w) / scale), 0, 255);
    round is to nearest even (torch.round).
  * Nearest codes: clamp(round(w / scale) + zero, 0, 255).
  * Stochastic codes: r = w / scale; u = the uniform of Philox draw offset + i of `seed` for
    element i (Philox-4x32-10, counter (lo, hi of draw // 4, 0, 0), key (lo, hi of seed), lane
    draw % 4; uniform = (bits >> 8) * 2^-24); q = ceil(r) if u < r - floor(r) else floor(r);
    code = clamp(q + zero, 0, 255). The Philox block function is gen_apollo_golden.philox,
    checked there against Random123's known answers.
  * Dequantization: (code - zero) * scale in float32, also rounded to bf16 (nearest even).
  * The update case (draws from offset 0): w0 = dequantize(quantize_nearest(a)); one SGD step without momentum or
    weight decay, w1 = w0 - lr * g (float32: the product rounded, then the difference); then
    the stochastic codes of w1 with its recomputed scales and zeros. `margin` is |u - (r -
    floor(r))| per element, so a test can skip the few codes that a last-bit difference in
    w1 (a fused multiply-add) could flip.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_apollo_golden import philox, split  # noqa: E402
from gtb_numpy import write_gtb  # noqa: E402

F32 = np.float32


def uniform(seed, draw):
    bits = philox(split(draw // 4) + (0, 0), split(seed))[draw % 4]
    return F32((bits >> 8) * 2.0 ** -24)


def group_stats(w, group_size):
    g = w.reshape(-1, group_size)
    lo, hi = g.min(axis=1), g.max(axis=1)
    scale = (np.maximum(hi - lo, F32(1e-5)) / F32(255)).astype(F32)
    zero = np.clip(-np.rint(lo / scale), F32(0), F32(255)).astype(F32)
    assert scale.dtype == F32 and zero.dtype == F32
    return scale, zero


def quantize_nearest(w, group_size):
    scale, zero = group_stats(w, group_size)
    g = w.reshape(-1, group_size)
    codes = np.clip(np.rint(g / scale[:, None]) + zero[:, None], F32(0), F32(255))
    return codes.reshape(-1).astype(np.int64), scale, zero


def quantize_stochastic(w, group_size, seed, offset):
    scale, zero = group_stats(w, group_size)
    flat = w.reshape(-1)
    r = (flat.reshape(-1, group_size) / scale[:, None]).astype(F32).reshape(-1)
    u = np.array([uniform(seed, offset + i) for i in range(flat.size)], dtype=F32)
    down = np.floor(r)
    frac = (r - down).astype(F32)
    q = np.where(u < frac, np.ceil(r), down).astype(F32)
    codes = np.clip(q.reshape(-1, group_size) + zero[:, None], F32(0), F32(255))
    return codes.reshape(-1).astype(np.int64), scale, zero, np.abs(u - frac).astype(F32)


def dequantize(codes, scale, zero, group_size):
    c = codes.astype(F32).reshape(-1, group_size)
    return ((c - zero[:, None]) * scale[:, None]).astype(F32).reshape(-1)


def to_bf16(x):
    b = x.astype(F32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return (b << 16).astype(np.uint32).view(F32)


def cases(rng):
    out = []
    normal = rng.normal(0, 0.02, (8, 64)).astype(F32)
    out.append(("normal_g32", normal, 32))
    out.append(("normal_g256", rng.normal(0, 0.02, (4, 128)).astype(F32), 256))
    # Groups: constant (the 1e-5 floor), all positive (zero clamped to 0, codes clamped at
    # 255), all negative, one group of the whole tensor with a large outlier.
    edge = np.concatenate([
        np.full(16, 0.125, F32),
        (rng.uniform(0.5, 1.0, 16) + 3).astype(F32),
        (rng.uniform(-1.0, -0.5, 16)).astype(F32),
        np.concatenate([rng.normal(0, 0.01, 15), [0.9]]).astype(F32),
    ]).reshape(4, 16)
    out.append(("edges_g16", edge, 16))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    rng = np.random.default_rng(20261203)
    # The update draws from offset 0: an optimizer's stream starts there.
    tensors, meta = {}, {"cases": [], "seed": 1234, "offset": 40, "update_offset": 0, "lr": 0.01}
    for name, a, gs in cases(rng):
        codes, scale, zero = quantize_nearest(a, gs)
        w0 = dequantize(codes, scale, zero, gs)
        tensors[f"{name}.input"] = a
        tensors[f"{name}.codes"] = codes.reshape(a.shape)
        tensors[f"{name}.scales"] = scale
        tensors[f"{name}.zeros"] = zero.astype(np.int64)
        tensors[f"{name}.dequant_f32"] = w0.reshape(a.shape)
        tensors[f"{name}.dequant_bf16"] = to_bf16(w0).reshape(a.shape)
        sc, ss, sz, _ = quantize_stochastic(a, gs, meta["seed"], meta["offset"])
        tensors[f"{name}.sr_codes"] = sc.reshape(a.shape)
        assert np.array_equal(ss, scale) and np.array_equal(sz, zero)
        g = rng.normal(0, 1.0, a.shape).astype(F32)
        w1 = (w0.reshape(a.shape) - (F32(meta["lr"]) * g).astype(F32)).astype(F32)
        uc, us, uz, margin = quantize_stochastic(w1, gs, meta["seed"], meta["update_offset"])
        tensors[f"{name}.grad"] = g
        tensors[f"{name}.update_codes"] = uc.reshape(a.shape)
        tensors[f"{name}.update_scales"] = us
        tensors[f"{name}.update_zeros"] = uz.astype(np.int64)
        tensors[f"{name}.update_margin"] = margin.reshape(a.shape)
        meta["cases"].append({"name": name, "group_size": gs, "shape": list(a.shape)})
    write_gtb(os.path.join(args.out, "int8_quant.gtb"), tensors, meta)


if __name__ == "__main__":
    main()
