#!/usr/bin/env python3
"""Golden values for fitgrad's GRPO loss (train/objectives/grpo_loss.h): the loss, its gradient
with respect to each token's log-probability, the advantages and the logged statistics, as
TRL 1.16.0's GRPOTrainer computes them.

How to run (needs the reference environment of bench/reference-env.sh; CI does NOT run this,
it only reads the committed output):

    bash bench/reference-env.sh            # once: .reference-env/ with trl 1.16.0
    .reference-env/bin/python tests/golden/gen_grpo_golden.py

Which TRL code it follows (trl 1.16.0, trl/trainer/grpo_trainer.py and grpo_config.py):
  - The loss, its gradient and the statistics come from TRL's own GRPOTrainer._compute_loss,
    called unbound on a stand-in trainer object (`Stub` below): its
    _get_per_token_logps_and_entropies returns the case's per-token log-probabilities as a
    float64 leaf (so loss.backward() gives d loss / d logp) and its entropies; the
    accelerator is one process (gather and reduce are the identity). Everything between, the
    importance ratio (importance_sampling_level token or sequence), the clipping with
    epsilon_low = epsilon and epsilon_high (epsilon when None), the k3 KL estimator
    exp(ref - logp) - (ref - logp) - 1 times the ratio (use_bias_correction_kl, True by
    default), the four normalizations (grpo, bnpo, dr_grpo with max_completion_length, dapo
    with num_items_in_batch * gradient accumulation steps / steps_per_generation) and the
    metrics clip_ratio/{low_mean,high_mean,region_mean,low_min,high_max}, kl and entropy, is
    TRL's code running. old_per_token_logps None is TRL's on-policy case (the detached
    log-probabilities themselves).
  - The advantages are _generate_and_score_completions' lines for the default
    multi_objective_aggregation "sum_then_normalize", reproduced here (that method needs a
    model and generation to run): rewards = nansum over functions of reward * weight; the
    group's nanmean subtracted; divided by (std + 1e-4) where std is TRL's nanstd (Bessel's
    correction) over the group (scale_rewards "group") or the whole batch ("batch"), and not
    divided for "none"; frac_reward_zero_std = mean of isclose(std, 0). TRL's own nanstd is
    called.
  - mask_truncated_completions as _generate_and_score_completions applies it: a completion
    whose last token is neither an end-of-sequence id nor the pad id gets its completion mask
    zeroed before the loss, and num_items_in_batch counts the mask after that.

Everything is float64, so fitgrad's host computation in double should agree to rounding.
Writes tests/golden/grpo/cases.json: two input sets (off-policy with old log-probabilities,
and on-policy) of B = 12 completions (3 prompts x G = 4) of up to T = 6 tokens, and one case
per configuration with TRL's results.
"""
import itertools
import json
import math
import os
import types

import torch
import trl
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.utils import nanstd

assert trl.__version__ == "1.16.0", f"made with trl 1.16.0, this is {trl.__version__}"

B, T, G = 12, 6, 4
MAX_COMPLETION_LENGTH = 8


def make_inputs(seed, on_policy):
    g = torch.Generator().manual_seed(seed)
    u = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
    logp = -(0.05 + 3.0 * u(B, T))
    # Off-policy: old log-probabilities within +-0.45 of the policy's, so the ratios straddle
    # both clipping bounds.
    # A per-completion offset moves whole sequences past the bounds too (GSPO's ratio).
    offset = torch.tensor([0.35, -0.3, 0.0, 0.3, -0.35, 0.1, 0.3, -0.3, 0.25, -0.25, 0.0, 0.4],
                          dtype=torch.float64).unsqueeze(1)
    old = None if on_policy else logp - 0.9 * (u(B, T) - 0.5) - offset
    ref = logp + 0.8 * (u(B, T) - 0.5)
    lengths = [6, 4, 6, 2, 5, 6, 3, 1, 6, 5, 2, 4]
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(T)] for n in lengths], dtype=torch.float64)
    # A completion is truncated when it ran to the length limit without an end token: rows
    # 0, 5 and 8 here (the generator would have hit T).
    truncated = [True, False, False, False, False, True, False, False, True, False, False, False]
    # Two reward functions, weights 1 and 0.5; the second group's first function is the same
    # for every completion, and in the third group both are (a group without signal).
    r1 = torch.tensor([1.0, 0.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5], dtype=torch.float64)
    r2 = torch.tensor([0.2, -0.4, 0.9, 0.1, -0.3, 0.3, 0.7, -0.1, 0.2, 0.2, 0.2, 0.2],
                      dtype=torch.float64)
    rewards = torch.stack([r1, r2], dim=1)  # (B, 2)
    entropies = 0.2 + 2.0 * u(B, T)
    return dict(logp=logp, old=old, ref=ref, mask=mask, truncated=truncated, rewards=rewards,
                entropies=entropies)


