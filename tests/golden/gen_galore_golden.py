#!/usr/bin/python3
"""Golden data for fitgrad's GaLore (optim/galore.h): galore_adamw and galore_adamw_8bit.

How to run (needs Debian's python3-torch, 1.13 on CPU, and NumPy; CI does NOT run this, it
only reads the committed output):

    /usr/bin/python3 tests/golden/gen_galore_golden.py            # rewrites tests/golden/optim_galore.gtb
    /usr/bin/python3 tests/golden/gen_galore_golden.py --out DIR  # writes elsewhere (to compare)

What is computed, written from the paper's pseudo-code (Zhao et al. 2024, arXiv 2403.03507,
Algorithm 2 "Adam with GaLore") with the choices its reference implementation makes
(galore_torch's GaLoreProjector, GaLoreAdamW and GaLoreAdamW8bit, as transformers' Trainer
builds them), in float32 torch (NumPy for the 8-bit moments):

  * Target weights W (m, n) of the group with rank r, projection gap T and scale alpha. At the
    weight's step t (0 first), if t % T == 0 the projection is refreshed from
    torch.linalg.svd(G, full_matrices=False) of the float32 gradient: "std" type, so for
    m >= n the right factor Q = Vh[:r] (r, n) and R = G Q^T (m, r), for m < n the left factor
    P = U[:, :r] (m, r) and R = P^T G (r, n); r = min(rank, m, n). Each singular vector's sign
    is then fixed so that its entry of largest magnitude is positive (fitgrad's Note [Singular
    vector signs]; LAPACK's own signs are arbitrary, and the moments, which the reference
    keeps across a refresh, make the trajectory depend on them). The script checks that each
    such entry leads the runner-up by a margin, so the rule is not decided by rounding.
  * galore_adamw: M = b1 M + (1 - b1) R, V = b2 V + (1 - b2) R*R (torch's mul_/add_/addcmul_),
    N = M / (sqrt(V) + eps), step_size = lr sqrt(1 - b2^t') / (1 - b1^t') in Python floats
    (t' = t + 1: eps before the bias correction, as the reference's copy of transformers'
    AdamW has it, where the paper's pseudo-code corrects M and V first), then
    W = W + (-step_size) * (alpha * back(N)) with back(N) = N Q or P N, and
    W = W + W * (-lr * weight_decay). The moments are not reset at a refresh.
  * galore_adamw_8bit: R as above; bitsandbytes' 8-bit blockwise Adam step (or its 32-bit one
    below 4096 low-rank elements) on a zero low-rank "parameter" with weight decay 0, exactly as
    gen_adam8bit_golden.py computes it (step_8bit / step_32bit, imported from there), then
    W = W + alpha * back(step) and the same decay, as GaLoreAdamW8bit does.
  * Every other parameter: torch.optim.AdamW (galore_adamw) or gen_adam8bit_golden.py's
    bitsandbytes AdamW8bit (galore_adamw_8bit), with its group's weight decay.

The gradients of the targets have well-separated singular values (G = U diag(s) V^T with
random orthogonal U, V and s_i = 1.6^-i, scaled per step), so that the basis is a stable
function of G; the others are N(0, 1) times the step's scale.

The case, optim_galore.gtb (read by tests/optim/galore_golden_test.cpp): parameters
"model.layers.0.self_attn.q_proj.weight" (40, 24) (right projection; the 8-bit variant on the
32-bit path: 40 x 16 < 4096), "model.layers.0.mlp.down_proj.weight" (20, 260) (left,
16 x 260 = 4160: 8-bit, 17 blocks, the last partial), "model.layers.0.mlp.gate_proj.weight"
(6, 20) (rank 16 clamps to 6), "model.embed_tokens.weight" (10, 16) (2-D, not a target) and
"model.layers.0.input_layernorm.weight" (16,); group 0 (the matrices) weight decay 0.1,
group 1 (the norm) 0; target_modules "attn,mlp", rank 16, update_proj_gap 3, scale 0.25,
betas (0.9, 0.999), eps 1e-6, 6 steps (refreshes at 0 and 3) with lr 1e-2 (1 - k/10).
Tensors: "init.<p>", "grad.<k>.<p>", and after each step k "adamw.<k>.<p>" and
"adamw8.<k>.<p>" (the two variants' parameters; the C++ test compares parameters, not the
bases, whose signs it would also fix but whose last bits differ). meta: the settings, and
"f32_vs_f64": the normwise distance of the float32 galore_adamw run's final weights from the
same run in float64, relative to their total change (the yardstick for the tolerance).
"""

import argparse
import math
import os

import numpy as np
import torch

import gen_adam8bit_golden as bnb
from gtb_numpy import write_gtb

