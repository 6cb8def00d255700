#!/usr/bin/python3
"""PyTorch golden data for fitgrad's optimizers and learning-rate schedules (optim/).

How to run (needs Debian's python3-torch, 1.13 on CPU; CI does NOT run this, it only reads
the committed outputs):

    /usr/bin/python3 tests/golden/gen_optim_golden.py            # rewrites tests/golden/optim_*.gtb
    /usr/bin/python3 tests/golden/gen_optim_golden.py --out DIR  # writes elsewhere (to compare)

The files use the .gtb format of tests/golden/golden_file.h, written by gen_golden.py's
write_case; the output is deterministic (fixed seeds, sorted JSON keys).

The cases (read by tests/optim/optim_golden_test.cpp):
  * optim_adamw.gtb: torch.optim.AdamW, float32, two parameter groups (weight decay 0.1 on
    the matrices "w1", "w2"; 0 on the vectors "b1", "b2"), betas (0.9, 0.95), eps 1e-3 (large
    enough against sqrt(v) ~ 0.1 that where eps enters the update shows), 5 steps with a different lr each (meta "lr"). Parameter "b2" has no gradient at step 2,
    so torch skips it there (and its step count lags). Tensors: "init.<p>", "grad.<k>.<p>"
    (absent where skipped), "param.<k>.<p>" after step k, and the final "<p>.exp_avg",
    "<p>.exp_avg_sq".
  * optim_adamw_clip.gtb: the same with eps 1e-8 and torch.nn.utils.clip_grad_norm_(all,
    max_norm 1.0) before every step; gradients are scaled per step so that clipping is
    active on some steps only; "norm" (5,) holds the norms clip_grad_norm_ returned.
  * optim_sgd.gtb, optim_sgd_nesterov.gtb: torch.optim.SGD with momentum 0.9 and the same
    groups and weight decays (dampening 0.1 without Nesterov; Nesterov with dampening 0),
    stored like optim_adamw.gtb with "<p>.momentum_buffer" at the end.
  * optim_schedules.gtb: no tensors; meta "cases" lists, per schedule type, base lr, warmup
    and total steps, a list of steps and the learning rate at each. The formulas are those of
    Hugging Face transformers' get_scheduler (transformers/optimization.py, the lr_lambda
    functions), written out below from their published definitions (transformers is not a
    dependency); LambdaLR multiplies base_lr by them.

Every optimizer case also records meta["torch_f32_err"]: the normwise error of torch's
float32 run (stored) against the same run in float64, the yardstick for the C++ tolerance.
"""

import argparse
import math
import os

import torch

from gen_golden import gen, normwise_err, randn, write_case

SHAPES = {"w1": (4, 6), "w2": (3, 5), "b1": (6,), "b2": (5,)}
GROUPS = [(["w1", "w2"], 0.1), (["b1", "b2"], 0.0)]
LRS = [1e-2, 8e-3, 6e-3, 4e-3, 2e-3]
GRAD_SCALES = [0.05, 0.3, 0.1, 0.5, 0.02]  # the summed norm crosses max_norm 1 on steps 1, 3
STEPS = 5
SKIP = (2, "b2")  # (step, parameter) without a gradient


def make_data(seed):
    g = gen(seed)
    init = {n: randn(g, *s) for n, s in SHAPES.items()}
    grads = [{n: randn(g, *s, scale=GRAD_SCALES[k]) for n, s in SHAPES.items()
              if (k, n) != SKIP} for k in range(STEPS)]
    return init, grads


def run(make_opt, init, grads, dtype, clip):
    params = {n: t.to(dtype).clone().requires_grad_(True) for n, t in init.items()}
    opt = make_opt([{"params": [params[n] for n in names], "weight_decay": wd}
                    for names, wd in GROUPS])
    out, norms = {}, []
    for k in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = LRS[k]
        for n, p in params.items():
            p.grad = grads[k][n].to(dtype).clone() if n in grads[k] else None
        if clip:
            norms.append(torch.nn.utils.clip_grad_norm_(
                [p for p in params.values() if p.grad is not None], 1.0).item())
        opt.step()
        for n, p in params.items():
            out[f"param.{k}.{n}"] = p.detach().clone()
    for n, p in params.items():
        for key, value in opt.state[p].items():
            if torch.is_tensor(value) and key != "step":
                out[f"{n}.{key}"] = value.detach().clone()
    return out, norms


