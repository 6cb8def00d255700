#!/usr/bin/env python3
"""The Hugging Face arm of the SFT throughput comparison (issue 41): transformers' Trainer with
a PEFT LoRA adapter fine-tunes SmolLM2-135M-Instruct on an instruction file on the CPU, in
fp32, and measures tokens per second, with the options of `fitgrad train`:

    /work/venv-hf/bin/python bench/sft/hf_sft_baseline.py --max_steps 10 --seq_len 256 \\
        --per_device_train_batch_size 4 --lora_r 16 --threads 2

is the run of

    OMP_NUM_THREADS=2 fitgrad train --model ~/.cache/fitgrad/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --data bench/sft/instructions/train.jsonl --seq_len 256 \\
        --per_device_train_batch_size 4 --max_steps 10 --lora_r 16 --lora_alpha 16 \\
        --learning_rate 2e-4 --packing none --output_dir DIR

(--packing none: one padded example a row, as here; fitgrad's default packs them, bfd). fitgrad's
tok/s counts every position (batch x seq_len a micro-batch), this script's
padded_tokens_per_second does too.

Data. Each record ("messages", or alpaca {"instruction", "input", "output"} turned into a
conversation as fitgrad does: the user message "instruction\\ninput") is rendered with the
tokenizer's chat template (apply_chat_template, tokenize=True). The labels are the token ids
where the loss learns and -100 elsewhere, found as fitgrad's SftEncoder finds them (Note [Loss
masks from prefix renderings] in data/sft_encode.cpp): assistant message k trains the tokens
between the rendering of messages[:k] with the generation prompt and that of messages[:k + 1]
(--train_on assistant: every assistant message; last: the last one; all: every token). An
example is cut to --seq_len from the right; one left with no trained token is dropped. The
last ceil(--val_fraction * n) examples are left out, as fitgrad holds them out for validation,
so both arms train on the same examples (the order differs: each arm shuffles with its own
seed). No packing: a batch row is one example, padded (labels -100) to --seq_len
(--padding max_length, as fitgrad's slots) or to the batch's longest (--padding longest).
Right padding under a causal mask does not change the real tokens' logits, so no attention
mask is passed by default, as fitgrad passes none; --attention_mask passes one.

Model. --model is a Hugging Face folder (config.json + safetensors) or a .gguf file, which
transformers dequantizes to f32 when it loads it (the default is the Q4_1 GGUF that
tools/fetch-smollm2.sh fetches, the file fitgrad trains from); its head is the token
embedding (tied), as in fitgrad. No safetensors folder of SmolLM2-135M-Instruct is on this
machine: the hub cannot be reached, so the GGUF is what both arms load.

Timing. A callback times each optimizer step (on_step_begin to on_step_end: forward, backward,
clipping, AdamW and the scheduler for every micro-batch of the step); batch loading and the
Trainer's set-up are outside it. tokens_per_second counts the real tokens of the examples
trained (prompt and answer, padding not counted) over the summed step time;
padded_tokens_per_second counts every position of the batches (with --padding max_length,
steps x batch x accumulation x seq_len, what fitgrad's tok/s counts); the *_steady values leave
the first step out. The last line is machine-readable:

  RESULT arm=hf_trainer_peft tokens_per_second=... padded_tokens_per_second=...
         trained_tokens_per_second=... steps=... seconds=... ... loss=...

--heldout FILE also reports the held-out response loss after training: the mean, over the
trained (assistant) tokens of FILE's examples, of their cross-entropy, as HELDOUT lines.

Needs transformers 4.46.3, peft 0.13.2, accelerate, gguf and torch (the venv /work/venv-hf).
CI does not run it.
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("FITGRAD_CACHE", os.path.expanduser("~/.cache/fitgrad"))
DEFAULT_MODEL = os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")
ALL_LINEAR = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="a Hugging Face model folder or a .gguf file")
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
    p.add_argument("--padding", choices=["max_length", "longest"], default="max_length")
    p.add_argument("--attention_mask", action="store_true",
                   help="pass the padding mask (off: right padding needs none)")
    p.add_argument("--gradient_checkpointing", action="store_true")
    p.add_argument("--bf16", action="store_true",
                   help="Trainer's bf16=True: the step under torch's CPU bf16 autocast, as "
                        "fitgrad's --bf16 (the fp32 weights kept)")
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
        return tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=gen)

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
    """The tokenizer and the f32 model of a Hugging Face folder or a .gguf file (dequantized by
    transformers, its head tied to the embedding as in the file)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if path.endswith(".gguf"):
        if not os.path.isfile(path):
            sys.exit(f"no model file {path} (tools/fetch-smollm2.sh fetches it)")
        folder, name = os.path.split(os.path.abspath(path))
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                     torch_dtype=torch.float32,
                                                     tie_word_embeddings=True)
        return tok, model
    if not os.path.isfile(os.path.join(path, "config.json")):
        sys.exit(f"{path}: not a Hugging Face model folder (no config.json) nor a .gguf")
    return (AutoTokenizer.from_pretrained(path),
            AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32))