F = np.float32
SHAPES = {
    "model.layers.0.self_attn.q_proj.weight": (40, 24),
    "model.layers.0.mlp.down_proj.weight": (20, 260),
    "model.layers.0.mlp.gate_proj.weight": (6, 20),
    "model.embed_tokens.weight": (10, 16),
    "model.layers.0.input_layernorm.weight": (16,),
}
TARGETS = ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight",
           "model.layers.0.mlp.gate_proj.weight"]
GROUPS = [(["model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight",
            "model.layers.0.mlp.gate_proj.weight", "model.embed_tokens.weight"], 0.1),
          (["model.layers.0.input_layernorm.weight"], 0.0)]
TARGET_MODULES = "attn,mlp"
RANK, GAP, SCALE = 16, 3, 0.25
BETAS, EPS = (0.9, 0.999), 1e-6
STEPS = 6
LRS = [1e-2 * (1 - k / 10) for k in range(STEPS)]
GRAD_SCALES = [0.05, 0.2, 0.1, 0.4, 0.03, 0.15]
SEED = 2403
SIGN_MARGIN = 1e-3  # the largest |entry| of a basis vector leads the next by this (relative)


def make_data():
    rng = np.random.default_rng(SEED)
    init = {n: rng.standard_normal(s).astype(F) * F(0.1) for n, s in SHAPES.items()}
    grads = []
    for k in range(STEPS):
        gk = {}
        for n, s in SHAPES.items():
            if n in TARGETS:
                m, c = s
                u, _ = np.linalg.qr(rng.standard_normal((m, m)))
                v, _ = np.linalg.qr(rng.standard_normal((c, c)))
                sv = 1.6 ** -np.arange(min(m, c))
                g = (u[:, :len(sv)] * sv) @ v[:, :len(sv)].T
                gk[n] = (g * GRAD_SCALES[k]).astype(F)
            else:
                gk[n] = rng.standard_normal(s).astype(F) * F(GRAD_SCALES[k])
        grads.append(gk)
    return init, grads


def weight_decay_of(name):
    return next(wd for names, wd in GROUPS if name in names)


def fix_signs(vectors):
    """Columns of `vectors` (float64 or float32 torch), each flipped so its entry of largest
    magnitude is positive; checks the margin that makes the choice robust."""
    a = vectors.abs()
    top = a.argmax(dim=0)
    for j in range(vectors.shape[1]):
        col = a[:, j].double()
        first, second = torch.topk(col, 2).values.tolist() if col.numel() > 1 else (1.0, 0.0)
        assert first - second > SIGN_MARGIN * first, f"sign rule too close in column {j}"
    signs = torch.where(vectors[top, torch.arange(vectors.shape[1])] < 0, -1.0, 1.0)
    return vectors * signs.to(vectors.dtype)


def projection_of(g, rank):
    """(left, basis) of the float32 (or float64) gradient g: P (m, r) or Q (r, n)."""
    m, n = g.shape
    r = min(rank, m, n)
    u, _, vh = torch.linalg.svd(g, full_matrices=False)
    if m >= n:
        return False, fix_signs(vh[:r].T).T.contiguous()
    return True, fix_signs(u[:, :r]).contiguous()


def project(left, basis, g):
    return basis.T @ g if left else g @ basis.T


def project_back(left, basis, low):
    return basis @ low if left else low @ basis


def run_adamw(init, grads, dtype):
    """galore_adamw in torch at `dtype`: the parameters after every step."""
    params = {n: torch.tensor(v, dtype=dtype) for n, v in init.items()}
    others = [n for n in SHAPES if n not in TARGETS]
    opt = torch.optim.AdamW(
        [{"params": [params[n] for n in names if n in others], "weight_decay": wd}
         for names, wd in GROUPS], lr=LRS[0], betas=BETAS, eps=EPS)
    state = {n: {"t": 0} for n in TARGETS}
    out = {}
    for k in range(STEPS):
        for n in others:
            params[n].grad = torch.tensor(grads[k][n], dtype=dtype)
        for group in opt.param_groups:
            group["lr"] = LRS[k]
        opt.step()
        for n in TARGETS:
            st, p = state[n], params[n]
            g = torch.tensor(grads[k][n], dtype=dtype)
            if st["t"] % GAP == 0:
                st["left"], st["basis"] = projection_of(g, RANK)
            low = project(st["left"], st["basis"], g)
            if "m" not in st:
                st["m"], st["v"] = torch.zeros_like(low), torch.zeros_like(low)
            st["t"] += 1
            b1, b2 = BETAS
            st["m"].mul_(b1).add_(low, alpha=1.0 - b1)
            st["v"].mul_(b2).addcmul_(low, low, value=1.0 - b2)
            denom = st["v"].sqrt().add_(EPS)
            step_size = LRS[k] * math.sqrt(1.0 - b2 ** st["t"]) / (1.0 - b1 ** st["t"])
            norm = project_back(st["left"], st["basis"], st["m"] / denom) * SCALE
            p.add_(norm, alpha=-step_size)
            p.add_(p, alpha=-LRS[k] * weight_decay_of(n))
        for n, p in params.items():
            out[f"adamw.{k}.{n}"] = p.clone()
    return out