def optimizer_case(out_dir, name, make_opt, meta, seed, clip=False):
    init, grads = make_data(seed)
    f32, norms = run(make_opt, init, grads, torch.float32, clip)
    f64, _ = run(make_opt, init, grads, torch.float64, clip)
    tensors = {f"init.{n}": t for n, t in init.items()}
    for k in range(STEPS):
        tensors.update({f"grad.{k}.{n}": t for n, t in grads[k].items()})
    tensors.update(f32)
    if clip:
        tensors["norm"] = torch.tensor(norms, dtype=torch.float32)
    meta = dict(meta, lr=LRS, steps=STEPS, params=list(SHAPES),
                groups=[{"params": names, "weight_decay": wd} for names, wd in GROUPS],
                skip={"step": SKIP[0], "param": SKIP[1]}, clip_max_norm=1.0 if clip else None,
                norm=norms, torch_f32_err=max(normwise_err(f32[k], f64[k]) for k in f32))
    write_case(os.path.join(out_dir, name + ".gtb"), tensors, meta)
    print(f"{name}: torch f32 err {meta['torch_f32_err']:.1e}" +
          (f", norms {', '.join(f'{x:.3f}' for x in norms)}" if clip else ""))


# ---------------------------------------------------------------------------- schedules


def warmup(step, w):
    return step / max(1, w)


def lr_lambda(kind, step, w, total):
    """Hugging Face's schedule multipliers (transformers/optimization.py)."""
    if kind == "constant":
        return 1.0
    if step < w:
        return warmup(step, w)
    progress = (step - w) / max(1, total - w)
    if kind == "constant_with_warmup":
        return 1.0
    if kind == "linear":
        return max(0.0, (total - step) / max(1, total - w))
    if kind == "cosine":  # num_cycles 0.5
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))
    if kind == "cosine_with_restarts":  # num_cycles 1
        if progress >= 1.0:
            return 0.0
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((1.0 * progress) % 1.0))))
    if kind == "polynomial":  # lr_end 1e-7, power 1
        raise AssertionError("handled by polynomial_lr")
    if kind == "inverse_sqrt":
        timescale = w or 10_000
        return 1.0 / math.sqrt((step + timescale - w) / timescale)
    raise AssertionError(kind)


def polynomial_lr(step, w, total, lr_init, lr_end=1e-7, power=1.0):
    if step < w:
        return lr_init * warmup(step, w)
    if step > total:
        return lr_init * (lr_end / lr_init)
    pct_remaining = 1 - (step - w) / (total - w)
    return lr_init * ((lr_init - lr_end) * pct_remaining ** power + lr_end) / lr_init


def schedule_case(out_dir):
    kinds = ["linear", "cosine", "cosine_with_restarts", "polynomial", "constant",
             "constant_with_warmup", "inverse_sqrt"]
    cases = []
    for base_lr, w, total in [(3e-4, 10, 100), (5e-5, 0, 37), (1e-3, 1, 2)]:
        steps = sorted({0, 1, w - 1, w, w + 1, (w + total) // 2, total - 1, total, total + 1,
                        total + 50} - {-1})
        for kind in kinds:
            lrs = [polynomial_lr(s, w, total, base_lr) if kind == "polynomial"
                   else base_lr * lr_lambda(kind, s, w, total) for s in steps]
            cases.append({"type": kind, "base_lr": base_lr, "warmup": w, "total": total,
                          "steps": steps, "lr": lrs})
    write_case(os.path.join(out_dir, "optim_schedules.gtb"), {}, {"cases": cases})
    print(f"optim_schedules: {len(cases)} cases")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)
    for name, eps, seed, clip in [("optim_adamw", 1e-3, 100, False),
                                  ("optim_adamw_clip", 1e-8, 101, True)]:
        optimizer_case(args.out, name,
                       lambda groups, eps=eps: torch.optim.AdamW(groups, lr=LRS[0],
                                                                 betas=(0.9, 0.95), eps=eps),
                       {"optimizer": "AdamW", "betas": [0.9, 0.95], "eps": eps}, seed, clip)
    optimizer_case(args.out, "optim_sgd",
                   lambda groups: torch.optim.SGD(groups, lr=LRS[0], momentum=0.9, dampening=0.1),
                   {"optimizer": "SGD", "momentum": 0.9, "dampening": 0.1, "nesterov": False},
                   102)
    optimizer_case(args.out, "optim_sgd_nesterov",
                   lambda groups: torch.optim.SGD(groups, lr=LRS[0], momentum=0.9, nesterov=True),
                   {"optimizer": "SGD", "momentum": 0.9, "dampening": 0.0, "nesterov": True},
                   103)
    schedule_case(args.out)


if __name__ == "__main__":
    main()
