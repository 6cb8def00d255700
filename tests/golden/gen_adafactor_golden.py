#!/usr/bin/python3
"""NumPy golden data for fitgrad's Adafactor optimizers (optim/): 20-step trajectories.

How to run (standard library and NumPy only, no torch; CI does NOT run this, it only reads
the committed outputs):

    /usr/bin/python3 tests/golden/gen_adafactor_golden.py            # rewrites tests/golden/optim_adafactor*.gtb
    /usr/bin/python3 tests/golden/gen_adafactor_golden.py --out DIR  # writes elsewhere (to compare)

With --check-hf it also runs the two Hugging Face cases through transformers' own Adafactor
in float64 torch and prints the largest differences (about 1e-16 so far); it needs torch
and transformers, e.g. transformers 4.30.2 (newer ones refuse Debian's torch 1.13) in a
throwaway venv outside the repository:

    /usr/bin/python3 -m venv --system-site-packages /tmp/venv-hf
    /tmp/venv-hf/bin/pip install transformers==4.30.2
    /tmp/venv-hf/bin/python tests/golden/gen_adafactor_golden.py --out DIR --check-hf

The files use the .gtb format of tests/golden/golden_file.h, written by gtb_numpy.py's
write_gtb; the output is deterministic (fixed seeds, sorted JSON keys). The algorithms are
written out below from their published definitions; neither torch nor transformers is
needed to generate.

Every file has the same layout. Parameters "w1" (6, 10), "w3" (2, 3, 4) (factored over its
last two dimensions, the leading one batched), "b1" (10,), "b2" (1,), in two groups: group 0
= w1, w3 (weight decay per file), group 1 = b1, b2 (weight decay 0). 20 steps; the gradients
are N(0, 1) times a per-step scale (GRAD_SCALES, 0.01 to 1); "b2" has no gradient at step 3,
so the optimizer skips it there and its own step count lags by one; w1's gradient has row 2
exactly zero at step 0 and column 4 exactly zero at step 5 (so the eps clamps matter).
Tensors:
  * "init.<p>": the initial values, N(0, 1) * 0.5;
  * "grad.<k>.<p>": the gradient at step k (absent where skipped);
  * "param.<k>.<p>": the parameter after step k (k = 0..19);
  * "<p>.<state>": the final optimizer state (names per file below), "<p>.step": that
    parameter's own step count (i64, 0-d).
Meta: "optimizer", "steps", "params", "groups" ([{"params", "weight_decay"}]), "skip"
({"step", "param"}), "grad_scales", "lr" (one per step, or null), the hyperparameters, and
"f32_err". The stored trajectory is computed in float64 from the f32 inputs, stored as f32;
"f32_err" is the largest normwise error (max|f32 - f64| / max|f64|) over every stored
param/state tensor of the same code run with float32 arrays (scalars as Python doubles, as
both libraries compute them), the yardstick for the C++ tolerance.

The cases:
  * optim_adafactor_torch.gtb: torch.optim.Adafactor (PyTorch >= 2.5): beta2_decay -0.8,
    eps1 None -> float32's machine epsilon 2**-23 (used in the float64 run too: these are f32
    parameters), eps2 1e-3, d 1.0, maximize False; weight decay 0.1 on group 0; lr per step
    1.2 * 0.85**k, so rho_t = min(lr, 1/sqrt(t)) is 1/sqrt(t) on steps 0..7 and lr from
    step 8 on (for b2 too, whose t lags by one from step 4). State "row_var" (..., R, 1), "col_var" (..., 1, C) for ndim > 1, "variance"
    for vectors.
  * optim_adafactor_hf.gtb: Hugging Face transformers' Adafactor with its defaults: lr None,
    eps (1e-30, 1e-3), clip_threshold 1.0, decay_rate -0.8, beta1 None, weight decay 0,
    scale_parameter, relative_step True, warmup_init False. State "exp_avg_sq_row"
    (p.shape[:-1]), "exp_avg_sq_col" (p.shape[:-2] + p.shape[-1:]) for ndim >= 2,
    "exp_avg_sq" for vectors.
  * optim_adafactor_hf_manual.gtb: the same algorithm as the Trainer's `--optim adafactor`
    sets it up with an explicit lr: relative_step False, scale_parameter False, warmup_init
    False, beta1 0.9, weight decay 0.1 on group 0, lr per step 0.05 * 0.9**k; state as
    above plus "exp_avg".
"""

