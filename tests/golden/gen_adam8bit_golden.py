#!/usr/bin/python3
"""Golden data for fitgrad's 8-bit Adam: bitsandbytes' blockwise 8-bit AdamW, bit for bit.

How to run (standard library and NumPy only; torch is optional, see "The maps"; CI does NOT
run this, it only reads the committed output):

    /usr/bin/python3 tests/golden/gen_adam8bit_golden.py            # rewrites tests/golden/optim_adam8bit.gtb
    /usr/bin/python3 tests/golden/gen_adam8bit_golden.py --out DIR  # writes elsewhere (to compare)

The file uses the .gtb format of tests/golden/golden_file.h, written by gtb_numpy.write_gtb
(floats as f32, integers as i64); the output is deterministic (fixed seed, sorted JSON keys).

What is computed, written here from the published description of bitsandbytes' CUDA kernels
(kOptimizerStatic8bit2StateBlockwise for tensors of >= 4096 elements, the 32-bit
kOptimizer32bit2State Adam for smaller ones), every operation in IEEE float32 with one
rounding each, in the order the C++ implementation uses (no fused multiply-add):

  * The maps: bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7, total_bits=8).
    For i in 0..6, n = 2**i + 1 (signed) or 2**(i+1) + 1 (unsigned) boundaries
    torch.linspace(0.1, 1, n) in float32, their midpoints (b[:-1] + b[1:]) / 2 in float32,
    each multiplied in float32 by float32(10 ** (i - 6)) (bitsandbytes multiplies the torch
    tensor by the Python number, so torch rounds the number to float32 and multiplies in
    float32), plus the negated products for the signed map; then 0 and 1, sorted.
    torch.linspace's float32 values are those of torch 1.13's CPU kernel as Debian's
    python3-torch runs it (AVX2): step = float32((end - start) / (n - 1)); elements in pairs of
    8-wide vectors while 16 remain, each vector's first element start + step*j (or
    end - step*(n-1-j) once j >= n//2) as ONE rounding (the compiled kernel contracts it to a
    fused multiply-add), the vector's others that base + float32(i*step) (two roundings); the
    remaining tail elements one rounding each like the vector bases. A plain
    start + step*j with two roundings differs in 1 ulp at dozens of places, so the
    emulation is spelled out (torch_linspace_f32). If torch imports, the maps are also built
    the bitsandbytes way with torch and must agree bit for bit (on a torch build other
    than 1.13/AVX2 a disagreement is only reported: the NumPy maps are the reference).
  * Quantization of x (a state value divided by its block's absmax) to a code: bitsandbytes'
    quantize_2D binary search (quantize below), NaN going to code 0; for the signed map the
    code is then stepped by one (uint8 wrap-around) when its sign bit differs from the state's.
  * 8-bit tensors: state1/state2 uint8 codes into the signed/unsigned map, one absmax each per
    block of 256 consecutive flattened elements (the last block partial), all zero before the
    first step. Per step t (the parameter's own count): c1 = f32(1 - beta1**t) and
    c2 = f32(sqrt(1 - beta2**t)) in float64 rounded once, step_size = f32(-lr*c2) / c1,
    eps_c2 = eps*c2; s2 = code2[state2]*absmax2, s2 = s2*beta2 + ((1-beta2)*g)*g,
    s1 = code1[state1]*absmax1, s1 = s1*beta1 + (1-beta1)*g; the new absmaxes are the blocks'
    max |s|; p = p + step_size*(s1/(sqrt(s2) + eps_c2)), then p = p*(1 - lr*wd) when wd > 0;
    the states are requantized from s/absmax (0/0 = NaN -> code 0 before the sign fix).
  * Small tensors (< 4096 elements): float32 state, s2 = s2*beta2 + (1-beta2)*(g*g) (g*g
    first), otherwise the same update.
  * fitgrad's rule for non-finite gradients: a parameter whose gradient holds an inf or nan
    at a step is left entirely untouched (parameter, codes, absmaxes, its step count), as if
    it had no gradient. (bitsandbytes' kernel instead zeroes the states of those elements.)

The case, optim_adam8bit.gtb (read by the C++ 8-bit Adam golden test):
  parameters "w" (45, 116) = 5220 elements (21 blocks, the last 100 values), "v" (64, 80) =
  5120 (20 blocks), "small" (30, 40) and "b" (100,) (both on the float32 path); group 0
  [w, v, small] weight decay 0.01, group 1 [b] weight decay 0; betas (0.9, 0.999), eps 1e-8,
  20 steps with lr 1e-3*(1 - k/40) at step k (meta "lr"); initial values N(0,1)*0.1 and
  gradients N(0,1)*GRAD_SCALES[k], all float32. Step 0: block 1 of "v" (flattened elements
  256..511) has a zero gradient (its absmax is 0 after the step); step 2: one zero element
  in "w"; step 4: "b" has no gradient; step 7: "w"'s gradient holds a +inf and "small"'s a
  nan (both untouched that step).
  Tensors: "map.signed", "map.unsigned" (f32 (256,)); "init.<p>"; "grad.<k>.<p>" (absent
  where skipped; inf/nan stored as they are); after each step k for every parameter
  "param.<k>.<p>", and "state1.<k>.<p>", "state2.<k>.<p>" (8-bit ones: the uint8 codes
  packed eight per i64, shape (ceil(numel / 8),), see gtb_numpy.pack_bytes; float32 ones: f32 of the parameter's shape), "absmax1.<k>.<p>",
  "absmax2.<k>.<p>" (8-bit ones: f32 (blocks,)); the final "<p>.step" (i64, 0-d).
  meta: steps, params, groups, lr, betas, eps, blocksize, min_8bit_size, skip, nonfinite,
  grad_scales, seed, map (how the maps were made), f64_unquantized_rel_diff (normwise
  distance of the final "w" from the same run in float64 with unquantized state, relative
  to that run's "w") and f64_unquantized_rel_diff_update (the same distance relative to
  that run's total change of "w").
"""

