#!/usr/bin/env python3
"""The TRL arm of the SFT throughput comparison (issues 41 and 60): TRL's SFTTrainer with a PEFT
LoRA adapter fine-tunes SmolLM2-135M-Instruct on an instruction file on the CPU, in fp32 or
under bf16 autocast, and measures example tokens per second, with the options of
`fitgrad train`. In the reference environment (bench/reference-env.sh: TRL 1.16, PEFT 0.21,
transformers 5.23, torch 2.15), on the folder `fitgrad export` writes:

    $REFERENCE_ENV/bin/python bench/sft/hf_sft_baseline.py --model FOLDER --packing bfd \\
        --max_steps 10 --seq_len 256 --per_device_train_batch_size 4 --lora_r 16 --threads 2

is the run of

    OMP_NUM_THREADS=2 fitgrad train --model ~/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --data bench/sft/instructions/train.jsonl --seq_len 256 --packing bfd \\
        --per_device_train_batch_size 4 --max_steps 10 --lora_r 16 --lora_alpha 16 \\
        --learning_rate 2e-4 --output_dir DIR

bench/sft/sft_runs.sh speed runs the two alternately and prints the ratio.

Model. --model is a Hugging Face folder (config.json, safetensors, tokenizer): the one
`fitgrad export --model SmolLM2-135M-Instruct.Q4_1.gguf --output FOLDER` writes from the file
fitgrad trains from (tools/fetch-smollm2.sh), so both arms start from the same weights;
transformers 5 will not train a model it read from a GGUF file. Loaded in float32.

Data. Each record ("messages", or alpaca {"instruction", "input", "output"} turned into a
conversation as fitgrad does: the user message "instruction\\ninput") is rendered with the
tokenizer's chat template (apply_chat_template, tokenize=True). The labels are the token ids
where the loss learns and -100 elsewhere, found as fitgrad's SftEncoder finds them (Note [Loss
masks from prefix renderings] in data/sft_encode.cpp): assistant message k trains the tokens
between the rendering of messages[:k] with the generation prompt and that of messages[:k + 1]
(--train_on assistant: every assistant message; last: the last one; all: every token).
SmolLM2's template has no {% generation %} markers for TRL's assistant_only_loss, so the
examples go to SFTTrainer tokenized, as input_ids and labels, which it takes as they are. An
example is cut to --seq_len from the right; one left with no trained token is dropped. The
last ceil(--val_fraction * n) examples are left out, as fitgrad holds them out for validation,
so both arms train on the same examples (the order differs: each arm shuffles with its own
seed).

Rows (--packing). bfd: SFTConfig(packing=True, packing_strategy="bfd", max_length=--seq_len):
TRL packs whole examples into rows of --seq_len by best-fit decreasing, as fitgrad's
--packing bfd, and runs a batch padding-free (its rows end to end in one sequence, the
positions restarting at each example; transformers 5 builds the block-diagonal causal mask
from the positions, so each example attends to itself, as in fitgrad). none: one example a
row, padded (labels -100) to the batch's longest (--padding longest, TRL's default; fitgrad's
--packing none cuts each batch to its longest example too) or to --seq_len (--padding
max_length: SFTConfig pad_to_multiple_of --seq_len), with the attention mask.

Trainer. SFTConfig: AdamW (torch) at --learning_rate with a linear schedule, no warmup, no
weight decay, clipping at 1.0, seed 42, logging every step, no evaluation, no saving, and
gradient_checkpointing and bf16 set from the flags (SFTConfig's defaults turn both on); the
loss is TRL's default ("nll", through the model's fused head), PEFT's LoraConfig on the seven
projections of each block (fitgrad's all-linear), dropout 0.

Timing. A callback times each optimizer step (on_step_begin to on_step_end: forward, backward,
clipping, AdamW and the scheduler for every micro-batch of the step); batch loading and the
trainer's set-up (packing) are outside it. example_tokens_per_second counts the tokens of the
examples the steps trained (prompt and answer; no padding) over the summed step time;
position_tokens_per_second counts every position computed (padding too, as fitgrad's tok/s);
the *_steady values leave the first step out. The last line is machine-readable:

  RESULT arm=trl_sft_peft example_tokens_per_second=... example_tokens_per_second_steady=...
         position_tokens_per_second=... steps=... seconds=... packing=... dtype=... loss=...

--heldout FILE also reports the held-out response loss after training: the mean, over the
trained (assistant) tokens of FILE's examples, of their cross-entropy, as a HELDOUT line.
CI does not run it.
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import reference_env  # noqa: E402

PACKAGES = ("torch", "transformers", "peft", "trl", "accelerate", "datasets")
ALL_LINEAR = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True,
                   help="the Hugging Face folder `fitgrad export` writes")
    p.add_argument("--data", default=os.path.join(HERE, "instructions", "train.jsonl"))
    p.add_argument("--heldout", default="", help="a .jsonl file whose response loss to report")
    p.add_argument("--seq_len", type=int, default=256)
    p.add_argument("--per_device_train_batch_size", type=int, default=4)
    p.add_argument("--gradient_accumulation_steps", type=int, default=1)
    p.add_argument("--max_steps", type=int, default=10)
    p.add_argument("--learning_rate", type=float, default=2e-4)
    p.add_argument("--lr_scheduler_type", default="linear")
    p.add_argument("--warmup_steps", type=int, default=0)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--max_grad_norm", type=float, default=1.0)
    p.add_argument("--lora_r", type=int, default=16)
    p.add_argument("--lora_alpha", type=float, default=16)
    p.add_argument("--lora_dropout", type=float, default=0.0)
    p.add_argument("--lora_target", default=ALL_LINEAR)
    p.add_argument("--train_on", choices=["assistant", "last", "all"], default="assistant")
    p.add_argument("--val_fraction", type=float, default=0.05)
    p.add_argument("--packing", choices=["bfd", "none"], default="bfd",
                   help="bfd: whole examples packed into rows (TRL's packing_strategy bfd); "
                        "none: one padded example a row")
    p.add_argument("--padding", choices=["longest", "max_length"], default="longest",
                   help="with --packing none: rows padded to the batch's longest or to --seq_len")
    p.add_argument("--gradient_checkpointing", action="store_true")
    p.add_argument("--bf16", action="store_true",
                   help="bf16=True: the step under torch's CPU bf16 autocast, the fp32 weights "
                        "kept, as fitgrad's --bf16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--logging_steps", type=int, default=1)
    p.add_argument("--output_dir", default="/tmp/hf_sft_baseline")
    return p.parse_args()


def load_records(path):
    """Each line's messages: a "messages" record as it is, an alpaca record as fitgrad's
    Note [Alpaca records] makes it."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            if "messages" in r:
                out.append(r["messages"])
            elif "instruction" in r:
                user = "\n".join(x for x in (r["instruction"], r.get("input") or "") if x)
                msgs = [{"role": "system", "content": r["system"]}] if r.get("system") else []
                out.append(msgs + [{"role": "user", "content": user},
                                   {"role": "assistant", "content": r["output"]}])
            else:
                sys.exit(f"{path}:{n}: neither a messages nor an alpaca record")
    return out


