#!/usr/bin/env python3
"""Golden values for fitgrad's preference losses (train/preference_loss.h): DPO with the
sigmoid (with and without label smoothing), hinge and IPO losses, and ORPO, computed in
PyTorch float64 from the published formulas as TRL writes them, and their gradients with
respect to each answer's summed negative log-likelihood by torch.autograd.

How to run (needs torch; CI does NOT run this, it only reads the committed output):

    /work/venv-hf/bin/python tests/golden/gen_preference_golden.py

The inputs are summed NLLs of B pairs (the B chosen answers, then the B rejected ones), the
reference model's, and each answer's trained-token count, drawn from a fixed seed. Formulas:
  pi = -nll, ref = -ref_nll; d = (pi_c - ref_c) - (pi_r - ref_r)
  sigmoid: -(1 - eps) logsigmoid(beta d) - eps logsigmoid(-beta d)   (TRL's DPO before 0.20)
  hinge:   relu(1 - beta d)
  ipo:     ((pi_c - ref_c) / n_c - (pi_r - ref_r) / n_r - 1 / (2 beta))^2   (TRL's IPO)
  orpo:    a = pi / n; log_odds = (a_c - a_r) - (log1mexp(a_c) - log1mexp(a_r));
           sum(nll_c) / sum(n_c) - beta mean(logsigmoid(log_odds))  (Hong et al. 2024,
           the NLL over the chosen answers' tokens)
The micro-batch loss is the mean over pairs (plus ORPO's NLL term). Also the logged
statistics: rewards (DPO beta (pi - ref), ORPO beta a), accuracy, margin, logps.

Writes tests/golden/preference/cases.json.
"""
import json
import os

import torch
import torch.nn.functional as F


def log1mexp(x):
    return torch.where(x < -0.6931471805599453, torch.log1p(-torch.exp(x)), torch.log(-torch.expm1(x)))


def case(objective, loss_type, beta, eps, nll, ref_nll, counts):
    nll = torch.tensor(nll, dtype=torch.float64, requires_grad=True)
    ref = -torch.tensor(ref_nll, dtype=torch.float64)
    n = torch.tensor(counts, dtype=torch.float64)
    B = len(counts) // 2
    pi = -nll
    pi_c, pi_r, n_c, n_r = pi[:B], pi[B:], n[:B], n[B:]
    if objective == "dpo":
        lr_c, lr_r = pi_c - ref[:B], pi_r - ref[B:]
        d = lr_c - lr_r
        if loss_type == "sigmoid":
            losses = -(1 - eps) * F.logsigmoid(beta * d) - eps * F.logsigmoid(-beta * d)
        elif loss_type == "hinge":
            losses = torch.relu(1 - beta * d)
        else:
            losses = (lr_c / n_c - lr_r / n_r - 1 / (2 * beta)) ** 2
        loss = losses.mean()
        rc, rr = beta * lr_c, beta * lr_r
        logps_c, logps_r = pi_c, pi_r
        extra = {}
    else:
        a_c, a_r = pi_c / n_c, pi_r / n_r
        log_odds = (a_c - a_r) - (log1mexp(a_c) - log1mexp(a_r))
        ratio = F.logsigmoid(log_odds)
        nll_loss = nll[:B].sum() / n_c.sum()
        loss = nll_loss - (beta * ratio).mean()
        rc, rr = beta * a_c, beta * a_r
        logps_c, logps_r = a_c, a_r
        extra = {"nll_loss": nll_loss.item(), "log_odds_ratio": ratio.mean().item(),
                 "log_odds_chosen": log_odds.mean().item()}
    loss.backward()
    out = {"objective": objective, "loss_type": loss_type, "beta": beta, "label_smoothing": eps,
           "nll": nll.detach().tolist(), "ref_nll": ref_nll, "counts": counts,
           "loss": loss.item(), "grad": nll.grad.tolist(),
           "rewards_chosen": rc.mean().item(), "rewards_rejected": rr.mean().item(),
           "rewards_accuracies": (rc > rr).double().mean().item(),
           "rewards_margins": (rc - rr).mean().item(),
           "logps_chosen": logps_c.mean().item(), "logps_rejected": logps_r.mean().item()}
    out.update(extra)
    return out


def main():
    g = torch.Generator().manual_seed(20261205)
    cases = []
    for objective, loss_type, beta, eps, B in [
            ("dpo", "sigmoid", 0.1, 0.0, 4), ("dpo", "sigmoid", 0.5, 0.2, 3),
            ("dpo", "hinge", 0.1, 0.0, 4), ("dpo", "hinge", 2.0, 0.0, 5),
            ("dpo", "ipo", 0.1, 0.0, 4), ("dpo", "ipo", 1.0, 0.0, 2),
            ("orpo", "sigmoid", 0.1, 0.0, 4), ("orpo", "sigmoid", 1.0, 0.0, 3)]:
        counts = torch.randint(1, 40, (2 * B,), generator=g)
        nll = (counts.double() * (0.2 + 3 * torch.rand(2 * B, generator=g, dtype=torch.float64)))
        ref = nll + torch.randn(2 * B, generator=g, dtype=torch.float64) * 4
        cases.append(case(objective, loss_type, beta, eps, nll.tolist(), ref.tolist(),
                          counts.tolist()))
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preference", "cases.json")
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