import argparse
import math
import os
from fractions import Fraction

import numpy as np

from gtb_numpy import pack_bytes, write_gtb

F = np.float32
BLOCKSIZE = 256
MIN_8BIT_SIZE = 4096
SHAPES = {"w": (45, 116), "v": (64, 80), "small": (30, 40), "b": (100,)}
GROUPS = [(["w", "v", "small"], 0.01), (["b"], 0.0)]
STEPS = 20
LRS = [1e-3 * (1 - k / 40) for k in range(STEPS)]
BETAS = (0.9, 0.999)
EPS = 1e-8
GRAD_SCALES = [0.02, 1.0, 0.1, 0.003, 0.5, 0.05, 0.001, 0.2, 0.8, 0.01,
               0.3, 0.002, 0.6, 0.04, 1.0, 0.005, 0.15, 0.07, 0.4, 0.001]
SEED = 2408
SKIP = (4, "b")                                     # (step, parameter) without a gradient
ZERO_BLOCK = (0, "v", 256, 512)                     # step, parameter, flat [begin, end)
ZERO_ELEMENT = (2, "w", 1234)                       # step, parameter, flat index
NONFINITE = (7, {"w": (777, np.inf), "small": (555, np.nan)})  # flat index, value


# ---------------------------------------------------------------------------- the maps


def _fma_f32(a, b, c):
    """float32(a*b + c) rounded once: exact in float64 for the operands used here (checked)."""
    d = float(a) * float(b) + float(c)
    assert Fraction(d) == Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    return F(d)


def torch_linspace_f32(start, end, n, vec=8):
    """torch.linspace(start, end, n) in float32 as torch 1.13's CPU kernel computes it (AVX2)."""
    start, end = F(start), F(end)
    step = F(F(end - start) / F(n - 1))
    half = n // 2
    out = np.empty(n, dtype=F)

    def one(j):  # start + step*j or end - step*(n-1-j), contracted to one rounding
        return _fma_f32(step, F(j), start) if j < half else _fma_f32(-step, F(n - 1 - j), end)

    j = 0
    while j <= n - 2 * vec:  # the vectorized loop: two vectors at a time
        for _ in range(2):
            base = one(j)
            for i in range(vec):
                out[j + i] = base + F(F(i) * step)
            j += vec
    for j in range(j, n):
        out[j] = one(j)
    assert out.dtype == F
    return out


def dynamic_map(signed):
    """bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7, total_bits=8), float32."""
    data = []
    for i in range(7):
        n = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
        b = torch_linspace_f32(0.1, 1.0, n)
        means = (b[:-1] + b[1:]) / F(2.0)
        scale = F(10 ** (-(7 - 1) + i))  # the Python number as torch's float32 operand
        data.append(scale * means)
        if signed:
            data.append(F(-scale) * means)
    data.append(np.array([0.0, 1.0], dtype=F))
    code = np.sort(np.concatenate(data))
    assert code.dtype == F and code.shape == (256,)
    return code


