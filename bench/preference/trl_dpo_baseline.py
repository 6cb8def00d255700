#!/usr/bin/env python3
"""The TRL arm of the DPO throughput comparison (issue 60): TRL's DPOTrainer with a PEFT LoRA
adapter preference-tunes SmolLM2-135M-Instruct on a pairs file on the CPU, in fp32 (or under
bf16 autocast), and measures pairs and tokens per second, with the options of
`fitgrad train`. In the reference environment (bench/reference-env.sh: TRL 1.16, PEFT 0.21,
transformers 5.23, torch 2.15), on the folder `fitgrad export` writes:

    $REFERENCE_ENV/bin/python bench/preference/trl_dpo_baseline.py --model FOLDER \\
        --max_steps 10 --seq_len 256 --per_device_train_batch_size 2 --lora_r 16 --threads 2

is the run of

    OMP_NUM_THREADS=2 fitgrad train --objective dpo --beta 0.1 --loss_type sigmoid \\
        --model ~/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --data bench/preference/pairs/train.jsonl --seq_len 256 \\
        --per_device_train_batch_size 2 --max_steps 10 --lora_r 16 --lora_alpha 16 \\
        --learning_rate 5e-5 --output_dir DIR

bench/preference/dpo_runs.sh speed runs the two alternately and prints the ratio. The pairs
come from bench/preference/make_pairs.py. CI does not run it.

How it is made
--------------
Model. The Hugging Face folder `fitgrad export` writes from the GGUF fitgrad trains from,
loaded as bench/sft/hf_sft_baseline.py loads it (float32); transformers 5 will not train a
model it read from a GGUF file. The exported tokenizer's eos and pad are <|im_end|> (id 2), as
the file says.

Training. DPOTrainer with ref_model=None and peft_config=LoraConfig(r=--lora_r,
lora_alpha=--lora_alpha, target_modules=--lora_target): TRL wraps the model with the adapter
and takes the same model with the adapter disabled as the reference, one no-grad forward of
the batch each step (precompute_ref_log_probs=False). DPOConfig: beta --beta, loss_type
--loss_type, max_length --seq_len, dropout disabled (TRL's default), AdamW (torch) at
--learning_rate with a linear schedule, seed 42, logging every step, no evaluation, no saving,
and gradient_checkpointing and bf16 set from the flags (DPOConfig's defaults turn both on). The
last ceil(--val_fraction * n) pairs are left out, as fitgrad holds them out for validation
(pass --val_fraction 0 when fitgrad runs with --eval_data), so both arms train on the same
pairs; the order differs (each arm shuffles with its own seed).

How TRL 1.16 tokenizes a pair (what a comparison must know). For a conversational pair the
prompt is rendered with the generation prompt, prompt + chosen and prompt + rejected without
(SmolLM2's template writes its default system message first); the answer is the rendering
past the common prefix: content, <|im_end|> and "\n", the tokens fitgrad's prompt_completion
encoding trains (no eos is appended to a conversational answer). Each sequence is cut to
max_length from the right; a pair whose prompt alone fills max_length is dropped. A batch of B
pairs is 2B rows (the B chosen, then the B rejected), right-padded to the batch's longest,
with the attention mask; the loss is the mean over the B pairs, the log-probabilities from the
model's fused head.

Timing. A callback times each optimizer step (on_step_begin to on_step_end: the reference
forward, the policy's forward and backward, clipping, AdamW and the scheduler for every
micro-batch of the step); batch loading and the set-up (tokenizing the data set) are outside
it. pairs_per_second counts the pairs trained; tokens_per_second their real tokens (the
attention mask's sum over the 2B rows) and padded_tokens_per_second the positions of the
policy's forward (2B x the batch's width; fitgrad's tok/s counts its rows x seq_len); the
*_steady values leave the first step out. The last line is machine-readable:

  RESULT arm=trl_dpo_peft pairs_per_second=... pairs_per_second_steady=...
         tokens_per_second=... padded_tokens_per_second=... steps=... seconds=... loss=...
         rewards_accuracies=... seq_len=... batch=... lora_r=... threads=... dtype=...

loss and rewards_accuracies are the last logged step's (with --logging_steps 1, the last
step's B pairs; rewards/accuracies counts chosen reward > rejected strictly, so a first step,
whose policy equals the reference, logs 0).
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sft"))
sys.path.insert(0, os.path.dirname(HERE))
import hf_sft_baseline  # noqa: E402  (load_model, ALL_LINEAR)
import reference_env  # noqa: E402

PACKAGES = hf_sft_baseline.PACKAGES
# fitgrad's default --lora_target all-linear: every Linear but lm_head; for Llama these seven.
ALL_LINEAR = hf_sft_baseline.ALL_LINEAR


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True,
                   help="the Hugging Face folder `fitgrad export` writes")
    p.add_argument("--data", default=os.path.join(HERE, "pairs", "train.jsonl"),
                   help="a .jsonl file of {prompt, chosen, rejected} pairs")
    p.add_argument("--seq_len", type=int, default=256, help="DPOConfig max_length")
    p.add_argument("--per_device_train_batch_size", type=int, default=2, help="pairs a batch")
    p.add_argument("--gradient_accumulation_steps", type=int, default=1)
    p.add_argument("--max_steps", type=int, default=10)
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--lr_scheduler_type", default="linear")
    p.add_argument("--warmup_steps", type=int, default=0)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--max_grad_norm", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--loss_type", default="sigmoid")
    p.add_argument("--lora_r", type=int, default=16)
    p.add_argument("--lora_alpha", type=float, default=16)
    p.add_argument("--lora_dropout", type=float, default=0.0)
    p.add_argument("--lora_target", default=ALL_LINEAR)
    p.add_argument("--val_fraction", type=float, default=0.05,
                   help="leave out the last ceil(f * n) pairs, as fitgrad's validation split")
    p.add_argument("--gradient_checkpointing", action="store_true")
    p.add_argument("--bf16", action="store_true",
                   help="bf16=True: the step under torch's CPU bf16 autocast, the fp32 weights "
                        "kept, as fitgrad's --bf16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--logging_steps", type=int, default=1)
    p.add_argument("--output_dir", default="/tmp/trl_dpo_baseline")
    return p.parse_args()


def load_pairs(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            if not all(k in r for k in ("prompt", "chosen", "rejected")):
                sys.exit(f"{path}:{n}: not a preference pair (prompt, chosen, rejected)")
            out.append({k: r[k] for k in ("prompt", "chosen", "rejected")})
    return out


def main():
    a = parse_args()
    reference_env.require(PACKAGES)
    import torch
    torch.set_num_threads(a.threads)
    import datasets
    import transformers
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bar()
    print(reference_env.versions_line(PACKAGES), flush=True)
    print(f"config: {reference_env.torch_line()}", flush=True)

    tok, model = hf_sft_baseline.load_model(a.model)
    print(f"tokenizer: eos {tok.eos_token!r} ({tok.eos_token_id}), pad {tok.pad_token!r} "
          f"({tok.pad_token_id}), bos {tok.bos_token!r} ({tok.bos_token_id})", flush=True)

    records = load_pairs(a.data)
    n_val = (min(len(records), math.ceil(a.val_fraction * len(records)))
             if a.val_fraction > 0 else 0)
    train = records[:len(records) - n_val]

    counts = {"pairs": 0, "real": 0, "padded": 0}

    class CountingDPOTrainer(DPOTrainer):
        # The batches the steps consume (the loader may build one ahead; it is not counted).
        def compute_loss(self, model, inputs, *args, **kwargs):
            if model.training:
                counts["pairs"] += int(inputs["input_ids"].shape[0]) // 2
                counts["real"] += int(inputs["attention_mask"].sum())
                counts["padded"] += inputs["input_ids"].numel()
            return super().compute_loss(model, inputs, *args, **kwargs)

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self.logs, self.began, self.after_first = [], [], None, None

        def on_step_begin(self, args, state, control, **kw):
            self.began = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self.began)
            if len(self.times) == 1:
                self.after_first = dict(counts)  # for the steady-state rates

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                self.logs.append(logs)
                print(f"step {state.global_step}: loss {logs['loss']:.4f} | rewards/accuracies "
                      f"{logs.get('rewards/accuracies', float('nan')):.3f} margins "
                      f"{logs.get('rewards/margins', float('nan')):.4f} | "
                      f"{self.times[-1]:.2f} s", flush=True)

    targets = [t.strip() for t in a.lora_target.split(",") if t.strip()]
    lora = LoraConfig(r=a.lora_r, lora_alpha=a.lora_alpha, lora_dropout=a.lora_dropout,
                      target_modules=targets, bias="none", task_type="CAUSAL_LM")
    config = DPOConfig(
        output_dir=a.output_dir, max_steps=a.max_steps,
        per_device_train_batch_size=a.per_device_train_batch_size,
        gradient_accumulation_steps=a.gradient_accumulation_steps,
        learning_rate=a.learning_rate, lr_scheduler_type=a.lr_scheduler_type,
        warmup_steps=a.warmup_steps, weight_decay=a.weight_decay, max_grad_norm=a.max_grad_norm,
        optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
        beta=a.beta, loss_type=[a.loss_type], max_length=a.seq_len,
        precompute_ref_log_probs=False, disable_dropout=True,
        activation_checkpointing=a.gradient_checkpointing, use_cpu=True, bf16=a.bf16, fp16=False,
        seed=a.seed, data_seed=a.seed, logging_steps=a.logging_steps, save_strategy="no",
        eval_strategy="no", report_to=[], dataloader_num_workers=0, disable_tqdm=True)
    timer = StepTimer()
    t0 = time.perf_counter()
    trainer = CountingDPOTrainer(model=model, ref_model=None, args=config,
                                 train_dataset=datasets.Dataset.from_list(train),
                                 processing_class=tok, peft_config=lora, callbacks=[timer])
    setup = time.perf_counter() - t0
    rows = [len(e["prompt_ids"]) + len(e[k]) for e in trainer.train_dataset
            for k in ("chosen_ids", "rejected_ids")]
    over = sum(n > a.seq_len for n in rows)
    print(f"data: {a.data}: {len(records)} pairs, {len(train)} given ({n_val} left out as "
          f"fitgrad's validation), {len(trainer.train_dataset)} kept by TRL; rows (prompt + "
          f"answer) {min(rows)} to {max(rows)} tokens, mean {sum(rows) / len(rows):.1f}; {over} "
          f"rows over --seq_len {a.seq_len} (cut)", flush=True)
    policy = trainer.model
    trainable = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    print(f"model: {a.model} ({policy.base_model.model.config._attn_implementation} attention, "
          f"{'bf16 autocast' if a.bf16 else 'fp32'}); LoRA r {a.lora_r} alpha {a.lora_alpha} "
          f"dropout {a.lora_dropout} on {','.join(targets)}: {trainable} trained parameters; "
          f"DPO beta {a.beta} loss {a.loss_type}; trainer set up (tokenizing included) in "
          f"{setup:.1f} s", flush=True)
    trainer.train()

    steps = len(timer.times)
    seconds = sum(timer.times)
    rest = sum(timer.times[1:])
    first = timer.after_first or dict(counts)
    steady = {k: counts[k] - first[k] for k in counts}
    last = timer.logs[-1] if timer.logs else {}

    def rate(n, s):
        return n / s if s > 0 else float("nan")

    print(f"RESULT arm=trl_dpo_peft pairs_per_second={rate(counts['pairs'], seconds):.3f} "
          f"pairs_per_second_steady={rate(steady['pairs'], rest):.3f} "
          f"tokens_per_second={rate(counts['real'], seconds):.1f} "
          f"tokens_per_second_steady={rate(steady['real'], rest):.1f} "
          f"padded_tokens_per_second={rate(counts['padded'], seconds):.1f} "
          f"padded_tokens_per_second_steady={rate(steady['padded'], rest):.1f} "
          f"steps={steps} seconds={seconds:.3f} "
          f"first_step_seconds={timer.times[0] if timer.times else float('nan'):.3f} "
          f"pairs={counts['pairs']} real_tokens={counts['real']} "
          f"padded_tokens={counts['padded']} "
          f"loss={last.get('loss', float('nan')):.4f} "
          f"rewards_accuracies={last.get('rewards/accuracies', float('nan')):.4f} "
          f"seq_len={a.seq_len} batch={a.per_device_train_batch_size} "
          f"grad_accum={a.gradient_accumulation_steps} lora_r={a.lora_r} threads={a.threads} "
          f"dtype={'bf16' if a.bf16 else 'fp32'}", flush=True)


if __name__ == "__main__":
    main()