def main():
    a = parse_args()
    import torch
    torch.set_num_threads(a.threads)
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import Trainer, TrainerCallback, TrainingArguments
    transformers.logging.set_verbosity_error()

    tok, model = load_model(a.model)
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)

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

    counts = {"real": 0, "padded": 0, "trained": 0}

    def collate(batch):
        width = a.seq_len if a.padding == "max_length" else max(len(e["input_ids"]) for e in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, e in enumerate(batch):
            n = len(e["input_ids"])
            ids[i, :n] = torch.tensor(e["input_ids"])
            labels[i, :n] = torch.tensor(e["labels"])
            mask[i, :n] = 1
        out = {"input_ids": ids, "labels": labels, "real_tokens": mask.sum()}
        if a.attention_mask:
            out["attention_mask"] = mask
        return out

    class CountingTrainer(Trainer):
        # The batches the steps consume (the loader may build one ahead; it is not counted).
        def compute_loss(self, model, inputs, *args, **kwargs):
            real_tokens = inputs.pop("real_tokens")
            if model.training:
                counts["real"] += int(real_tokens)
                counts["padded"] += inputs["input_ids"].numel()
                counts["trained"] += int((inputs["labels"][:, 1:] != -100).sum())
            return super().compute_loss(model, inputs, *args, **kwargs)

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self.losses, self.began = [], [], None

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
    model = get_peft_model(model, lora)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"model: {a.model} ({model.base_model.model.config._attn_implementation} attention, "
          f"fp32); LoRA r {a.lora_r} alpha {a.lora_alpha} dropout {a.lora_dropout} on "
          f"{','.join(targets)}: {trainable} trained parameters; torch {torch.__version__}, "
          f"transformers {transformers.__version__}, {torch.get_num_threads()} threads",
          flush=True)

    args = TrainingArguments(
        output_dir=a.output_dir, max_steps=a.max_steps,
        per_device_train_batch_size=a.per_device_train_batch_size,
        gradient_accumulation_steps=a.gradient_accumulation_steps,
        learning_rate=a.learning_rate, lr_scheduler_type=a.lr_scheduler_type,
        warmup_steps=a.warmup_steps, weight_decay=a.weight_decay, max_grad_norm=a.max_grad_norm,
        optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
        gradient_checkpointing=a.gradient_checkpointing, use_cpu=True, bf16=a.bf16, fp16=False,
        seed=a.seed, data_seed=a.seed, logging_steps=a.logging_steps, save_strategy="no",
        eval_strategy="no", report_to=[], dataloader_num_workers=0,
        remove_unused_columns=False, disable_tqdm=True)
    timer = StepTimer()
    trainer = CountingTrainer(model=model, args=args, train_dataset=train, data_collator=collate,
                              callbacks=[timer])
    trainer.train()

    steps = len(timer.times)
    seconds = sum(timer.times)
    rest = sum(timer.times[1:])
    first = timer.after_first
    steady = {k: counts[k] - first[k] for k in counts}

    def rate(n, s):
        return n / s if s > 0 else float("nan")

    if a.heldout:
        held, _, _, held_dropped = dataset(a.heldout, 0.0)
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(held), a.per_device_train_batch_size):
                batch = collate(held[i:i + a.per_device_train_batch_size])
                batch.pop("real_tokens")
                logits = model(input_ids=batch["input_ids"],
                               attention_mask=batch.get("attention_mask")).logits[:, :-1]
                target = batch["labels"][:, 1:]
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1),
                    ignore_index=-100, reduction="sum")
                total += float(loss)
                n += int((target != -100).sum())
        print(f"HELDOUT file={a.heldout} examples={len(held)} dropped={held_dropped} "
              f"response_tokens={n} response_loss={total / max(n, 1):.4f} "
              f"response_ppl={math.exp(total / max(n, 1)):.3f}")

    print(f"RESULT arm=hf_trainer_peft tokens_per_second={rate(counts['real'], seconds):.1f} "
          f"padded_tokens_per_second={rate(counts['padded'], seconds):.1f} "
          f"trained_tokens_per_second={rate(counts['trained'], seconds):.1f} "
          f"tokens_per_second_steady={rate(steady['real'], rest):.1f} "
          f"padded_tokens_per_second_steady={rate(steady['padded'], rest):.1f} "
          f"steps={steps} seconds={seconds:.3f} first_step_seconds={timer.times[0]:.3f} "
          f"real_tokens={counts['real']} padded_tokens={counts['padded']} "
          f"trained_tokens={counts['trained']} seq_len={a.seq_len} "
          f"batch={a.per_device_train_batch_size} grad_accum={a.gradient_accumulation_steps} "
          f"lora_r={a.lora_r} padding={a.padding} threads={a.threads} "
          f"dtype={'bf16' if a.bf16 else 'fp32'} "
          f"loss={timer.losses[-1] if timer.losses else float('nan'):.4f}", flush=True)


if __name__ == "__main__":
    main()