def torch_dynamic_maps():
    """The maps built with torch the way bitsandbytes builds them, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    maps = []
    for signed in (True, False):
        data = []
        for i in range(7):
            n = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
            b = torch.linspace(0.1, 1, n, dtype=torch.float32)
            means = (b[:-1] + b[1:]) / 2.0
            data += ((10 ** (-(7 - 1) + i)) * means).tolist()
            if signed:
                data += (-(10 ** (-(7 - 1) + i)) * means).tolist()
        data.append(0)
        data.append(1.0)
        assert len(data) == 256
        data.sort()
        maps.append(torch.tensor(data, dtype=torch.float32).numpy())
    capability = next((line.split(":")[1].strip() for line in torch.__config__.show().splitlines()
                       if "CPU capability usage" in line), "?")
    return maps, f"torch {torch.__version__}, CPU capability {capability}"


def check_maps(signed, unsigned):
    assert abs(signed[0] - -0.99297) < 1e-5 and signed[127] == 0 and signed[255] == 1
    assert signed[126] < 0 < signed[128] and not np.signbit(signed[127])
    assert unsigned[0] == 0 and abs(unsigned[1] - 3.25e-7) < 1e-9
    assert abs(unsigned[254] - 0.99648) < 1e-5 and unsigned[255] == 1
    assert np.all(np.diff(signed) > 0) and np.all(np.diff(unsigned) > 0)
    got = torch_dynamic_maps()
    if got is None:
        print("maps: torch not importable, not cross-checked")
        return
    (t_signed, t_unsigned), build = got
    bad = []
    for name, ours, theirs in (("signed", signed, t_signed), ("unsigned", unsigned, t_unsigned)):
        for i in np.nonzero(ours.view(np.int32) != theirs.view(np.int32))[0]:
            ulps = int(theirs.view(np.int32)[i]) - int(ours.view(np.int32)[i])
            bad.append(f"{name}[{i}]: ours {float(ours[i]).hex()} torch {float(theirs[i]).hex()}"
                       f" ({ulps:+d} ulp)")
    if not bad:
        print(f"maps: equal bit for bit to bitsandbytes' construction with {build}")
        return
    message = f"maps differ from {build} at {len(bad)} places:\n  " + "\n  ".join(bad)
    if build.startswith("torch 1.13") and build.endswith("AVX2"):
        raise SystemExit(message)
    print("WARNING (a torch build the emulation does not describe; the NumPy maps stand): "
          + message)


# ---------------------------------------------------------------------------- quantization


def quantize(code, x, signed, end_bounds=False):
    """bitsandbytes' quantize_2D binary search, on all of x (float32) at once -> int64 codes.
    end_bounds: the variant of its 8-bit blockwise quantizer (dQuantize), which replaces the
    search's initial bounds -1 (or 0) and 1 by code[0] and code[255] when it never moved off
    them."""
    assert code.dtype == F and x.dtype == F
    pivot = np.full(x.shape, 127, dtype=np.int64)
    upper_pivot = np.full(x.shape, 255, dtype=np.int64)
    lower_pivot = np.zeros(x.shape, dtype=np.int64)
    lower = np.full(x.shape, -1.0 if signed else 0.0, dtype=F)
    upper = np.ones(x.shape, dtype=F)
    for step in (64, 32, 16, 8, 4, 2, 1):
        val = code[pivot]
        gt = x > val  # False for NaN: it goes down every time
        lower_pivot = np.where(gt, pivot, lower_pivot)
        lower = np.where(gt, val, lower)
        upper_pivot = np.where(gt, upper_pivot, pivot)
        upper = np.where(gt, upper, val)
        pivot = np.where(gt, pivot + step, pivot - step)
    val = code[pivot]
    gt = x > val
    if end_bounds:
        upper = np.where(upper_pivot == 255, code[255], upper)
        lower = np.where(lower_pivot == 0, code[0], lower)
    mid_up = (upper + val) * F(0.5)
    mid_low = (lower + val) * F(0.5)
    assert mid_up.dtype == F and mid_low.dtype == F
    return np.where(gt, np.where(x > mid_up, upper_pivot, pivot),
                    np.where(x < mid_low, lower_pivot, pivot))


def quantize_signed(code, s, absmax_per_element):
    """State 1: quantize s/absmax, then keep the code's sign that of s (uint8 wrap-around)."""
    c = quantize(code, s / absmax_per_element, True)
    fix = np.signbit(code[c]) != np.signbit(s)
    c = np.where(fix, np.where(s > 0, c + 1, c - 1), c) % 256
    return c


