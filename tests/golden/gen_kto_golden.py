#!/usr/bin/env python3
"""Golden values for fitgrad's KTO loss (train/objectives/kto.h) from TRL 1.16's own code:
KTOTrainer._compute_loss (trl/trainer/kto_trainer.py) is called on a stand-in for the trainer
and the model, so that TRL's statements compute the KL term, the chosen and rejected losses of
loss_type "kto" and "apo_zero_unpaired", the desirable and undesirable weights, the mean, and
the logged kl, rewards/* and logps/*. The stand-in model answers TRL's forwards with given
per-token log-probabilities (one completion token a row, whose log-probability is the row's
summed one); the reference's values come in as TRL's precomputed ref_logps and ref_KL_logps.
The gradient with respect to each row's summed negative log-likelihood is torch.autograd's
through TRL's statements (the mismatched rows' forward runs under TRL's no_grad: 0).

How to run (needs torch and trl 1.16, the reference venv; CI does NOT run this, it only reads
the committed output):

    /work/refenv/bin/python tests/golden/gen_kto_golden.py

The inputs of a case: B examples' labels (True: desirable), the policy's summed NLL of each
row (the B examples' own completions, then the B mismatched completions of TRL's KL dataset),
the reference's, drawn from a fixed seed. Writes tests/golden/kto/cases.json.
"""
import collections
import json
import os
import types

import torch
import trl
from trl.trainer.kto_trainer import KTOTrainer


def case(loss_type, beta, desirable_weight, undesirable_weight, labels, nll, ref_nll):
    B = len(labels)
    own = (-torch.tensor(nll[:B], dtype=torch.float64)).requires_grad_()  # the policy's logps
    mismatched = -torch.tensor(nll[B:], dtype=torch.float64)

    def model(input_ids, **kwargs):
        # Row b of a forward: a prompt token and one completion token, its log-probability the
        # row's summed one. The KL forward is told apart by its ids (1, the main one's are 0).
        logps = mismatched if bool(input_ids[0, 0] == 1) else own
        zeros = torch.zeros(B, 1, dtype=torch.float64)
        return types.SimpleNamespace(log_probs=logps[:, None], entropy=zeros, mean_logits=zeros)

    model.training = True
    trainer = types.SimpleNamespace(
        model=model, ref_model=None, precompute_ref_logps=True, loss_type=loss_type, beta=beta,
        desirable_weight=desirable_weight, undesirable_weight=undesirable_weight,
        calculate_KL=loss_type not in ["apo_zero_unpaired"], aux_loss_enabled=False,
        accelerator=types.SimpleNamespace(device="cpu", gather_for_metrics=lambda x: x),
        _metrics={"train": collections.defaultdict(list)}, _total_train_tokens=0, _tp_size=1)
    trainer._compute_kl_logps = types.MethodType(KTOTrainer._compute_kl_logps, trainer)
    ones = torch.ones(B, 2, dtype=torch.long)
    inputs = {"input_ids": 0 * ones, "attention_mask": ones, "completion_mask": ones,
              "KL_input_ids": ones, "KL_attention_mask": ones, "KL_completion_mask": ones,
              "label": torch.tensor(labels), "ref_logps": -torch.tensor(ref_nll[:B], dtype=torch.float64),
              "ref_KL_logps": -torch.tensor(ref_nll[B:], dtype=torch.float64)}
    loss = KTOTrainer._compute_loss(trainer, model, inputs, False)
    loss.backward()
    grad = (-own.grad).tolist() + [0.0] * B  # d loss / d nll = -d loss / d logp
    names = ["kl", "rewards/chosen", "logps/chosen", "rewards/rejected", "logps/rejected",
             "rewards/margins"]
    metrics = {k: v[0] for k, v in trainer._metrics["train"].items() if k in names}
    return {"loss_type": loss_type, "beta": beta, "desirable_weight": desirable_weight,
            "undesirable_weight": undesirable_weight, "labels": labels, "nll": nll,
            "ref_nll": ref_nll, "loss": loss.item(), "grad": grad, "metrics": metrics}


def main():
    g = torch.Generator().manual_seed(20261207)
    cases = []
    for loss_type, beta, dw, uw, labels, kl_shift in [
            ("kto", 0.1, 1.0, 1.0, [True, False, True, False], 2.0),
            ("kto", 0.5, 1.0, 1.33, [True, True, False, True, False], 3.0),
            ("kto", 0.1, 1.0, 1.0, [True, False, False], -3.0),  # kl clamped at 0
            ("kto", 2.0, 0.7, 1.0, [True, True, True], 1.0),  # no undesirable example
            ("kto", 0.3, 1.0, 2.0, [False, False], 0.5),  # no desirable example
            ("apo_zero_unpaired", 0.1, 1.0, 1.0, [True, False, True, False], 2.0),
            ("apo_zero_unpaired", 1.0, 1.5, 0.5, [False, True, True], -1.0)]:
        B = len(labels)
        counts = torch.randint(1, 40, (2 * B,), generator=g)
        nll = counts.double() * (0.2 + 3 * torch.rand(2 * B, generator=g, dtype=torch.float64))
        ref = nll + torch.randn(2 * B, generator=g, dtype=torch.float64) * 4
        ref[B:] += kl_shift  # the policy's mismatched rows above or below the reference's
        cases.append(case(loss_type, beta, dw, uw, labels, nll.tolist(), ref.tolist()))
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kto", "cases.json")
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "trl": trl.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