def advantages_of(rewards_per_func, weights, scale_rewards):
    """_generate_and_score_completions, multi_objective_aggregation='sum_then_normalize'."""
    rewards = (rewards_per_func * torch.tensor(weights, dtype=torch.float64).unsqueeze(0)).nansum(dim=1)
    mean_grouped = torch.nanmean(rewards.view(-1, G), dim=1).repeat_interleave(G, dim=0)
    if scale_rewards in ["group", "none"]:
        std = nanstd(rewards.view(-1, G), dim=1).repeat_interleave(G, dim=0)
    else:
        std = nanstd(rewards).expand_as(rewards)
    adv = rewards - mean_grouped
    if scale_rewards != "none":
        adv = adv / (std + 1e-4)
    is_std_zero = torch.isclose(std, torch.zeros_like(std))
    adv = torch.nan_to_num(adv, nan=0.0)
    return adv, {
        "reward": torch.nanmean(rewards).item(),
        "reward_std": nanstd(rewards).item(),
        "frac_reward_zero_std": is_std_zero.double().mean().item(),
    }


class Accelerator:
    num_processes = 1

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def run_trl(inp, cfg):
    """TRL's _compute_loss on a stand-in trainer: loss, d loss / d logp, metrics."""
    mask = inp["mask"].clone()
    if cfg["mask_truncated_completions"]:
        keep = torch.tensor([0.0 if t else 1.0 for t in inp["truncated"]], dtype=torch.float64)
        mask = mask * keep.unsqueeze(1)
    adv, reward_stats = advantages_of(inp["rewards"], cfg["reward_weights"], cfg["scale_rewards"])
    logp = inp["logp"].clone().requires_grad_(True)
    entropies = inp["entropies"]
    args = types.SimpleNamespace(use_bias_correction_kl=True, delta=None,
                                 steps_per_generation=cfg["steps_per_generation"])
    stub = types.SimpleNamespace(
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        importance_sampling_level=cfg["importance_sampling_level"],
        beta=cfg["beta"],
        args=args,
        loss_type=cfg["loss_type"],
        epsilon_low=cfg["epsilon"],
        epsilon_high=cfg["epsilon_high"] if cfg["epsilon_high"] is not None else cfg["epsilon"],
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=cfg["gradient_accumulation_steps"],
        max_completion_length=MAX_COMPLETION_LENGTH,
        accelerator=Accelerator(),
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False,
        _metrics={"train": {}, "eval": {}},
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, entropies, None),
    )
    from collections import defaultdict

    stub._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
        "prompt_mask": torch.ones(B, 1, dtype=torch.long),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": mask,
        "advantages": adv,
        "num_items_in_batch": torch.tensor(cfg["num_items_in_batch"], dtype=torch.float64)
        if cfg["num_items_in_batch"] is not None else mask.sum(),
    }
    if inp["old"] is not None:
        inputs["old_per_token_logps"] = inp["old"]
    if cfg["beta"] != 0.0:
        inputs["ref_per_token_logps"] = inp["ref"]
    loss = GRPOTrainer._compute_loss(stub, None, inputs)
    loss.backward()
    metrics = {k: v[0] for k, v in stub._metrics["train"].items()}
    metrics.update(reward_stats)
    return loss.item(), logp.grad, adv, metrics


def flat(t):
    return [float(x) for x in t.reshape(-1).tolist()]


def clean(x):
    return None if isinstance(x, float) and math.isnan(x) else x


def main():
    sets = {"off_policy": make_inputs(7, False), "on_policy": make_inputs(7, True)}
    cases = []
    scale_cycle = itertools.cycle(["group", "batch", "none"])
    for set_name in sets:
        for loss_type, level, beta in itertools.product(
                ["grpo", "bnpo", "dr_grpo", "dapo"], ["token", "sequence"], [0.0, 0.04]):
            trunc = (len(cases) % 2) == 1
            cfg = {
                "inputs": set_name,
                "loss_type": loss_type,
                "importance_sampling_level": level,
                "beta": beta,
                "epsilon": 0.2,
                "epsilon_high": 0.28 if len(cases) % 3 != 2 else None,
                "scale_rewards": next(scale_cycle),
                "mask_truncated_completions": trunc,
                "reward_weights": [1.0, 0.5],
                # dapo: this micro-batch is one of two of its generation batch (accumulated
                # over two micro-batches), whose active tokens are these plus 17.
                "gradient_accumulation_steps": 2 if loss_type == "dapo" else 1,
                "steps_per_generation": 2 if loss_type == "dapo" else 1,
                "max_completion_length": MAX_COMPLETION_LENGTH,
                "num_items_in_batch": None,
            }
            inp = sets[set_name]
            if loss_type == "dapo":
                m = inp["mask"].clone()
                if trunc:
                    m = m * torch.tensor([0.0 if t else 1.0 for t in inp["truncated"]],
                                         dtype=torch.float64).unsqueeze(1)
                cfg["num_items_in_batch"] = float(m.sum().item()) + 17.0
            loss, grad, adv, metrics = run_trl(inp, cfg)
            cases.append({
                "config": cfg,
                "loss": loss,
                "grad": flat(grad),
                "advantages": flat(adv),
                "metrics": {k: clean(v) for k, v in sorted(metrics.items())},
            })
    out = {
        "trl_version": trl.__version__,
        "torch_version": torch.__version__,
        "B": B, "T": T, "G": G,
        "inputs": {
            name: {
                "logp": flat(s["logp"]),
                "old_logp": None if s["old"] is None else flat(s["old"]),
                "ref_logp": flat(s["ref"]),
                "mask": flat(s["mask"]),
                "truncated": s["truncated"],
                "rewards": flat(s["rewards"]),
                "entropies": flat(s["entropies"]),
            } for name, s in sets.items()
        },
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpo", "cases.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