# ---------------------------------------------------------------------------- the optimizer


class Scalars:
    """The per-step float32 constants of both kernels."""

    def __init__(self, lr, wd, t):
        self.lr, self.wd = F(lr), F(wd)
        self.beta1, self.beta2, self.eps = F(BETAS[0]), F(BETAS[1]), F(EPS)
        c1 = F(1.0 - float(self.beta1) ** t)
        c2 = F(math.sqrt(1.0 - float(self.beta2) ** t))
        self.step_size = F(F(-self.lr * c2) / c1)
        self.eps_c2 = F(self.eps * c2)
        self.omb1, self.omb2 = F(F(1) - self.beta1), F(F(1) - self.beta2)
        self.decay = F(F(1) - F(self.lr * self.wd))
        for v in vars(self).values():
            assert type(v) is F


def apply_update(p, s1, s2, k):
    out = p + k.step_size * (s1 / (np.sqrt(s2) + k.eps_c2))
    if k.wd > 0:
        out = out * k.decay
    assert out.dtype == F
    return out


def step_8bit(st, g, k, maps):
    """One kOptimizerStatic8bit2StateBlockwise step on the flattened state st (in place)."""
    signed, unsigned = maps
    g = g.reshape(-1)
    n = g.size
    blk = np.arange(n) // BLOCKSIZE
    starts = np.arange(0, n, BLOCKSIZE)
    s2 = unsigned[st["state2"]] * st["absmax2"][blk]
    s2 = s2 * k.beta2 + (k.omb2 * g) * g
    s1 = signed[st["state1"]] * st["absmax1"][blk]
    s1 = s1 * k.beta1 + k.omb1 * g
    absmax1 = np.maximum.reduceat(np.abs(s1), starts)
    absmax2 = np.maximum.reduceat(np.abs(s2), starts)
    st["p"] = apply_update(st["p"].reshape(-1), s1, s2, k).reshape(st["p"].shape)
    st["state1"] = quantize_signed(signed, s1, absmax1[blk])
    st["state2"] = quantize(unsigned, s2 / absmax2[blk], False)
    st["absmax1"], st["absmax2"] = absmax1, absmax2
    for name in ("absmax1", "absmax2"):
        assert st[name].dtype == F
    assert s1.dtype == F and s2.dtype == F


def step_32bit(st, g, k):
    """One kOptimizer32bit2State Adam step (in place)."""
    st["state1"] = st["state1"] * k.beta1 + k.omb1 * g
    st["state2"] = st["state2"] * k.beta2 + k.omb2 * (g * g)
    st["p"] = apply_update(st["p"], st["state1"], st["state2"], k)
    assert st["state1"].dtype == F and st["state2"].dtype == F


def make_data():
    rng = np.random.default_rng(SEED)
    init = {n: rng.standard_normal(s, dtype=F) * F(0.1) for n, s in SHAPES.items()}
    grads = []
    for k in range(STEPS):
        scale = F(GRAD_SCALES[k])
        gk = {n: rng.standard_normal(s, dtype=F) * scale for n, s in SHAPES.items()}
        if k == SKIP[0]:
            del gk[SKIP[1]]
        if k == ZERO_BLOCK[0]:
            gk[ZERO_BLOCK[1]].reshape(-1)[ZERO_BLOCK[2]:ZERO_BLOCK[3]] = 0
        if k == ZERO_ELEMENT[0]:
            gk[ZERO_ELEMENT[1]].reshape(-1)[ZERO_ELEMENT[2]] = 0
        if k == NONFINITE[0]:
            for n, (i, value) in NONFINITE[1].items():
                gk[n].reshape(-1)[i] = value
        grads.append(gk)
    for t in list(init.values()) + [g for gk in grads for g in gk.values()]:
        assert t.dtype == F
    return init, grads


def weight_decay_of(name):
    return next(wd for names, wd in GROUPS if name in names)