import argparse
import math
import os

import numpy as np

from gtb_numpy import write_gtb

SHAPES = {"w1": (6, 10), "w3": (2, 3, 4), "b1": (10,), "b2": (1,)}
STEPS = 20
SKIP = (3, "b2")  # (step, parameter) without a gradient
ZERO_ROW = (0, "w1", 2)  # (step, parameter, row) of an exactly-zero gradient row
ZERO_COL = (5, "w1", 4)  # (step, parameter, column) of an exactly-zero gradient column
GRAD_SCALES = [1.0, 0.3, 0.05, 0.01, 0.5, 0.1, 0.02, 0.8, 0.2, 0.04,
               0.6, 0.015, 0.25, 0.07, 1.0, 0.03, 0.4, 0.12, 0.01, 0.7]
F32_EPS = 2.0 ** -23  # torch.finfo(torch.float32).eps


def make_data(seed):
    rng = np.random.default_rng(seed)
    init = {n: rng.standard_normal(s, dtype=np.float32) * np.float32(0.5)
            for n, s in SHAPES.items()}
    grads = []
    for k in range(STEPS):
        step = {}
        for n, s in SHAPES.items():
            g = rng.standard_normal(s, dtype=np.float32) * np.float32(GRAD_SCALES[k])
            if (k, n) != SKIP:
                step[n] = g
        grads.append(step)
    k, n, r = ZERO_ROW
    grads[k][n][r, :] = 0.0
    k, n, c = ZERO_COL
    grads[k][n][:, c] = 0.0
    for step in grads:
        assert all(g.dtype == np.float32 for g in step.values())
    return init, grads


def rms(x):
    """||x||_2 / sqrt(numel(x)) as a Python float (the norm itself in x's dtype)."""
    return float(np.sqrt(np.sum(x * x, dtype=x.dtype))) / math.sqrt(x.size)


# ------------------------------------------------------------------ torch.optim.Adafactor


def torch_step(p, g, st, t, lr, wd, hp):
    eps1 = hp["eps1_value"]
    one_minus_beta2_t = float(t) ** hp["beta2_decay"]
    rho_t = min(lr, 1.0 / float(t) ** 0.5)
    alpha = max(hp["eps2"], rms(p)) * rho_t  # p before weight decay
    if wd != 0:
        p = p * (1.0 - lr * wd)
    if p.ndim > 1:
        if not st:
            st["row_var"] = np.zeros(p.shape[:-1] + (1,), p.dtype)
            st["col_var"] = np.zeros(p.shape[:-2] + (1, p.shape[-1]), p.dtype)
        gg = g * g
        row_mean = gg.mean(axis=-1, keepdims=True)
        st["row_var"] = st["row_var"] + one_minus_beta2_t * (row_mean - st["row_var"])
        col_mean = gg.mean(axis=-2, keepdims=True)
        st["col_var"] = st["col_var"] + one_minus_beta2_t * (col_mean - st["col_var"])
        var_est = np.matmul(st["row_var"], st["col_var"])
        var_est = var_est / np.maximum(st["row_var"].mean(axis=-2, keepdims=True), eps1)
    else:
        if not st:
            st["variance"] = np.zeros(p.shape, p.dtype)
        st["variance"] = st["variance"] + one_minus_beta2_t * (g * g - st["variance"])
        var_est = st["variance"].copy()
    update = 1.0 / np.sqrt(np.maximum(var_est, eps1 * eps1)) * g
    denom = max(1.0, rms(update) / hp["d"])
    return p - (alpha / denom) * update


# ---------------------------------------------------------- transformers' Adafactor (HF)