def encode(tok, messages, train_on, seq_len):
    """(ids, labels) of one conversation cut to seq_len; labels -100 where nothing is learned.
    The trained spans come from prefix renderings (Note [Loss masks from prefix renderings] in
    data/sft_encode.cpp)."""
    def render(msgs, gen):
        return tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=gen,
                                       return_dict=True)["input_ids"]

    ids = render(messages, False)
    trained = [train_on == "all"] * len(ids)
    if train_on != "all":
        turns = [k for k, m in enumerate(messages) if m["role"] == "assistant"]
        if train_on == "last":
            turns = turns[-1:]
        for k in turns:
            before, upto = render(messages[:k], True), render(messages[:k + 1], False)
            if upto != ids[:len(upto)] or before != upto[:len(before)]:
                raise ValueError(f"prefix renderings do not give a mask for message {k}")
            for i in range(len(before), len(upto)):
                trained[i] = True
    ids, trained = ids[:seq_len], trained[:seq_len]
    trained[0] = False  # nothing precedes the first token
    labels = [t if on else -100 for t, on in zip(ids, trained)]
    return ids, labels


def load_model(path):
    """The tokenizer and the float32 model of a Hugging Face folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if not os.path.isfile(os.path.join(path, "config.json")):
        sys.exit(f"{path}: not a Hugging Face model folder (no config.json); write one with "
                 f"`build/fitgrad export --model FILE.gguf --output {path}`")
    return (AutoTokenizer.from_pretrained(path),
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32))


def main():
    a = parse_args()
    reference_env.require(PACKAGES)
    import datasets
    import torch
    torch.set_num_threads(a.threads)
    import transformers
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bar()
    print(reference_env.versions_line(PACKAGES), flush=True)
    print(f"config: {reference_env.torch_line()}", flush=True)

    tok, model = load_model(a.model)

    def dataset(path, val_fraction):
        records = load_records(path)
        n_val = min(len(records), math.ceil(val_fraction * len(records))) if val_fraction > 0 else 0
        out, dropped = [], 0
        for msgs in records[:len(records) - n_val]:
            ids, labels = encode(tok, msgs, a.train_on, a.seq_len)
            if all(x == -100 for x in labels):
                dropped += 1
            else:
                out.append({"input_ids": ids, "labels": labels})
        return out, len(records), n_val, dropped

    t0 = time.perf_counter()
    train, n_records, n_val, dropped = dataset(a.data, a.val_fraction)
    real = sum(len(e["input_ids"]) for e in train)
    learned = sum(sum(1 for x in e["labels"] if x != -100) for e in train)
    print(f"data: {a.data}: {n_records} records, {len(train)} trained ({n_val} left out as "
          f"fitgrad's validation, {dropped} without a trained token in --seq_len {a.seq_len}); "
          f"{real} tokens ({real / len(train):.1f} a record), {learned} trained "
          f"({100 * learned / real:.1f}%), --train_on {a.train_on}; encoded in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)

    counts = {"examples": 0, "positions": 0, "trained": 0}

    class CountingTrainer(SFTTrainer):
        # The batches the steps consume (the loader may build one ahead; it is not counted).
        # Padded batches carry the attention mask; a padding-free (packed) batch is one row
        # of the examples end to end, no padding.
        def compute_loss(self, model, inputs, *args, **kwargs):
            if model.training:
                ids = inputs["input_ids"]
                mask = inputs.get("attention_mask")
                counts["examples"] += int(mask.sum()) if mask is not None else ids.numel()
                counts["positions"] += ids.numel()
                counts["trained"] += int((inputs["labels"][:, 1:] != -100).sum())
            return super().compute_loss(model, inputs, *args, **kwargs)

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self.losses, self.began, self.after_first = [], [], None, None

        def on_step_begin(self, args, state, control, **kw):
            self.began = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self.began)
            if len(self.times) == 1:
                self.after_first = dict(counts)  # for the steady-state rates

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                self.losses.append(logs["loss"])
                print(f"step {state.global_step}: loss {logs['loss']:.4f} | "
                      f"{self.times[-1]:.2f} s", flush=True)

    targets = [t.strip() for t in a.lora_target.split(",") if t.strip()]
    lora = LoraConfig(r=a.lora_r, lora_alpha=a.lora_alpha, lora_dropout=a.lora_dropout,
                      target_modules=targets, bias="none", task_type="CAUSAL_LM")
    packed = a.packing == "bfd"
    config = SFTConfig(
        output_dir=a.output_dir, max_steps=a.max_steps,
        per_device_train_batch_size=a.per_device_train_batch_size,
        gradient_accumulation_steps=a.gradient_accumulation_steps,
        learning_rate=a.learning_rate, lr_scheduler_type=a.lr_scheduler_type,
        warmup_steps=a.warmup_steps, weight_decay=a.weight_decay, max_grad_norm=a.max_grad_norm,
        optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
        max_length=a.seq_len, packing=packed, packing_strategy="bfd",
        pad_to_multiple_of=a.seq_len if not packed and a.padding == "max_length" else None,
        activation_checkpointing=a.gradient_checkpointing, use_cpu=True, bf16=a.bf16, fp16=False,
        seed=a.seed, data_seed=a.seed, logging_steps=a.logging_steps, save_strategy="no",
        eval_strategy="no", report_to=[], dataloader_num_workers=0, disable_tqdm=True)
    timer = StepTimer()
    t0 = time.perf_counter()
    trainer = CountingTrainer(model=model, args=config,
                              train_dataset=datasets.Dataset.from_list(train),
                              processing_class=tok, peft_config=lora, callbacks=[timer])
    setup = time.perf_counter() - t0
    policy = trainer.model
    rows = len(trainer.train_dataset)
    trainable = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    print(f"model: {a.model} ({policy.base_model.model.config._attn_implementation} attention, "
          f"{'bf16 autocast' if a.bf16 else 'fp32'}); LoRA r {a.lora_r} alpha {a.lora_alpha} "
          f"dropout {a.lora_dropout} on {','.join(targets)}: {trainable} trained parameters",
          flush=True)
    print(f"packing: {'bfd' if packed else 'none, padding ' + a.padding}: {len(train)} examples "
          f"in {rows} rows of up to {a.seq_len}; the examples' tokens fill "
          f"{100 * real / (rows * a.seq_len):.1f}% of rows x --seq_len; trainer set up in "
          f"{setup:.1f} s", flush=True)
    trainer.train()

    steps = len(timer.times)
    seconds = sum(timer.times)
    rest = sum(timer.times[1:])
    first = timer.after_first or dict(counts)
    steady = {k: counts[k] - first[k] for k in counts}

    def rate(n, s):
        return n / s if s > 0 else float("nan")

    if a.heldout:
        held, _, _, held_dropped = dataset(a.heldout, 0.0)
        policy.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            for e in held:  # one example a forward: no padding to mask
                ids = torch.tensor([e["input_ids"]])
                target = torch.tensor([e["labels"]])[:, 1:]
                logits = policy(input_ids=ids).logits[:, :-1]
                total += float(torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1),
                    ignore_index=-100, reduction="sum"))
                n += int((target != -100).sum())
        print(f"HELDOUT file={a.heldout} examples={len(held)} dropped={held_dropped} "
              f"response_tokens={n} response_loss={total / max(n, 1):.4f} "
              f"response_ppl={math.exp(total / max(n, 1)):.3f}")

    print(f"RESULT arm=trl_sft_peft "
          f"example_tokens_per_second={rate(counts['examples'], seconds):.1f} "
          f"example_tokens_per_second_steady={rate(steady['examples'], rest):.1f} "
          f"position_tokens_per_second={rate(counts['positions'], seconds):.1f} "
          f"position_tokens_per_second_steady={rate(steady['positions'], rest):.1f} "
          f"trained_tokens_per_second={rate(counts['trained'], seconds):.1f} "
          f"steps={steps} seconds={seconds:.3f} "
          f"first_step_seconds={timer.times[0] if timer.times else float('nan'):.3f} "
          f"example_tokens={counts['examples']} position_tokens={counts['positions']} "
          f"trained_tokens={counts['trained']} seq_len={a.seq_len} "
          f"batch={a.per_device_train_batch_size} grad_accum={a.gradient_accumulation_steps} "
          f"lora_r={a.lora_r} packing={a.packing} "
          f"padding={a.padding if not packed else 'none'} threads={a.threads} "
          f"dtype={'bf16' if a.bf16 else 'fp32'} "
          f"loss={timer.losses[-1] if timer.losses else float('nan'):.4f}", flush=True)


if __name__ == "__main__":
    main()
