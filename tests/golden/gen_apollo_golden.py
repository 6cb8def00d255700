#!/usr/bin/python3
"""NumPy golden data for fitgrad's APOLLO and APOLLO-Mini (optim/apollo.h): 12-step trajectories.

How to run (standard library and NumPy only; CI does NOT run this, it only reads the committed
outputs):

    /usr/bin/python3 tests/golden/gen_apollo_golden.py            # rewrites tests/golden/optim_apollo*.gtb
    /usr/bin/python3 tests/golden/gen_apollo_golden.py --out DIR  # writes elsewhere (to compare)

With --check-reference DIR it also runs both cases through the authors' own optimizer
(apollo_torch.APOLLOAdamW of github zhuhanqing/APOLLO, checked out at DIR) in float64 torch,
fed the same projection matrices, and prints the largest differences; it needs torch
(Debian's python3-torch 1.13 will do). transformers, which apollo_torch imports for one
version check, is stubbed out.

The algorithm is written out below from the paper (Zhu et al. 2024, "APOLLO: SGD-like
Memory, AdamW-level Performance", arXiv 2412.05270, Algorithm 1) with the reference
implementation's published choices, which the paper leaves open:
  * a matrix G (m, n) is projected on its smaller side: m >= n: R = G P^T with P (r, n)
    ("right"), else R = P G with P (r, m) ("left"; the reference's P is the transpose);
    P has N(0, 1/r) entries and is drawn afresh at the parameter's own steps 1, T + 1,
    2T + 1, ... (T = update_proj_gap);
  * Adam moments on R with the bias correction folded into the step size:
    m = b1 m + (1 - b1) R, v = b2 v + (1 - b2) R^2, N = m / (sqrt(v) + eps),
    step = lr sqrt(1 - b2^t) / (1 - b1^t);
  * the scaling factor: channel-wise s_c = ||N_c|| / (||R_c|| + 1e-8) over the rank index,
    one per row of G when m >= n and one per column when m < n; tensor-wise (APOLLO-Mini)
    s = ||N|| / (||R|| + 1e-8);
  * the norm-growth limiter (Fira's, gamma 1.01) on S = G s: from the parameter's second
    step on, S = S / l with l = max(||S|| / (prev + 1e-8), gamma) / gamma and prev = ||S|| / l
    (prev = ||S|| at its first step);
  * p = p - step sqrt(scale) S, then p = p - lr wd p (decoupled decay after the update);
  * every parameter not projected (not 2-D, or not named by the target modules) takes the
    same class's plain Adam: p = p - step m / (sqrt(v) + eps), then the same decay.

The projection matrices come from fitgrad's documented generator (Note [APOLLO projections]
in optim/apollo.h), written out below independently of fitgrad's C++: Philox-4x32-10
(checked against the Random123 known-answer vectors), a key per (parameter index, refresh)
drawn from the counter (lo32(k), hi32(k), index, 0x41504F4C) under the run's seed, and
Box-Muller normals of that key's draws 0, 1, 2, ... scaled by 1/sqrt(r), each computed in
double and rounded to float32, filling P (r, k) row by row. The file stores them too
("proj.<p>.<k>"), so the C++ test checks the generator and the update separately.

Every file has the same layout. Parameters in two groups: group 0 (weight decay 0.1) =
"h.attn.w_tall" (12, 6) (projected on the right: channels are its 12 rows), "h.mlp.w_wide"
(5, 9) (projected on the left: channels are its 9 columns), "wte.weight" (7, 4) (2-D but
not a target: plain Adam); group 1 (weight decay 0) = "h.attn.bias" (6,) (a target's, but
1-D: plain Adam). The target modules are "attn" and "mlp" (substrings of the name without
its last component), rank per file, update_proj_gap 4, so P is redrawn at steps 1, 5 and
9. 12 steps; the gradients are N(0, 1) times a per-step scale (GRAD_SCALES) that jumps, so
the limiter acts at some steps and not at others; "h.mlp.w_wide" has no gradient at step 2,
so its own step count (and its refreshes) lag by one from then on. lr per step
LR * 0.9**k.
Tensors:
  * "init.<p>", "grad.<k>.<p>" (absent where skipped), "param.<k>.<p>" after step k;
  * "proj.<p>.<j>": the projection of refresh j, float32 (r, k);
  * "<p>.exp_avg", "<p>.exp_avg_sq" (R's shape for a projected parameter),
    "<p>.scaled_grad_norm" (0-d, projected only), "<p>.step" (i64, 0-d): the final state.
Meta: "optimizer", "steps", "params", "groups", "skip", "grad_scales", "lr", the
hyperparameters, "seed", "projected" (name -> "right" | "left"), "keys" (name -> the
Philox keys of its refreshes), "limited" (the steps where the limiter scaled each
parameter down), and "f32_err": the largest normwise error of the same code run in
float32 arrays against the stored float64 run, the yardstick for the C++ tolerance.
"""

