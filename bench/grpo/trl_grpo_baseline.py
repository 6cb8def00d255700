#!/usr/bin/env python3
"""The TRL arm of the GRPO speed comparison (issue 59): TRL's GRPOTrainer with a PEFT LoRA
adapter trains SmolLM2-135M-Instruct on the arithmetic task's prompts on the CPU, sampling
its completions in the loop, and measures completions per second. It is the run of

    OMP_NUM_THREADS=2 build/fitgrad train --objective grpo --model DIR \\
        --data data/tasks/arithmetic/train.jsonl --data_order sequential \\
        --num_generations 4 --per_device_train_batch_size 8 --max_completion_length 32 \\
        --reward_funcs last_number:answer --lora_r 8 --lora_target q_proj,...,down_proj ...

which bench/grpo/grpo_runs.sh runs beside it, the arms alternating. Usage:

    $REFERENCE_ENV/bin/python bench/grpo/trl_grpo_baseline.py --model DIR \\
        --num_generations 4 --prompts_per_step 2 --max_completion_length 32 \\
        --warmup 1 --steps 6 --threads 2

DIR is a Hugging Face model folder: `fitgrad export --base SmolLM2-135M-Instruct.Q4_1.gguf
-o DIR --dtype f32` writes one (transformers 5 does not train a model read from GGUF); both
arms load it, so they start from the same f32 weights, tokenizer, chat template and stop
tokens. It runs in the reference environment of bench/reference-env.sh (torch, transformers,
peft, trl and datasets at the releases pinned there); CI does not run it.

How the run is made
-------------------
Data. The rows of --data (default data/tasks/arithmetic/train.jsonl): TRL's conversational
prompt-only records, {"prompt": [messages], "answer": "11"}. TRL renders each prompt with the
tokenizer's chat template and the generation prompt (apply_chat_template with
add_generation_prompt=True, tokenized without added special tokens), as fitgrad's
train/grpo_prompts.cpp does; the first rendering is printed so the two can be compared. By
default the rows are taken in the file's order (GRPOConfig shuffle_dataset=False; fitgrad's
--data_order sequential), so step n of both arms samples rows n P to n P + P - 1.

Batch. P prompts a step (--prompts_per_step), G completions each (num_generations): TRL
counts completions in per_device_train_batch_size, so it is P G, with
gradient_accumulation_steps 1 and generation_batch_size unset (it becomes P G,
steps_per_generation 1): one generation batch per optimizer step, all P G completions
decoded in one left-padded model.generate() call with the KV cache, stopping at the model's
eos ids, at most max_completion_length tokens.

Rewards. One function, equal to fitgrad's built-in last_number:answer (or exact_match:answer
with --reward exact_match) of train/rewards/answer_match.cpp, written again below: the
completion's text (TRL's batch_decode with skip_special_tokens) is compared with the row's
answer column; 1.0 when equal, 0.0 when not, None (TRL's NaN) when the answer column gives
nothing.

Training. GRPOConfig's loss settings are TRL's defaults unless given: beta 0 (no reference
pass), loss_type dapo, epsilon 0.2, num_iterations 1, scale_rewards group; temperature 1,
top_p 1, top_k 0. LoRA: r --lora_r, alpha --lora_alpha, dropout 0 on --lora_target (the seven
projections of a Llama block). AdamW (torch) at --learning_rate (default 1e-5; GRPOConfig's is
1e-6), linear schedule, no warm-up, no weight decay, gradient clipping at 1; --seed 42; fp32
(bf16=False: GRPOConfig defaults to bf16=True) or, with --bf16, torch's CPU bf16 autocast over
fp32 weights. Gradient checkpointing is off (GRPOConfig defaults it on; it recomputes the
forward and only slows a 135M model on the CPU) unless --gradient_checkpointing.

Timing. A callback times each optimizer step from on_step_begin to on_step_end: the
generation, the rewards, the advantages, the forward and backward, clipping, AdamW and the
scheduler; fetching the step's raw rows, logging and the set-up are outside it. The first
--warmup steps are run and printed but not counted. completions_per_s is the completions the
timed steps trained (P G each; with num_iterations 1 each step generates them too) over the
sum of their times; mean_step_s is that sum over the timed steps. The per-step reward is
TRL's logged "reward" (the mean over the step's P G completions), the length its
completions/mean_length. The last line is machine-readable:

  RESULT arm=trl completions_per_s=... mean_step_s=... steps=... warmup=... completions=...
         mean_reward=... mean_completion_length=... clipped_ratio=... threads=... dtype=...
         step_s=T1,T2,... rewards=R1,R2,...

mean_reward, mean_completion_length and clipped_ratio are over the timed steps; step_s and
rewards list every step, the warm-up's included.
"""
import argparse
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The seven projections of a Llama decoder block (fitgrad's all-linear for a Llama).
SEVEN = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


# --- The answer rewards of train/rewards/answer_match.cpp, the same semantics in Python. ---
# ASCII digits only, as the C++ code's is_digit; the C++ code walks UTF-8 bytes and this walks
# code points, which find the same ASCII characters.
DIGITS = "0123456789"


def trim(s):
    return s.strip(" \t\r\n")


def canonical_number(s):
    """A number's canonical digits ("-12.5" for "-$12.50"), None when s is not a number."""
    v = trim(s)
    negative = False
    if v and v[0] in "-+":
        negative = v[0] == "-"
        v = v[1:]
    if v and v[0] == "$":
        v = v[1:]
    if v and v[-1] in ".%":
        v = v[:-1]
    dot = v.find(".")
    whole = v if dot < 0 else v[:dot]
    fraction = "" if dot < 0 else v[dot + 1:]
    if not whole or (dot >= 0 and not fraction):
        return None
    # Thousands commas: a first group of one to three digits, then groups of exactly three.
    digits, group, first_group = "", 0, True
    for c in whole:
        if c == ",":
            if group == 0 or group > 3 or (not first_group and group != 3):
                return None
            first_group, group = False, 0
            continue
        if c not in DIGITS:
            return None
        digits += c
        group += 1
    if not first_group and group != 3:
        return None
    if any(c not in DIGITS for c in fraction):
        return None
    fraction = fraction.rstrip("0")
    digits = digits.lstrip("0") or "0"
    out = digits + "." + fraction if fraction else digits
    if negative and out != "0":
        out = "-" + out
    return out


def boxed_answer(text):
    """The contents of the last balanced \\boxed{...}; an unbalanced one is skipped."""
    key = "\\boxed{"
    at = text.rfind(key)
    while at >= 0:
        depth, begin = 1, at + len(key)
        for i in range(begin, len(text)):
            if text[i] == "{":
                depth += 1
            if text[i] == "}":
                depth -= 1
                if depth == 0:
                    return trim(text[begin:i])
        at = text.rfind(key, 0, at + len(key) - 1) if at > 0 else -1
    return None


def marked_answer(text):
    """The rest of the line after the last "####", trimmed."""
    at = text.rfind("####")
    if at < 0:
        return None
    return trim(text[at + 4:].split("\n", 1)[0])


def last_number(text):
    """The last number: digits, with commas or one dot between digits, and a leading '-'."""
    end = len(text)
    while end > 0 and text[end - 1] not in DIGITS:
        end -= 1
    if end == 0:
        return None
    begin = end
    while begin > 0:
        c = text[begin - 1]
        if c in DIGITS or (c in ",." and begin - 1 > 0 and text[begin - 2] in DIGITS):
            begin -= 1
        else:
            break
    if begin > 0 and text[begin - 1] == "-":
        begin -= 1
    return text[begin:end]


def answers_equal(a, b):
    na, nb = canonical_number(a), canonical_number(b)
    if na is not None and nb is not None:
        return na == nb
    return trim(a) == trim(b)


def answer_reward(extraction, column):
    """A TRL reward function: 1.0 when the completion's answer equals the row's `column`."""

    def reward(completions, **kwargs):
        golds = kwargs[column]
        out = []
        for completion, gold in zip(completions, golds, strict=True):
            # A conversational completion is [{"role": "assistant", "content": text}].
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            if isinstance(gold, bool) or not isinstance(gold, (str, int, float)):
                gold_text = ""
            else:
                gold_text = gold if isinstance(gold, str) else json.dumps(gold)
            g = boxed_answer(gold_text)
            if g is None:
                g = marked_answer(gold_text)
            if g is None:
                g = trim(gold_text)
            if not g:
                out.append(None)
                continue
            if extraction == "last_number":
                given = last_number(text)
            else:
                given = boxed_answer(text)
                if given is None:
                    given = marked_answer(text)
            out.append(1.0 if given is not None and answers_equal(given, g) else 0.0)
        return out

    reward.__name__ = extraction  # TRL logs rewards/<name>/mean
    return reward


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True,
                   help="a Hugging Face model folder (fitgrad export -o DIR --dtype f32)")
    p.add_argument("--data", default=os.path.join(ROOT, "data/tasks/arithmetic/train.jsonl"),
                   help="a .jsonl of prompt records with an answer column")
    p.add_argument("--reward", default="last_number", choices=["last_number", "exact_match"],
                   help="fitgrad's built-in reward this reproduces (on the answer column)")
    p.add_argument("--answer_column", default="answer")
    p.add_argument("--num_generations", type=int, default=4, help="G, completions per prompt")
    p.add_argument("--prompts_per_step", type=int, default=2,
                   help="P; TRL's per_device_train_batch_size is P G completions")
    p.add_argument("--max_completion_length", type=int, default=32)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top_p", type=float, default=1.0)
    p.add_argument("--top_k", type=int, default=0)
    p.add_argument("--beta", type=float, default=0.0)
    p.add_argument("--loss_type", default="dapo")
    p.add_argument("--epsilon", type=float, default=0.2)
    p.add_argument("--num_iterations", type=int, default=1)
    p.add_argument("--scale_rewards", default="group", choices=["group", "batch", "none"])
    p.add_argument("--lora_r", type=int, default=8)
    p.add_argument("--lora_alpha", type=float, default=16)
    p.add_argument("--lora_target", default=SEVEN, help="PEFT target_modules, comma-separated")
    p.add_argument("--learning_rate", type=float, default=1e-5)
    p.add_argument("--bf16", action="store_true",
                   help="bf16=True: the step under torch's CPU bf16 autocast over fp32 weights")
    p.add_argument("--gradient_checkpointing", action="store_true")
    p.add_argument("--shuffle", action="store_true",
                   help="GRPOConfig shuffle_dataset=True (default: the file's order)")
    p.add_argument("--warmup", type=int, default=1,
                   help="steps run first and not timed (not a learning-rate warm-up)")
    p.add_argument("--steps", type=int, default=6, help="timed steps after the warm-up")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--output_dir", default="/tmp/trl_grpo_baseline")
    return p.parse_args()


