#!/usr/bin/env python3
"""Golden GRPO steps on a real model, as TRL 1.16.0 runs them: the tiny Llama and PEFT adapter
of tests/golden/peft_tiny (gen_peft_golden.py), a batch of B = 4 completions of one prompt
length, and for a few configurations the per-token log-probabilities of the policy and of the
reference (the adapter off), the loss and the gradient of every LoRA factor.

How to run (needs the reference environment of bench/reference-env.sh; CI does NOT run this,
it only reads the committed output):

    .reference-env/bin/python tests/golden/gen_grpo_model_golden.py

TRL's own code does the work (trl/trainer/grpo_trainer.py, trl/trainer/utils.py):
  - add_fused_lm_head(base, temperature=TEMPERATURE, outputs=("log_probs", "entropy")) on the
    PEFT model's base, as GRPOTrainer.__init__ does;
  - GRPOTrainer._get_per_token_logps_and_entropies, called unbound on a stand-in trainer
    (one process, no autocast), gives the completion tokens' log-probabilities and entropies
    through that fused head; under model.disable_adapter() and no_grad the reference's;
  - GRPOTrainer._compute_loss on the same stand-in gives the loss, and loss.backward() the
    LoRA gradients. One micro-batch, gradient accumulation 1.
The old log-probabilities are the policy's own (no grad) minus fixed offsets per completion
(as if the weights had moved since the generation), so the clip is active; the on-policy case
passes none. Advantages are given (the advantage formula is tested by gen_grpo_golden.py).

Inputs: ids (4, 11) i64 uniform in [0, 256) from seed 9: a prompt of P = 5 tokens and a
completion of T = 6 positions, right-padded to the completion lengths [6, 4, 6, 3]
(completion_mask); TRL's attention mask is 0 on the padding, which a causal model's earlier
positions do not see.

Cases (gtb "<case>.loss" (), "<case>.logp" (4, 6), "<case>.grad.<name>" per LoRA factor, the
names fitgrad's), and "old_logp", "ref_logp" (4, 6), "advantages" (4), "completion_mask":
  dapo_token_beta: loss_type dapo, token ratios, beta 0.04, epsilon 0.2 / epsilon_high 0.28;
  grpo_sequence: loss_type grpo, sequence ratios (GSPO), beta 0;
  bnpo_on_policy: loss_type bnpo, token ratios, beta 0, no old log-probabilities.
Writes tests/golden/grpo/model_steps.gtb.
"""
import contextlib
import functools
import os
import sys
import types
from collections import defaultdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import trl  # noqa: E402
from peft import PeftModel  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402
from trl.trainer.utils import add_fused_lm_head  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gtb_numpy import write_gtb  # noqa: E402

assert trl.__version__ == "1.16.0", f"made with trl 1.16.0, this is {trl.__version__}"
torch.set_num_threads(2)

B, P, T = 4, 5, 6
TEMPERATURE = 0.8
LENGTHS = [6, 4, 6, 3]
ADVANTAGES = [1.3, -0.6, 0.4, -1.1]
OLD_OFFSETS = [0.3, -0.35, 0.05, 0.25]  # old = policy - offset: ratios exp(offset) per token


class Accelerator:
    num_processes = 1
    is_main_process = True

    def autocast(self):
        return contextlib.nullcontext()

    def gather(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def stub(loss_type, level, beta):
    s = types.SimpleNamespace(
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level=level,
        beta=beta, args=types.SimpleNamespace(use_bias_correction_kl=True, delta=None,
                                              steps_per_generation=1),
        loss_type=loss_type, epsilon_low=0.2, epsilon_high=0.28, use_vllm=False,
        vllm_importance_sampling_correction=False, model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, max_completion_length=T, accelerator=Accelerator(),
        _entropy_bonus_enabled=False, aux_loss_enabled=False,
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)})
    s._get_per_token_logps_and_entropies = functools.partial(
        GRPOTrainer._get_per_token_logps_and_entropies, s)
    return s


def fitgrad_name(peft_name):
    return peft_name.replace("base_model.model.", "", 1).replace(".default", "")


def main():
    base = LlamaForCausalLM.from_pretrained(os.path.join(HERE, "peft_tiny", "base"),
                                            dtype=torch.float32, attn_implementation="eager")
    model = PeftModel.from_pretrained(base, os.path.join(HERE, "peft_tiny", "adapter"),
                                      is_trainable=True)
    model.eval()
    add_fused_lm_head(model.get_base_model(), temperature=TEMPERATURE,
                      outputs=("log_probs", "entropy"))
    g = torch.Generator().manual_seed(9)
    ids = torch.randint(0, 256, (B, P + T), generator=g)
    completion_mask = torch.tensor([[1 if t < n else 0 for t in range(T)] for n in LENGTHS])
    prompt_mask = torch.ones(B, P, dtype=torch.long)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    logps = functools.partial(GRPOTrainer._get_per_token_logps_and_entropies,
                              stub("grpo", "token", 0.0), model, ids, attention_mask, T)
    with torch.no_grad():
        own, _, _ = logps()
        with model.disable_adapter():
            ref, _, _ = logps()
    old = own - torch.tensor(OLD_OFFSETS).unsqueeze(1) * completion_mask
    out = {"ids": ids.numpy(), "completion_mask": completion_mask.numpy().astype(np.int64),
           "old_logp": old.numpy(), "ref_logp": ref.numpy(),
           "advantages": np.array(ADVANTAGES, dtype=np.float32)}
    params = [(fitgrad_name(k), v) for k, v in model.named_parameters() if v.requires_grad]
    cases = [("dapo_token_beta", "dapo", "token", 0.04, True),
             ("grpo_sequence", "grpo", "sequence", 0.0, True),
             ("bnpo_on_policy", "bnpo", "token", 0.0, False)]
    meta = {"cases": {}, "P": P, "T": T, "temperature": TEMPERATURE, "epsilon": 0.2,
            "epsilon_high": 0.28, "torch": torch.__version__, "trl": trl.__version__}
    for name, loss_type, level, beta, off_policy in cases:
        model.zero_grad()
        s = stub(loss_type, level, beta)
        inputs = {"prompt_ids": ids[:, :P], "prompt_mask": prompt_mask,
                  "completion_ids": ids[:, P:], "completion_mask": completion_mask,
                  "advantages": torch.tensor(ADVANTAGES),
                  "num_items_in_batch": completion_mask.sum()}
        if off_policy:
            inputs["old_per_token_logps"] = old
        if beta != 0.0:
            inputs["ref_per_token_logps"] = ref
        loss = GRPOTrainer._compute_loss(s, model, inputs)
        loss.backward()
        out[f"{name}.loss"] = np.array(loss.item(), dtype=np.float32)
        out[f"{name}.logp"] = own.numpy()
        for pname, p in params:
            out[f"{name}.grad.{pname}"] = p.grad.detach().float().numpy().copy()
        meta["cases"][name] = {"loss_type": loss_type, "importance_sampling_level": level,
                               "beta": beta, "off_policy": off_policy, "loss": loss.item(),
                               "metrics": {k: v[0] for k, v in s._metrics["train"].items()}}
        print(name, loss.item(), meta["cases"][name]["metrics"])
    write_gtb(os.path.join(HERE, "grpo", "model_steps.gtb"), out, meta)


if __name__ == "__main__":
    main()
