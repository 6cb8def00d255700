#!/usr/bin/env python3
"""Golden preference steps on a real model: the tiny Llama and PEFT adapter of
tests/golden/peft_tiny (gen_peft_golden.py), a batch of two preference pairs, and for DPO
(sigmoid, sigmoid with label smoothing, hinge, IPO) and ORPO the loss and the gradient of
every LoRA factor, computed with transformers + PEFT and torch.autograd from the published
formulas (those of gen_preference_golden.py). The DPO reference is the same PEFT model
under `disable_adapter()`, as TRL's DPOTrainer takes it for a PEFT model. Each answer's
log-probability is the sum over its target tokens of log_softmax(logits) at the target (TRL's
selective_log_softmax with the completion mask), in float32 as the model runs.

How to run (CI does NOT run this; it only reads the committed output):

    /work/venv-hf/bin/python tests/golden/gen_preference_model_golden.py

Inputs: ids (4, 12) i64 uniform in [0, 256) from seed 5; rows 0-1 are pair 0's and pair 1's
chosen answers, rows 2-3 their rejected ones (TRL's concatenation). targets (4, 12) i64: ids
shifted left by one, -100 outside each row's answer and on its padding (the prompt ends at
position p, the answer spans targets [p - 1, e - 1)); the models read every position (a
causal model's logits before the padding do not depend on it).

Cases (gtb tensors "<case>.loss" () and "<case>.grad.<name>" for each LoRA factor, the names
fitgrad's: "model.layers.0.self_attn.q_proj.lora_A.weight", ...):
  dpo_sigmoid (beta 0.1), dpo_sigmoid_smooth (beta 0.1, label smoothing 0.2), dpo_hinge
  (beta 0.5), dpo_ipo (beta 0.5), orpo (beta 0.2): the loss of the batch of two pairs;
  dpo_sigmoid_accum: the same as dpo_sigmoid in two micro-batches of one pair each (rows
  {0, 2} then {1, 3}), each micro-batch's loss divided by 2 (gradient accumulation), the
  gradients summed; its loss is the mean of the two.
Without LoRA (a full fine-tune of the base, every parameter trained; gtb "full_<case>.loss" and
"full_<case>.grad.<name>" for the parameters of FULL_PARAMS only, to keep the file small):
  full_dpo_sigmoid (beta 0.1): the reference a frozen copy of the base (the policy at its start,
  so d = 0 and the loss is log 2, its gradient -beta/2 (grad pi_c - grad pi_r) per pair);
  full_orpo (beta 0.2).
Writes tests/golden/preference/model_steps.gtb.
"""
import contextlib
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from peft import PeftModel  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gtb_numpy import write_gtb  # noqa: E402

torch.set_num_threads(2)


def log1mexp(x):
    return torch.where(x < -0.6931471805599453, torch.log1p(-torch.exp(x)), torch.log(-torch.expm1(x)))


def sequence_logps(model, ids, targets):
    logits = model(input_ids=ids, use_cache=False).logits.float()
    mask = targets != -100
    logp = torch.gather(F.log_softmax(logits, dim=-1), 2, targets.clamp(min=0).unsqueeze(-1))[..., 0]
    return (logp * mask).sum(1), mask.sum(1).double()


def loss_of(model, ids, targets, objective, loss_type, beta, eps):
    pi, n = sequence_logps(model, ids, targets)
    pi = pi.double()
    B = ids.shape[0] // 2
    if objective == "dpo":
        with torch.no_grad(), model.disable_adapter():
            ref, _ = sequence_logps(model, ids, targets)
        ref = ref.double()
        lr_c, lr_r = pi[:B] - ref[:B], pi[B:] - ref[B:]
        d = lr_c - lr_r
        if loss_type == "sigmoid":
            losses = -(1 - eps) * F.logsigmoid(beta * d) - eps * F.logsigmoid(-beta * d)
        elif loss_type == "hinge":
            losses = torch.relu(1 - beta * d)
        else:
            losses = (lr_c / n[:B] - lr_r / n[B:] - 1 / (2 * beta)) ** 2
        return losses.mean()
    a = pi / n
    log_odds = (a[:B] - a[B:]) - (log1mexp(a[:B]) - log1mexp(a[B:]))
    return -pi[:B].sum() / n[:B].sum() - (beta * F.logsigmoid(log_odds)).mean()