def load_rows(path, column):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            if "prompt" not in r or column not in r:
                sys.exit(f"{path}:{n}: a prompt record needs \"prompt\" and \"{column}\"")
            rows.append(r)
    return rows


def main():
    a = parse_args()
    if not os.path.isfile(os.path.join(a.model, "config.json")):
        sys.exit(f"--model {a.model} is not a Hugging Face model folder (no config.json); "
                 "write one with `build/fitgrad export --base MODEL.gguf -o DIR --dtype f32`")
    try:
        import torch
        torch.set_num_threads(a.threads)
        import datasets
        import peft
        import transformers
        import trl
    except ImportError as e:
        sys.exit(f"{e}: run this with the reference environment's Python, which "
                 "bench/reference-env.sh makes ($REFERENCE_ENV/bin/python)")
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bar()

    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    rows = load_rows(a.data, a.answer_column)
    first = rows[0]["prompt"]
    if isinstance(first, list):
        rendered = tok.apply_chat_template(first, add_generation_prompt=True, tokenize=False)
    else:
        rendered = first
    print(f"data: {a.data}: {len(rows)} prompt records; the first rendered "
          f"({len(tok(rendered, add_special_tokens=False)['input_ids'])} tokens): "
          f"{json.dumps(rendered)}", flush=True)
    print(f"tokenizer: eos {tok.eos_token!r} ({tok.eos_token_id}), pad {tok.pad_token!r} "
          f"({tok.pad_token_id}); generation eos ids {model.generation_config.eos_token_id}",
          flush=True)

    g, p = a.num_generations, a.prompts_per_step
    total = a.warmup + a.steps
    scored = []  # completions each reward call scored
    reward_fn = answer_reward(a.reward, a.answer_column)

    def counted_reward(completions, **kwargs):
        scored.append(len(completions))
        return reward_fn(completions, **kwargs)

    counted_reward.__name__ = reward_fn.__name__

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self.logs, self.began = [], [], None

        def on_step_begin(self, args, state, control, **kw):
            self.began = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self.began)

        def on_log(self, args, state, control, logs=None, **kw):
            if not logs or "loss" not in logs:
                return
            self.logs.append(logs)
            k, dt = len(self.times), self.times[-1]
            print(f"step {k}/{total}: {dt:.2f} s, {p * g / dt:.3f} completions/s, reward "
                  f"{logs.get('reward', math.nan):.4f}, mean length "
                  f"{logs.get('completions/mean_length', math.nan):.1f}, clipped "
                  f"{logs.get('completions/clipped_ratio', math.nan):.2f}, loss "
                  f"{logs['loss']:.4f}{' (warm-up, not timed)' if k <= a.warmup else ''}",
                  flush=True)

    targets = [t.strip() for t in a.lora_target.split(",") if t.strip()]
    lora = LoraConfig(r=a.lora_r, lora_alpha=a.lora_alpha, lora_dropout=0.0,
                      target_modules=targets, bias="none", task_type="CAUSAL_LM")
    config = GRPOConfig(
        output_dir=a.output_dir, max_steps=total,
        per_device_train_batch_size=p * g, gradient_accumulation_steps=1,
        num_generations=g, max_completion_length=a.max_completion_length,
        temperature=a.temperature, top_p=a.top_p, top_k=a.top_k,
        beta=a.beta, loss_type=a.loss_type, epsilon=a.epsilon, num_iterations=a.num_iterations,
        scale_rewards=a.scale_rewards, shuffle_dataset=a.shuffle,
        learning_rate=a.learning_rate, lr_scheduler_type="linear", warmup_steps=0,
        weight_decay=0.0, max_grad_norm=1.0, optim="adamw_torch",
        gradient_checkpointing=a.gradient_checkpointing, disable_dropout=True,
        use_cpu=True, bf16=a.bf16, fp16=False, seed=a.seed, data_seed=a.seed,
        logging_steps=1, save_strategy="no", eval_strategy="no", report_to=[],
        dataloader_num_workers=0, disable_tqdm=True, log_completions=False)
    timer = StepTimer()
    t0 = time.perf_counter()
    trainer = GRPOTrainer(model=model, reward_funcs=[counted_reward], args=config,
                          train_dataset=datasets.Dataset.from_list(rows), processing_class=tok,
                          peft_config=lora, callbacks=[timer])
    setup = time.perf_counter() - t0
    trainable = sum(x.numel() for x in trainer.model.parameters() if x.requires_grad)
    print(f"model: {a.model} ({model.config._attn_implementation} attention, "
          f"{'bf16 autocast' if a.bf16 else 'fp32'}); LoRA r {a.lora_r} alpha {a.lora_alpha} on "
          f"{','.join(targets)}: {trainable} trained parameters; GRPO G {g}, {p} prompts a step "
          f"(per_device_train_batch_size {config.per_device_train_batch_size}, "
          f"generation_batch_size {config.generation_batch_size}, steps_per_generation "
          f"{config.steps_per_generation}), max_completion_length {a.max_completion_length}, "
          f"temperature {a.temperature}, beta {a.beta}, loss_type {a.loss_type}, reward "
          f"{a.reward}:{a.answer_column}; torch {torch.__version__}, transformers "
          f"{transformers.__version__}, peft {peft.__version__}, trl {trl.__version__}, "
          f"datasets {datasets.__version__}, {torch.get_num_threads()} threads; trainer set up "
          f"in {setup:.1f} s", flush=True)
    trainer.train()

    # A generation batch is made at every num_iterations-th step and trained at each step.
    generations = -(-total // a.num_iterations)
    if len(timer.times) != total or sum(scored) != p * g * generations:
        sys.exit(f"expected {total} steps and {p * g * generations} completions scored; timed "
                 f"{len(timer.times)} steps, {sum(scored)} completions scored")
    timed = timer.times[a.warmup:]
    logs = timer.logs[a.warmup:]
    seconds = sum(timed)
    completions = p * g * len(timed)

    def mean(key):
        values = [x[key] for x in logs if key in x]
        return sum(values) / len(values) if values else math.nan

    # Every step's time and reward, the warm-up's included, for the table's trend column.
    step_s = ",".join(f"{t:.3f}" for t in timer.times)
    rewards = ",".join(f"{x.get('reward', math.nan):.3f}" for x in timer.logs)
    print(f"RESULT arm=trl completions_per_s={completions / seconds:.4f} "
          f"mean_step_s={seconds / len(timed):.4f} steps={len(timed)} warmup={a.warmup} "
          f"completions={completions} mean_reward={mean('reward'):.4f} "
          f"mean_completion_length={mean('completions/mean_length'):.2f} "
          f"clipped_ratio={mean('completions/clipped_ratio'):.3f} "
          f"num_generations={g} prompts_per_step={p} "
          f"max_completion_length={a.max_completion_length} lora_r={a.lora_r} "
          f"threads={a.threads} dtype={'bf16' if a.bf16 else 'fp32'} "
          f"step_s={step_s} rewards={rewards}", flush=True)


if __name__ == "__main__":
    main()