import argparse
import math
import os
import sys

import numpy as np

from gtb_numpy import write_gtb

# ------------------------------------------------------------------ Philox-4x32-10

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF
APOLLO_TAG = 0x41504F4C  # "APOL": counter word 3 of the key derivation


def philox(ctr, key):
    """The Philox-4x32 block function with 10 rounds (Salmon et al. 2011)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for rnd in range(10):
        if rnd > 0:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK, p1 & MASK, ((p0 >> 32) ^ c3 ^ k1) & MASK, \
            p0 & MASK
    return c0, c1, c2, c3


KNOWN_ANSWERS = [  # Random123's kat_vectors for philox4x32_10
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK, MASK, MASK, MASK), (MASK, MASK), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def split(x):
    return x & MASK, (x >> 32) & MASK


def projection_key(seed, index, refresh):
    """The Philox key of parameter `index`'s projection at refresh `refresh`."""
    lo, hi = split(refresh)
    b = philox((lo, hi, index, APOLLO_TAG), split(seed))
    return b[0] | (b[1] << 32)


def uniform(key, draw):
    """Draw `draw` of `key` as a uniform in [0, 1): its top 24 bits times 2^-24."""
    bits = philox(split(draw // 4) + (0, 0), split(key))[draw % 4]
    return (bits >> 8) * 2.0 ** -24


def normals(key, count, std):
    """`count` float32 Box-Muller normals times std from key's draws 0, 1, ...: draws 2j and
    2j + 1 give element 2j (cosine) and 2j + 1 (sine), each computed in double."""
    out = np.empty(count, dtype=np.float32)
    for j in range(0, count, 2):
        u0, u1 = uniform(key, j), uniform(key, j + 1)
        radius = math.sqrt(-2.0 * math.log(1.0 - u0))
        angle = 2.0 * math.pi * u1
        out[j] = np.float32(std * radius * math.cos(angle))
        if j + 1 < count:
            out[j + 1] = np.float32(std * radius * math.sin(angle))
    return out


def projection(seed, index, refresh, rank, side):
    """P (rank, side), float32, N(0, 1 / rank)."""
    key = projection_key(seed, index, refresh)
    return normals(key, rank * side, 1.0 / math.sqrt(rank)).reshape(rank, side), key


# ------------------------------------------------------------------ the data

PARAMS = [("h.attn.w_tall", (12, 6)), ("h.mlp.w_wide", (5, 9)), ("wte.weight", (7, 4)),
          ("h.attn.bias", (6,))]
GROUPS = [(["h.attn.w_tall", "h.mlp.w_wide", "wte.weight"], 0.1), (["h.attn.bias"], 0.0)]
TARGETS = ["attn", "mlp"]
STEPS = 12
SKIP = (2, "h.mlp.w_wide")
GRAD_SCALES = [1.0, 0.5, 2.0, 3.5, 0.2, 1.0, 6.0, 0.1, 0.3, 2.5, 0.05, 1.5]
LR = 1e-2
GAP = 4
SEED = 1234
HP = {"betas": [0.9, 0.999], "eps": 1e-6, "norm_growth_limit": 1.01, "update_proj_gap": GAP,
      "target_modules": TARGETS}


def projected_side(name, shape):
    """"right", "left" or None: how the optimizer treats the parameter."""
    module = name.rsplit(".", 1)[0]
    if len(shape) != 2 or not any(t in module for t in TARGETS):
        return None
    return "right" if shape[0] >= shape[1] else "left"


def make_data(seed):
    rng = np.random.default_rng(seed)
    init = {n: rng.standard_normal(s, dtype=np.float32) * np.float32(0.5) for n, s in PARAMS}
    grads = []
    for k in range(STEPS):
        step = {}
        for n, s in PARAMS:
            g = rng.standard_normal(s, dtype=np.float32) * np.float32(GRAD_SCALES[k])
            if (k, n) != SKIP:
                step[n] = g
        grads.append(step)
    return init, grads


# ------------------------------------------------------------------ one step


def norm(x, axis=None):
    return np.sqrt(np.sum(x * x, axis=axis))


def apollo_step(p, g, st, t, lr, wd, hp, proj):
    """One APOLLO step of a projected parameter; proj (r, k) is the current projection."""
    b1, b2 = hp["betas"]
    right = p.shape[0] >= p.shape[1]
    P = proj.astype(p.dtype)
    R = g @ P.T if right else P @ g
    if not st:
        st["exp_avg"] = np.zeros_like(R)
        st["exp_avg_sq"] = np.zeros_like(R)
    st["exp_avg"] = b1 * st["exp_avg"] + (1.0 - b1) * R
    st["exp_avg_sq"] = b2 * st["exp_avg_sq"] + (1.0 - b2) * R * R
    N = st["exp_avg"] / (np.sqrt(st["exp_avg_sq"]) + hp["eps"])
    step = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
    if hp["scale_type"] == "channel":
        axis = 1 if right else 0  # over the rank index
        s = norm(N, axis) / (norm(R, axis) + 1e-8)
        S = g * (s[:, None] if right else s[None, :])
    else:
        S = g * (norm(N) / (norm(R) + 1e-8))
    limited = False
    gamma = hp["norm_growth_limit"]
    if "scaled_grad_norm" in st:
        n = norm(S)
        limiter = max(n / (st["scaled_grad_norm"] + 1e-8), gamma) / gamma
        limited = limiter > 1.0
        S = S / limiter
        st["scaled_grad_norm"] = np.asarray(n / limiter, dtype=p.dtype)
    else:
        st["scaled_grad_norm"] = np.asarray(norm(S), dtype=p.dtype)
    p = p - step * (S * math.sqrt(hp["scale"]))
    if wd > 0:
        p = p - lr * wd * p
    return p, limited


def adam_step(p, g, st, t, lr, wd, hp):
    """The reference class's plain step, for every parameter it does not project."""
    b1, b2 = hp["betas"]
    if not st:
        st["exp_avg"] = np.zeros_like(p)
        st["exp_avg_sq"] = np.zeros_like(p)
    st["exp_avg"] = b1 * st["exp_avg"] + (1.0 - b1) * g
    st["exp_avg_sq"] = b2 * st["exp_avg_sq"] + (1.0 - b2) * g * g
    step = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
    p = p - step * (st["exp_avg"] / (np.sqrt(st["exp_avg_sq"]) + hp["eps"]))
    if wd > 0:
        p = p - lr * wd * p
    return p


# ------------------------------------------------------------------ driver


def projections(hp):
    """Every projection the run uses: (name, refresh) -> (P float32, key)."""
    out = {}
    for index, (name, shape) in enumerate(PARAMS):
        side = projected_side(name, shape)
        if side is None:
            continue
        steps = STEPS - (1 if name == SKIP[1] else 0)
        for refresh in range((steps - 1) // GAP + 1):
            k = shape[1] if side == "right" else shape[0]
            out[(name, refresh)] = projection(SEED, index, refresh, hp["rank"], k)
    return out


def run(hp, init, grads, projs, dtype):
    params = {n: a.astype(dtype) for n, a in init.items()}
    wd_of = {n: wd for names, wd in GROUPS for n in names}
    shapes = dict(PARAMS)
    states = {n: {} for n in params}
    counts = {n: 0 for n in params}
    limited = {n: [] for n in params}
    out = {}
    for k in range(STEPS):
        lr = LR * 0.9 ** k
        for n in params:
            if n not in grads[k]:
                continue
            counts[n] += 1
            t = counts[n]
            g = grads[k][n].astype(dtype)
            if projected_side(n, shapes[n]) is None:
                params[n] = adam_step(params[n], g, states[n], t, lr, wd_of[n], hp)
            else:
                proj = projs[(n, (t - 1) // GAP)][0]
                params[n], lim = apollo_step(params[n], g, states[n], t, lr, wd_of[n], hp, proj)
                if lim:
                    limited[n].append(k)
            assert params[n].dtype == dtype, n
        for n, p in params.items():
            out[f"param.{k}.{n}"] = p.copy()
    for n in params:
        for key, value in states[n].items():
            out[f"{n}.{key}"] = np.asarray(value).copy()
    return out, counts, limited


def normwise_err(got, want):
    denom = float(np.max(np.abs(want)))
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    return err / denom if denom > 0 else err


def case(name, hp, seed):
    for ctr, key, want in KNOWN_ANSWERS:
        assert philox(ctr, key) == want, "Philox-4x32-10 fails its known-answer test"
    init, grads = make_data(seed)
    projs = projections(hp)
    f64, counts, limited = run(hp, init, grads, projs, np.float64)
    f32, counts32, limited32 = run(hp, init, grads, projs, np.float32)
    assert counts == counts32 and limited == limited32, name
    assert all(np.all(np.isfinite(v)) for v in f64.values()), name
    assert all(limited[n] for n, s in PARAMS if projected_side(n, s)), "the limiter never acted"
    tensors = {f"init.{n}": a for n, a in init.items()}
    for k in range(STEPS):
        tensors.update({f"grad.{k}.{n}": g for n, g in grads[k].items()})
    tensors.update({k: v.astype(np.float32) for k, v in f64.items()})
    tensors.update({f"{n}.step": np.array(c, dtype=np.int64) for n, c in counts.items()})
    tensors.update({f"proj.{n}.{j}": P for (n, j), (P, _) in projs.items()})
    keys = {}
    for (n, j), (_, key) in sorted(projs.items()):
        keys.setdefault(n, []).append(str(key))  # a u64 would not survive JSON's doubles
    meta = dict(hp, optimizer=name, steps=STEPS, params=[n for n, _ in PARAMS],
                lr=[LR * 0.9 ** k for k in range(STEPS)], grad_scales=GRAD_SCALES, seed=SEED,
                groups=[{"params": names, "weight_decay": wd} for names, wd in GROUPS],
                skip={"step": SKIP[0], "param": SKIP[1]},
                projected={n: projected_side(n, s) for n, s in PARAMS if projected_side(n, s)},
                keys=keys, limited=limited,
                f32_err=max(normwise_err(f32[k], f64[k]) for k in f64))
    return tensors, meta, (init, grads, projs, f64)


CASES = [  # file, hyperparameters, data seed
    ("optim_apollo", dict(HP, rank=3, scale=1.0, scale_type="channel"), 400),
    ("optim_apollo_mini", dict(HP, rank=1, scale=128.0, scale_type="tensor"), 401),
]


# ------------------------------------------------------------------ --check-reference


def check_reference(repo, name, hp, data):
    """apollo_torch's own APOLLOAdamW in float64 torch on the same data and projections."""
    import types

    import torch

    stub = types.ModuleType("transformers")
    stub.utils = types.ModuleType("transformers.utils")
    stub.utils.versions = types.ModuleType("transformers.utils.versions")
    stub.utils.versions.require_version = lambda *a, **k: None
    sys.modules.update({"transformers": stub, "transformers.utils": stub.utils,
                        "transformers.utils.versions": stub.utils.versions})
    # The package's __init__ imports bitsandbytes for its 8-bit GaLore; load only the modules
    # APOLLO needs.
    package = types.ModuleType("apollo_torch")
    package.__path__ = [os.path.join(repo, "apollo_torch")]
    sys.modules["apollo_torch"] = package
    from apollo_torch import random_projector
    from apollo_torch.apollo import AdamW as APOLLOAdamW

    init, grads, projs, f64 = data
    shapes = dict(PARAMS)
    params = {n: torch.tensor(init[n], dtype=torch.float64, requires_grad=True) for n in shapes}
    groups, order = [], []  # the reference's groups: the projected weights in groups of their own
    for names, wd in GROUPS:
        plain = [n for n in names if projected_side(n, shapes[n]) is None]
        ranked = [n for n in names if projected_side(n, shapes[n]) is not None]
        groups.append({"params": [params[n] for n in plain], "weight_decay": wd})
        order += plain
        if ranked:
            groups.append({"params": [params[n] for n in ranked], "weight_decay": wd,
                           "rank": hp["rank"], "proj": "random", "scale_type": hp["scale_type"],
                           "scale": hp["scale"], "update_proj_gap": GAP, "proj_type": "std"})
            order += ranked
    # The reference seeds its parameter i (1-based, in group order) with i and moves to
    # next_seed(seed) after each draw; map each seed of those chains to (name, refresh).
    seed_of = {}
    for i, n in enumerate(order):
        seed = i + 1
        for refresh in range(STEPS):
            seed_of[seed] = (n, refresh)
            seed = random_projector.next_seed(seed)

    def get_orthogonal_matrix(self, weights, rank, type, seed):
        n, refresh = seed_of[seed]
        P = projs[(n, refresh)][0]  # the reference's left P is our transpose
        return torch.tensor(P if type == "right" else P.T, dtype=weights.dtype)

    random_projector.GradientProjector.get_orthogonal_matrix = get_orthogonal_matrix
    opt = APOLLOAdamW(groups, lr=LR, betas=tuple(hp["betas"]), eps=hp["eps"])
    got = {}
    for k in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = LR * 0.9 ** k
        for n, p in params.items():
            p.grad = (torch.tensor(grads[k][n], dtype=torch.float64) if n in grads[k] else None)
        opt.step()
        for n, p in params.items():
            got[f"param.{k}.{n}"] = p.detach().numpy().copy()
    for n, p in params.items():
        state = opt.state[p]
        assert state["step"] == (STEPS - 1 if n == SKIP[1] else STEPS), n
        for ours, theirs in [("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq"),
                             ("scaled_grad_norm", "scaled_grad")]:
            if theirs in state:
                got[f"{n}.{ours}"] = state[theirs].detach().numpy().copy()
    assert set(got) == set(f64), sorted(set(got) ^ set(f64))
    diff = max(normwise_err(got[k], f64[k]) for k in got)
    print(f"  --check-reference {name}: torch {torch.__version__}: max normwise difference "
          f"{diff:.3e} over {len(got)} parameter and state tensors")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    ap.add_argument("--check-reference", metavar="DIR",
                    help="also run apollo_torch from a checkout of the authors' repository")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, hp, seed in CASES:
        tensors, meta, data = case(name, hp, seed)
        write_gtb(os.path.join(args.out, name + ".gtb"), tensors, meta)
        print(f"{name}: f32 err {meta['f32_err']:.1e}, limited at {meta['limited']}")
        if args.check_reference:
            check_reference(args.check_reference, name, hp, data)


if __name__ == "__main__":
    main()
