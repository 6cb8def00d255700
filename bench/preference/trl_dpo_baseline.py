#!/usr/bin/env python3
"""The TRL arm of the DPO throughput comparison: TRL's DPOTrainer with a PEFT LoRA adapter
preference-tunes SmolLM2-135M-Instruct on a pairs file on the CPU, in fp32 (or under bf16
autocast), and measures pairs and tokens per second, with the options of `fitgrad train`:

    /work/venv-hf/bin/python bench/preference/trl_dpo_baseline.py --max_steps 10 \\
        --seq_len 256 --per_device_train_batch_size 2 --lora_r 16 --threads 2

is the run of

    OMP_NUM_THREADS=2 fitgrad train --objective dpo --beta 0.1 --loss_type sigmoid \\
        --model ~/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --data bench/preference/pairs/train.jsonl --seq_len 256 \\
        --per_device_train_batch_size 2 --max_steps 10 --lora_r 16 --lora_alpha 16 \\
        --learning_rate 5e-5 --output_dir DIR

The pairs come from bench/preference/make_pairs.py. Needs torch, transformers 4.46.3, peft
0.13.2, trl 0.12.2, accelerate, gguf, and datasets and rich (trl's requirements; in
/work/venv-hf: `/work/venv-hf/bin/pip install datasets==3.1.0 rich`, the datasets of trl
0.12.2's time; a newer one pulls a huggingface_hub that transformers 4.46.3 cannot use). CI
does not run it.

How it is made
--------------
Model. SmolLM2-135M-Instruct from the GGUF file (--model), loaded as
bench/sft/hf_sft_baseline.py loads it: AutoTokenizer and AutoModelForCausalLM with gguf_file=,
float32 weights, the embeddings tied. transformers 4.46.3 reads the GGUF tokenizer with
eos_token "<|im_start|>" (id 1) and no pad token, though the file says eos 2 and pad 2
(<|im_end|>) as the Hub tokenizer does; TRL appends eos_token_id to every answer and pads with
pad_token_id, so both are set to the file's ids here (--gguf_eos keeps transformers' reading).

Training. DPOTrainer with ref_model=None and peft_config=LoraConfig(r=--lora_r,
lora_alpha=--lora_alpha, target_modules=--lora_target): TRL wraps the model with the adapter
and takes the same model with the adapter disabled as the reference, one no-grad forward of
the batch each step (precompute_ref_log_probs=False). DPOConfig: beta --beta, loss_type
--loss_type, max_length --seq_len (max_prompt_length and max_completion_length unset),
dropout disabled (TRL's default), AdamW (torch) at --learning_rate with a linear schedule, seed
42, logging every step, no evaluation, no saving. The last ceil(--val_fraction * n) pairs are
left out, as fitgrad holds them out for validation (pass --val_fraction 0 when fitgrad runs with
--eval_data), so both arms train on the same pairs; the order differs (each arm shuffles with
its own seed).

How TRL 0.12.2 tokenizes a pair (what a comparison must know)
------------------------------------------------------------
- maybe_apply_chat_template renders the prompt with the generation prompt, and prompt + chosen
  and prompt + rejected without; an answer's text is the rendering past the prompt's
  ("Emma<|im_end|>\\n"). SmolLM2's template writes its default system message first.
- tokenize_row tokenizes the prompt and each answer text separately with
  add_special_tokens=False (no bos: SmolLM2's template starts with <|im_start|>, its bos) and
  appends eos_token_id to each answer: an answer trains content, <|im_end|>, "\\n" and one more
  <|im_end|>, a token more than fitgrad's prompt_completion encoding (which ends at the
  template's "\\n"). For SmolLM2 the separate tokenizations equal the tokenization of the whole
  rendering (checked here for every pair).
- No truncation at tokenization (max_prompt_length, max_completion_length unset); the batch is
  cut to max_length columns from the right after concatenation (truncation_mode plays no part
  for a decoder-only model), and a pair is never dropped. This script reports how many pairs
  exceed --seq_len (none of make_pairs.py's at 256).
- Padding is dynamic: a batch of B pairs is 2B rows (the B chosen, then the B rejected), each
  row the prompt (left-padded) and the answer (right-padded), then flushed left and cut at the
  first all-padding column. Version 0.12.2 cuts there minus one (`[:, :first_empty_col - 1]`),
  so when any column is all padding, the last column holding a token goes too: the longest
  row(s) lose their last token (the appended eos) from the forward and the log-probabilities.
  The counts below are of the positions the model computes (after that cut), and
  dropped_tokens counts what the cut took.
- The loss is the mean over the B pairs; logits are log-softmaxed in full (B x T x vocab).

Timing. A callback times each optimizer step (on_step_begin to on_step_end: the reference
forward, the policy's forward and backward, clipping, AdamW and the scheduler for every
micro-batch of the step); batch loading and the set-up (tokenizing the data set) are outside
it. A forward pre-hook on the decoder reads the policy forward's input (the reference forward
runs under no_grad and is not counted): tokens_per_second counts its real tokens (the attention
mask's sum over the 2B rows), padded_tokens_per_second its positions (2B x the batch's width;
fitgrad's tok/s counts 2B x seq_len, every row padded to --seq_len), pairs_per_second the pairs;
the *_steady values leave the first step out. The last line is machine-readable:

  RESULT arm=trl_dpo_peft pairs_per_second=... tokens_per_second=...
         padded_tokens_per_second=... ..._steady=... steps=... seconds=... loss=...
         rewards_accuracies=... seq_len=... batch=... lora_r=... threads=...

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
import hf_sft_baseline  # noqa: E402  (load_model, DEFAULT_MODEL, ALL_LINEAR)

DEFAULT_MODEL = hf_sft_baseline.DEFAULT_MODEL
# fitgrad's default --lora_target all-linear: every Linear but lm_head; for Llama these seven.
ALL_LINEAR = hf_sft_baseline.ALL_LINEAR


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="a Hugging Face model folder or a .gguf file")
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
    p.add_argument("--gguf_eos", action="store_true",
                   help="keep the eos (<|im_start|>) and missing pad transformers reads from "
                        "the GGUF (pad then falls back to eos)")
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
    import torch
    torch.set_num_threads(a.threads)
    import datasets
    import peft
    import transformers
    import trl
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer
    from trl.data_utils import maybe_apply_chat_template
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bar()

    tok, model = hf_sft_baseline.load_model(a.model)
    if a.model.endswith(".gguf") and not a.gguf_eos:  # the file's ids (see the docstring)
        for role in ("eos", "pad"):
            i = getattr(model.config, f"{role}_token_id")
            if i is not None:
                setattr(tok, f"{role}_token", tok.convert_ids_to_tokens(i))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    print(f"tokenizer: eos {tok.eos_token!r} ({tok.eos_token_id}), pad {tok.pad_token!r} "
          f"({tok.pad_token_id}), bos {tok.bos_token!r} ({tok.bos_token_id})", flush=True)

    records = load_pairs(a.data)
    n_val = (min(len(records), math.ceil(a.val_fraction * len(records)))
             if a.val_fraction > 0 else 0)
    train = records[:len(records) - n_val]

    # What TRL's tokenize_row makes of each pair (prompt ids + answer ids + eos), to report the
    # lengths and to check that separate tokenization equals the whole rendering's.
    t0 = time.perf_counter()
    lengths, mismatched, over = [], 0, 0
    for r in train:
        text = maybe_apply_chat_template(r, tok)
        prompt = tok(text["prompt"], add_special_tokens=False)["input_ids"]
        for key in ("chosen", "rejected"):
            answer = tok(text[key], add_special_tokens=False)["input_ids"]
            whole = tok.apply_chat_template(r["prompt"] + r[key], tokenize=True)
            mismatched += whole != prompt + answer
            n = len(prompt) + len(answer) + 1
            lengths.append(n)
            over += n > a.seq_len
    print(f"data: {a.data}: {len(records)} pairs, {len(train)} trained ({n_val} left out as "
          f"fitgrad's validation); TRL's rows (prompt + answer + eos) {min(lengths)} to "
          f"{max(lengths)} tokens, mean {sum(lengths) / len(lengths):.1f}; {over} rows over "
          f"--seq_len {a.seq_len}; {mismatched} answers whose separate tokenization differs "
          f"from the whole rendering's; checked in {time.perf_counter() - t0:.1f} s", flush=True)

    counts = {"pairs": 0, "real": 0, "padded": 0, "data": 0}

    class CountingDPOTrainer(DPOTrainer):
        # The batches the steps consume: the tokens the collated batch holds (before TRL's
        # flush and cut), for dropped_tokens.
        def compute_loss(self, model, inputs, *args, **kwargs):
            if model.training:
                counts["pairs"] += int(inputs["prompt_input_ids"].shape[0])
                counts["data"] += int(2 * inputs["prompt_attention_mask"].sum()
                                      + inputs["chosen_attention_mask"].sum()
                                      + inputs["rejected_attention_mask"].sum())
            return super().compute_loss(model, inputs, *args, **kwargs)

    def count_policy_forward(module, args, kwargs):
        # The decoder's input in the policy's forward (grad on); the reference's runs without.
        if module.training and torch.is_grad_enabled():
            ids = kwargs.get("input_ids", args[0] if args else None)
            mask = kwargs.get("attention_mask")
            counts["padded"] += ids.numel()
            counts["real"] += int(mask.sum()) if mask is not None else ids.numel()

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
        beta=a.beta, loss_type=a.loss_type, max_length=a.seq_len, max_prompt_length=None,
        max_completion_length=None, precompute_ref_log_probs=False, disable_dropout=True,
        use_cpu=True, bf16=a.bf16, fp16=False, seed=a.seed, data_seed=a.seed,
        logging_steps=a.logging_steps, save_strategy="no", eval_strategy="no", report_to=[],
        dataloader_num_workers=0, disable_tqdm=True)
    timer = StepTimer()
    t0 = time.perf_counter()
    trainer = CountingDPOTrainer(model=model, ref_model=None, args=config,
                                 train_dataset=datasets.Dataset.from_list(train),
                                 processing_class=tok, peft_config=lora, callbacks=[timer])
    setup = time.perf_counter() - t0
    policy = trainer.model
    policy.base_model.model.model.register_forward_pre_hook(count_policy_forward,
                                                            with_kwargs=True)
    trainable = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    print(f"model: {a.model} ({policy.base_model.model.config._attn_implementation} attention, "
          f"{'bf16 autocast' if a.bf16 else 'fp32'}); LoRA r {a.lora_r} alpha {a.lora_alpha} "
          f"dropout {a.lora_dropout} on {','.join(targets)}: {trainable} trained parameters; "
          f"DPO beta {a.beta} loss {a.loss_type}; torch {torch.__version__}, transformers "
          f"{transformers.__version__}, peft {peft.__version__}, trl {trl.__version__}, "
          f"datasets {datasets.__version__}, {torch.get_num_threads()} threads; trainer set up "
          f"(tokenizing included) in {setup:.1f} s", flush=True)
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
          f"tokens_per_second={rate(counts['real'], seconds):.1f} "
          f"padded_tokens_per_second={rate(counts['padded'], seconds):.1f} "
          f"pairs_per_second_steady={rate(steady['pairs'], rest):.3f} "
          f"tokens_per_second_steady={rate(steady['real'], rest):.1f} "
          f"padded_tokens_per_second_steady={rate(steady['padded'], rest):.1f} "
          f"steps={steps} seconds={seconds:.3f} "
          f"first_step_seconds={timer.times[0] if timer.times else float('nan'):.3f} "
          f"pairs={counts['pairs']} real_tokens={counts['real']} "
          f"padded_tokens={counts['padded']} dropped_tokens={counts['data'] - counts['real']} "
          f"loss={last.get('loss', float('nan')):.4f} "
          f"rewards_accuracies={last.get('rewards/accuracies', float('nan')):.4f} "
          f"seq_len={a.seq_len} batch={a.per_device_train_batch_size} "
          f"grad_accum={a.gradient_accumulation_steps} lora_r={a.lora_r} threads={a.threads} "
          f"dtype={'bf16' if a.bf16 else 'fp32'}", flush=True)


if __name__ == "__main__":
    main()