def hf_step(p, g, st, t, lr, wd, hp):
    eps0, eps1 = hp["eps"]
    factored = p.ndim >= 2
    param_rms = rms(p)  # before any change this step
    if hp["relative_step"]:
        rel = min(1e-6 * t if hp["warmup_init"] else 1e-2, 1.0 / math.sqrt(t))
    else:
        rel = lr
    scale = max(eps1, param_rms) if hp["scale_parameter"] else 1.0
    lr_t = scale * rel
    beta2t = 1.0 - float(t) ** hp["decay_rate"]
    u = g * g + eps0
    if factored:
        if not st:
            st["exp_avg_sq_row"] = np.zeros(p.shape[:-1], p.dtype)
            st["exp_avg_sq_col"] = np.zeros(p.shape[:-2] + p.shape[-1:], p.dtype)
        st["exp_avg_sq_row"] = (beta2t * st["exp_avg_sq_row"]
                                + (1.0 - beta2t) * u.mean(axis=-1))
        st["exp_avg_sq_col"] = (beta2t * st["exp_avg_sq_col"]
                                + (1.0 - beta2t) * u.mean(axis=-2))
        row, col = st["exp_avg_sq_row"], st["exp_avg_sq_col"]
        r_factor = 1.0 / np.sqrt(row / row.mean(axis=-1, keepdims=True))
        c_factor = 1.0 / np.sqrt(col)
        update = r_factor[..., :, None] * c_factor[..., None, :] * g
    else:
        if not st:
            st["exp_avg_sq"] = np.zeros(p.shape, p.dtype)
        st["exp_avg_sq"] = beta2t * st["exp_avg_sq"] + (1.0 - beta2t) * u
        update = 1.0 / np.sqrt(st["exp_avg_sq"]) * g
    update = update / max(rms(update) / hp["clip_threshold"], 1.0)
    update = update * lr_t
    if hp["beta1"] is not None:
        if "exp_avg" not in st:
            st["exp_avg"] = np.zeros(p.shape, p.dtype)
        st["exp_avg"] = hp["beta1"] * st["exp_avg"] + (1.0 - hp["beta1"]) * update
        update = st["exp_avg"]
    if wd != 0:
        p = p + p * (-wd * lr_t)
    return p - update


# ------------------------------------------------------------------------------ driver


def run(step_fn, hp, groups, lrs, init, grads, dtype):
    """The whole trajectory with every array in `dtype`; scalars stay Python floats."""
    params = {n: a.astype(dtype) for n, a in init.items()}
    wd_of = {n: wd for names, wd in groups for n in names}
    states = {n: {} for n in params}
    counts = {n: 0 for n in params}
    out = {}
    for k in range(STEPS):
        lr = None if lrs is None else lrs[k]
        for n in params:
            if n not in grads[k]:
                continue  # no gradient: skipped entirely, its step count stays
            counts[n] += 1
            params[n] = step_fn(params[n], grads[k][n].astype(dtype), states[n], counts[n],
                                lr, wd_of[n], hp)
            assert params[n].dtype == dtype and params[n].shape == SHAPES[n], n
            assert all(v.dtype == dtype for v in states[n].values()), n
        for n, p in params.items():
            out[f"param.{k}.{n}"] = p.copy()
    for n in params:
        for key, value in states[n].items():
            out[f"{n}.{key}"] = value.copy()
    return out, counts


def normwise_err(got, want):
    denom = float(np.max(np.abs(want)))
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    return err / denom if denom > 0 else err


def case(name, step_fn, hp, groups, lrs, seed):
    init, grads = make_data(seed)
    f64, counts = run(step_fn, hp, groups, lrs, init, grads, np.float64)
    f32, counts32 = run(step_fn, hp, groups, lrs, init, grads, np.float32)
    assert counts == counts32
    assert all(np.all(np.isfinite(v)) for v in f64.values()), name
    tensors = {f"init.{n}": a for n, a in init.items()}
    for k in range(STEPS):
        tensors.update({f"grad.{k}.{n}": g for n, g in grads[k].items()})
    tensors.update({k: v.astype(np.float32) for k, v in f64.items()})
    tensors.update({f"{n}.step": np.array(c, dtype=np.int64) for n, c in counts.items()})
    meta = dict(hp, steps=STEPS, params=list(SHAPES), lr=lrs, grad_scales=GRAD_SCALES,
                groups=[{"params": names, "weight_decay": wd} for names, wd in groups],
                skip={"step": SKIP[0], "param": SKIP[1]},
                f32_err=max(normwise_err(f32[k], f64[k]) for k in f64))
    return tensors, meta, (init, grads, f64)