def run_8bit(init, grads, maps):
    states, out = {}, {}
    for n, p in init.items():
        st = {"p": p.copy(), "t": 0}
        if p.size >= MIN_8BIT_SIZE:
            blocks = -(-p.size // BLOCKSIZE)
            st.update(state1=np.zeros(p.size, dtype=np.int64), state2=np.zeros(p.size, dtype=np.int64),
                      absmax1=np.zeros(blocks, dtype=F), absmax2=np.zeros(blocks, dtype=F))
        else:
            st.update(state1=np.zeros(p.shape, dtype=F), state2=np.zeros(p.shape, dtype=F))
        states[n] = st
    for k in range(STEPS):
        for names, wd in GROUPS:
            for n in names:
                st, g = states[n], grads[k].get(n)
                if g is None or not np.all(np.isfinite(g)):
                    continue  # untouched, step count included
                st["t"] += 1
                scalars = Scalars(LRS[k], wd, st["t"])
                if "absmax1" in st:
                    step_8bit(st, g, scalars, maps)
                else:
                    step_32bit(st, g, scalars)
        for n, st in states.items():
            out[f"param.{k}.{n}"] = st["p"].copy()
            for key in ("state1", "state2", "absmax1", "absmax2"):
                if key in st:
                    value = st[key]
                    if "absmax1" in st and key.startswith("state"):
                        value = pack_bytes(value)
                    out[f"{key}.{k}.{n}"] = value.copy()
    for n, st in states.items():
        out[f"{n}.step"] = np.array(st["t"], dtype=np.int64)
    return out


def run_f64(init, grads):
    """The same schedule in float64 with unquantized state (AdamW, decay after the update)."""
    p = {n: v.astype(np.float64) for n, v in init.items()}
    m = {n: np.zeros(v.shape) for n, v in init.items()}
    v2 = {n: np.zeros(v.shape) for n, v in init.items()}
    t = {n: 0 for n in init}
    b1, b2 = BETAS
    for k in range(STEPS):
        for n in init:
            g = grads[k].get(n)
            if g is None or not np.all(np.isfinite(g)):
                continue
            g = g.astype(np.float64)
            t[n] += 1
            wd = weight_decay_of(n)
            m[n] = b1 * m[n] + (1 - b1) * g
            v2[n] = b2 * v2[n] + (1 - b2) * g * g
            c1, c2 = 1 - b1 ** t[n], math.sqrt(1 - b2 ** t[n])
            p[n] = p[n] + (-LRS[k] * c2 / c1) * (m[n] / (np.sqrt(v2[n]) + EPS * c2))
            p[n] = p[n] * (1 - LRS[k] * wd)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    maps = dynamic_map(True), dynamic_map(False)
    check_maps(*maps)
    init, grads = make_data()
    with np.errstate(invalid="ignore", divide="ignore"):
        result = run_8bit(init, grads, maps)
    ref = run_f64(init, grads)
    w8 = result[f"param.{STEPS - 1}.w"].astype(np.float64)
    rel = float(np.linalg.norm(w8 - ref["w"]) / np.linalg.norm(ref["w"]))
    rel_update = float(np.linalg.norm(w8 - ref["w"]) /
                       np.linalg.norm(ref["w"] - init["w"].astype(np.float64)))

    tensors = {"map.signed": maps[0], "map.unsigned": maps[1]}
    tensors.update({f"init.{n}": v for n, v in init.items()})
    for k in range(STEPS):
        tensors.update({f"grad.{k}.{n}": g for n, g in grads[k].items()})
    tensors.update(result)
    for name, a in tensors.items():
        assert a.dtype in (F, np.int64), name
    meta = {
        "steps": STEPS, "params": list(SHAPES),
        "groups": [{"params": names, "weight_decay": wd} for names, wd in GROUPS],
        "lr": LRS, "betas": list(BETAS), "eps": EPS, "blocksize": BLOCKSIZE,
        "min_8bit_size": MIN_8BIT_SIZE, "skip": {"step": SKIP[0], "param": SKIP[1]},
        "nonfinite": {"step": NONFINITE[0], "params": list(NONFINITE[1])},
        "grad_scales": GRAD_SCALES, "seed": SEED,
        "map": "bitsandbytes create_dynamic_map(max_exponent_bits=7, total_bits=8); "
               "torch 1.13 CPU (AVX2) linspace, float32 scalar multiply",
        "f64_unquantized_rel_diff": rel, "f64_unquantized_rel_diff_update": rel_update,
    }
    path = os.path.join(args.out, "optim_adam8bit.gtb")
    write_gtb(path, tensors, meta)
    steps = ", ".join(f"{n} {int(result[f'{n}.step'])}" for n in SHAPES)
    print(f"optim_adam8bit: {len(tensors)} tensors, steps {steps}; "
          f"vs float64 unquantized: {rel:.2e} of |w|, {rel_update:.2e} of its change")


if __name__ == "__main__":
    main()