def run_adamw8(init, grads, maps):
    """galore_adamw_8bit: bitsandbytes' 8-bit step (gen_adam8bit_golden.py) in the low-rank
    space of the targets, AdamW8bit on the rest, with this case's betas and eps."""
    bnb.BETAS, bnb.EPS = BETAS, EPS  # read by bnb.Scalars
    params = {n: v.copy() for n, v in init.items()}
    states, out = {}, {}
    for n, p in init.items():
        if n in TARGETS:
            left, basis = projection_of(torch.tensor(grads[0][n]), RANK)  # for the shape only
            shape = tuple(project(left, basis, torch.tensor(grads[0][n])).shape)
        else:
            shape = p.shape
        size = int(np.prod(shape))
        st = {"t": 0}
        if size >= bnb.MIN_8BIT_SIZE:
            blocks = -(-size // bnb.BLOCKSIZE)
            st.update(state1=np.zeros(size, dtype=np.int64), state2=np.zeros(size, dtype=np.int64),
                      absmax1=np.zeros(blocks, dtype=F), absmax2=np.zeros(blocks, dtype=F))
        else:
            st.update(state1=np.zeros(shape, dtype=F), state2=np.zeros(shape, dtype=F))
        states[n] = st
    for k in range(STEPS):
        for names, wd in GROUPS:
            for n in names:
                st, g = states[n], grads[k][n]
                if n not in TARGETS:
                    st["p"] = params[n]
                    st["t"] += 1
                    scalars = bnb.Scalars(LRS[k], wd, st["t"])
                    (bnb.step_8bit(st, g, scalars, maps) if "absmax1" in st
                     else bnb.step_32bit(st, g, scalars))
                    params[n] = st["p"]
                    continue
                gt = torch.tensor(g)
                if st["t"] % GAP == 0:
                    st["left"], st["basis"] = projection_of(gt, RANK)
                low = project(st["left"], st["basis"], gt).numpy()
                st["p"] = np.zeros(low.shape, dtype=F)
                st["t"] += 1
                scalars = bnb.Scalars(LRS[k], 0.0, st["t"])
                (bnb.step_8bit(st, low, scalars, maps) if "absmax1" in st
                 else bnb.step_32bit(st, low, scalars))
                p = torch.tensor(params[n])
                p.add_(project_back(st["left"], st["basis"], torch.tensor(st["p"])) * SCALE)
                p.add_(p, alpha=-LRS[k] * wd)
                params[n] = p.numpy()
        for n, p in params.items():
            out[f"adamw8.{k}.{n}"] = p.copy()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    init, grads = make_data()
    f32 = run_adamw(init, grads, torch.float32)
    f64 = run_adamw(init, grads, torch.float64)
    maps = bnb.dynamic_map(True), bnb.dynamic_map(False)
    with np.errstate(invalid="ignore", divide="ignore"):
        eight = run_adamw8(init, grads, maps)
    last = STEPS - 1
    change = sum(float(((f64[f"adamw.{last}.{n}"] - torch.tensor(init[n], dtype=torch.float64))
                        ** 2).sum()) for n in SHAPES)
    dist = sum(float(((f32[f"adamw.{last}.{n}"].double() - f64[f"adamw.{last}.{n}"]) ** 2).sum())
               for n in SHAPES)
    rel = math.sqrt(dist / change)

    tensors = {f"init.{n}": v for n, v in init.items()}
    for k in range(STEPS):
        tensors.update({f"grad.{k}.{n}": g for n, g in grads[k].items()})
    tensors.update({key: t.numpy() for key, t in f32.items()})
    tensors.update(eight)
    for name, a in tensors.items():
        assert a.dtype == F, name
    meta = {
        "steps": STEPS, "params": list(SHAPES), "targets": TARGETS,
        "groups": [{"params": names, "weight_decay": wd} for names, wd in GROUPS],
        "target_modules": TARGET_MODULES, "rank": RANK, "update_proj_gap": GAP, "scale": SCALE,
        "lr": LRS, "betas": list(BETAS), "eps": EPS, "grad_scales": GRAD_SCALES, "seed": SEED,
        "torch": torch.__version__, "f32_vs_f64": rel,
    }
    path = os.path.join(args.out, "optim_galore.gtb")
    write_gtb(path, tensors, meta)
    print(f"optim_galore: {len(tensors)} tensors; float32 vs float64 galore_adamw: {rel:.2e} "
          "of the weights' change")


if __name__ == "__main__":
    main()