TORCH_LRS = [1.2 * 0.85 ** k for k in range(STEPS)]
MANUAL_LRS = [0.05 * 0.9 ** k for k in range(STEPS)]
TORCH_HP = {"optimizer": "torch.optim.Adafactor", "beta2_decay": -0.8, "eps1": None,
            "eps1_value": F32_EPS, "eps2": 1e-3, "d": 1.0, "maximize": False}
HF_HP = {"optimizer": "transformers.Adafactor", "eps": [1e-30, 1e-3], "clip_threshold": 1.0,
         "decay_rate": -0.8, "beta1": None, "scale_parameter": True, "relative_step": True,
         "warmup_init": False}
HF_MANUAL_HP = dict(HF_HP, beta1=0.9, scale_parameter=False, relative_step=False)

CASES = [  # name, step function, hyperparameters, groups, lr per step, seed
    ("optim_adafactor_torch", torch_step, TORCH_HP,
     [(["w1", "w3"], 0.1), (["b1", "b2"], 0.0)], TORCH_LRS, 300),
    ("optim_adafactor_hf", hf_step, HF_HP,
     [(["w1", "w3"], 0.0), (["b1", "b2"], 0.0)], None, 301),
    ("optim_adafactor_hf_manual", hf_step, HF_MANUAL_HP,
     [(["w1", "w3"], 0.1), (["b1", "b2"], 0.0)], MANUAL_LRS, 302),
]


def check_hf(name, hp, groups, lrs, data):
    """transformers' own Adafactor, float64 torch, on the same steps; prints the differences."""
    import torch
    from transformers.optimization import Adafactor

    init, grads, f64 = data
    params = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True)
              for n, a in init.items()}
    opt = Adafactor([{"params": [params[n] for n in names], "weight_decay": wd}
                     for names, wd in groups],
                    lr=None if lrs is None else lrs[0], eps=tuple(hp["eps"]),
                    clip_threshold=hp["clip_threshold"], decay_rate=hp["decay_rate"],
                    beta1=hp["beta1"], scale_parameter=hp["scale_parameter"],
                    relative_step=hp["relative_step"], warmup_init=hp["warmup_init"])
    got = {}
    for k in range(STEPS):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[k]
        for n, p in params.items():
            p.grad = (torch.tensor(grads[k][n], dtype=torch.float64) if n in grads[k]
                      else None)
        opt.step()
        for n, p in params.items():
            got[f"param.{k}.{n}"] = p.detach().numpy().copy()
    for n, p in params.items():
        for key, value in opt.state[p].items():
            if torch.is_tensor(value) and value.dim() > 0:
                got[f"{n}.{key}"] = value.detach().numpy().copy()
        assert opt.state[p]["step"] == (STEPS - 1 if n == SKIP[1] else STEPS), n
    assert set(got) == set(f64), sorted(set(got) ^ set(f64))
    abs_diff = max(float(np.max(np.abs(got[k] - f64[k]))) for k in f64)
    rel_diff = max(normwise_err(got[k], f64[k]) for k in f64)
    print(f"  --check-hf {name}: transformers {__import__('transformers').__version__}, "
          f"torch {torch.__version__}: max abs diff {abs_diff:.3e}, "
          f"max normwise diff {rel_diff:.3e} over {len(f64)} tensors")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    ap.add_argument("--check-hf", action="store_true",
                    help="also compare the HF cases with transformers' Adafactor (needs "
                         "torch and transformers)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, step_fn, hp, groups, lrs, seed in CASES:
        tensors, meta, data = case(name, step_fn, hp, groups, lrs, seed)
        write_gtb(os.path.join(args.out, name + ".gtb"), tensors, meta)
        print(f"{name}: f32 err {meta['f32_err']:.1e}")
        if args.check_hf and step_fn is hf_step:
            check_hf(name, hp, groups, lrs, data)


if __name__ == "__main__":
    main()