FULL_PARAMS = ["model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight",
               "model.norm.weight", "lm_head.weight"]


class Frozen:
    """A full model as loss_of's `model`: calls go to the policy, and inside
    disable_adapter() to its frozen copy, the reference."""

    def __init__(self, policy, reference):
        self.policy, self.reference, self.active = policy, reference, policy

    def __call__(self, **kw):
        return self.active(**kw)

    @contextlib.contextmanager
    def disable_adapter(self):
        self.active = self.reference
        try:
            yield
        finally:
            self.active = self.policy


def fitgrad_name(peft_name):
    # base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight
    return peft_name.replace("base_model.model.", "", 1).replace(".default", "")


def main():
    base = LlamaForCausalLM.from_pretrained(os.path.join(HERE, "peft_tiny", "base"),
                                            torch_dtype=torch.float32, attn_implementation="eager")
    model = PeftModel.from_pretrained(base, os.path.join(HERE, "peft_tiny", "adapter"),
                                      is_trainable=True)
    model.eval()  # no dropout (lora_dropout is 0 anyway)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 256, (4, 12), generator=g)
    targets = torch.full((4, 12), -100, dtype=torch.long)
    spans = [(4, 9), (6, 12), (4, 12), (6, 10)]  # [prompt end, answer end) per row
    for row, (p, e) in enumerate(spans):
        targets[row, p - 1:e - 1] = ids[row, p:e]
    out = {"ids": ids.numpy(), "targets": targets.numpy()}
    params = [(fitgrad_name(k), v) for k, v in model.named_parameters() if v.requires_grad]
    cases = [("dpo_sigmoid", "dpo", "sigmoid", 0.1, 0.0), ("dpo_sigmoid_smooth", "dpo", "sigmoid", 0.1, 0.2),
             ("dpo_hinge", "dpo", "hinge", 0.5, 0.0), ("dpo_ipo", "dpo", "ipo", 0.5, 0.0),
             ("orpo", "orpo", "sigmoid", 0.2, 0.0)]
    meta = {"cases": {}, "spans": spans, "torch": torch.__version__}
    for name, objective, loss_type, beta, eps in cases + [("dpo_sigmoid_accum", "dpo", "sigmoid", 0.1, 0.0)]:
        model.zero_grad()
        if name.endswith("_accum"):
            total = 0.0
            for rows in ([0, 2], [1, 3]):
                loss = loss_of(model, ids[rows], targets[rows], objective, loss_type, beta, eps) / 2
                loss.backward()
                total += loss.item()
            value = total
        else:
            loss = loss_of(model, ids, targets, objective, loss_type, beta, eps)
            loss.backward()
            value = loss.item()
        out[f"{name}.loss"] = np.array(value, dtype=np.float32)
        for pname, p in params:
            out[f"{name}.grad.{pname}"] = p.grad.detach().float().numpy().copy()
        meta["cases"][name] = {"objective": objective, "loss_type": loss_type, "beta": beta,
                               "label_smoothing": eps, "loss": value}
        print(name, value)
    for name, objective, beta in [("full_dpo_sigmoid", "dpo", 0.1), ("full_orpo", "orpo", 0.2)]:
        policy = LlamaForCausalLM.from_pretrained(os.path.join(HERE, "peft_tiny", "base"),
                                                  torch_dtype=torch.float32,
                                                  attn_implementation="eager").eval()
        reference = LlamaForCausalLM.from_pretrained(os.path.join(HERE, "peft_tiny", "base"),
                                                     torch_dtype=torch.float32,
                                                     attn_implementation="eager").eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        loss = loss_of(Frozen(policy, reference), ids, targets, objective, "sigmoid", beta, 0.0)
        loss.backward()
        out[f"{name}.loss"] = np.array(loss.item(), dtype=np.float32)
        grads = dict(policy.named_parameters())
        for pname in FULL_PARAMS:
            out[f"{name}.grad.{pname}"] = grads[pname].grad.detach().float().numpy().copy()
        meta["cases"][name] = {"objective": objective, "loss_type": "sigmoid", "beta": beta,
                               "label_smoothing": 0.0, "loss": loss.item(), "full": True}
        print(name, loss.item())
    meta["full_params"] = FULL_PARAMS
    write_gtb(os.path.join(HERE, "preference", "model_steps.gtb"), out, meta)


if __name__ == "__main__":
    main()
