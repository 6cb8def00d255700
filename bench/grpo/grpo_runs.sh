#!/usr/bin/env bash
# The GRPO speed comparison of issue 59 (bench/RESULTS.md): `fitgrad train --objective grpo`
# against TRL's GRPOTrainer + PEFT (bench/grpo/trl_grpo_baseline.py) on the same CPU, the arms
# alternating for ROUNDS rounds (fitgrad, then TRL, in each), both on:
#   - SmolLM2-135M-Instruct as one Hugging Face folder of f32 weights (`fitgrad export
#     --dtype f32` of the GGUF that tools/fetch-smollm2.sh fetches, unless MODEL_DIR names
#     one): the same weights, tokenizer, chat template and stop tokens;
#   - the prompts of data/tasks/arithmetic/train.jsonl in the file's order (fitgrad
#     --data_order sequential, TRL shuffle_dataset=False): step n samples rows n P .. n P + P - 1
#     in both arms;
#   - G completions of each of P prompts a step (per_device_train_batch_size P G completions,
#     one generation batch a step), at most LENGTH tokens, temperature 1, top_p 1, top_k 0;
#     the reward last_number:answer (trl_grpo_baseline.py writes the same function in Python);
#     beta 0, loss_type dapo, epsilon 0.2, num_iterations 1, scale_rewards group;
#   - LoRA r RANK, alpha ALPHA, dropout 0 on the seven projections; AdamW at LR, linear
#     schedule, no warm-up, no weight decay, clipping at 1; seed SEED; THREADS threads; fp32
#     (BF16=1: both under bf16 autocast over fp32 weights); no gradient checkpointing.
# Each run takes WARMUP + STEPS steps; the first WARMUP are not timed. completions_per_s, for
# both arms: the completions the STEPS timed steps generated and trained (P G each) over the
# sum of those steps' wall times. TRL's step is timed from on_step_begin to on_step_end
# (generation, rewards, forward, backward and the optimizer). fitgrad's step k is the time
# between its progress lines of steps k - 1 and k (--progress plain --logging_steps 1, each line
# stamped on arrival): the same work plus its own logging of step k (metrics.jsonl and
# samples.jsonl, a few milliseconds), which TRL's timing leaves out. The table also gives
# completion tokens per second (completions per second times the mean completion length, the
# stop token counted, as TRL's completions/mean_length): the arms sample with different random
# streams, so their completions differ in length, and this rate does not favour the shorter.
# What the arms still do differently, by design: TRL decodes a step's P G rows in one
# left-padded generate() call, fitgrad decodes together only the rows of prompts with the same
# number of tokens (Note [Grouped generation] in train/grouped_generation.h), so P prompts of
# different lengths are P batches of G rows; and the rewards read a completion's text as TRL's
# batch_decode(skip_special_tokens=True) writes it, while fitgrad writes a special token other
# than the stop token as its text (no SmolLM2 special token holds a digit, so last_number
# scores the same).
#
# Usage: bench/grpo/grpo_runs.sh OUT_DIR
# Settings (environment): ROUNDS 3, WARMUP 1, STEPS 6, G 4, PROMPTS 2, LENGTH 32, RANK 8,
# ALPHA 16, LR 1e-5, SEED 42, THREADS 2, BF16 0, CPUS (taskset's CPU list for both arms, e.g.
# 0,1 on a larger machine; default: not pinned); FITGRAD (build/fitgrad), MODEL_DIR (an HF
# folder; default OUT_DIR/smollm2-f32, exported once), GGUF (the export's source; default
# tools/fetch-smollm2.sh's file), REFERENCE_ENV (default .reference-env of this checkout, made
# by bench/reference-env.sh); relative paths are taken from the checkout's root. The fitgrad
# command is fitgrad_flags below: adjust it there.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for this script alone. The logs, metrics and
# RESULT lines stay in OUT_DIR; the table goes to stdout and OUT_DIR/table.md.
set -euo pipefail
[ $# -eq 1 ] || {
  echo "usage: $0 OUT_DIR" >&2
  exit 2
}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
cd "$root"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

rounds=${ROUNDS:-3} warmup=${WARMUP:-1} steps=${STEPS:-6} g=${G:-4} prompts=${PROMPTS:-2}
length=${LENGTH:-32} rank=${RANK:-8} alpha=${ALPHA:-16} lr=${LR:-1e-5} seed=${SEED:-42}
threads=${THREADS:-2} bf16=${BF16:-0}
pin=()
if [ -n "${CPUS:-}" ]; then pin=(taskset -c "$CPUS"); fi
fg=${FITGRAD:-build/fitgrad}
reference=${REFERENCE_ENV:-$root/.reference-env}
py="$reference/bin/python"
data=data/tasks/arithmetic/train.jsonl
targets=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
export OMP_NUM_THREADS=$threads

[ "$warmup" -ge 1 ] || {
  echo "[grpo_runs] WARMUP must be at least 1: fitgrad's first timed step is measured from the line of the step before it" >&2
  exit 2
}
[ -x "$py" ] || {
  echo "[grpo_runs] no reference environment at $reference: make it with bench/reference-env.sh (or set REFERENCE_ENV)" >&2
  exit 1
}
[ -x "$fg" ] || {
  echo "[grpo_runs] no fitgrad binary at $fg: build it (ninja -C build fitgrad_cli) or set FITGRAD" >&2
  exit 1
}

model=${MODEL_DIR:-$out/smollm2-f32}
if [ ! -f "$model/config.json" ]; then
  gguf=${GGUF:-$(tools/fetch-smollm2.sh)}
  echo "[grpo_runs] exporting $gguf to $model (f32)"
  "$fg" export --base "$gguf" -o "$model" --dtype f32 >"$out/export.log" 2>&1 || {
    cat "$out/export.log" >&2
    exit 1
  }
fi

precision=()
if [ "$bf16" = 1 ]; then precision=(--bf16); fi

# The fitgrad arm, flag for flag the TRL arm's settings (trl_grpo_baseline.py's docstring).
fitgrad_flags() {
  local dir=$1
  printf '%s\n' train --objective grpo --model "$model" --data "$data" --data_order sequential \
    --num_generations "$g" --per_device_train_batch_size "$((prompts * g))" \
    --gradient_accumulation_steps 1 --generation_batch_size "$((prompts * g))" \
    --max_completion_length "$length" \
    --temperature 1.0 --top_p 1.0 --top_k 0 --reward_funcs last_number:answer \
    --beta 0 --loss_type dapo --epsilon 0.2 --num_iterations 1 --scale_rewards group \
    --lora_r "$rank" --lora_alpha "$alpha" --lora_dropout 0 --lora_target "$targets" \
    --learning_rate "$lr" --lr_scheduler_type linear --warmup_steps 0 --weight_decay 0 \
    --max_grad_norm 1 --optim adamw_torch --seed "$seed" \
    --max_steps "$((warmup + steps))" --logging_steps 1 --save_strategy no --progress plain \
    --output_dir "$dir" "${precision[@]}"
}

# Runs the fitgrad arm into $out/fg-$1, each output line stamped with the wall clock.
fitgrad_arm() {
  local dir="$out/fg-$1" flags
  rm -rf "$dir"
  mapfile -t flags < <(fitgrad_flags "$dir")
  echo "$fg ${flags[*]}" >"$out/fg-$1.cmd"
  set +e
  "${pin[@]}" "$fg" "${flags[@]}" 2>&1 | while IFS= read -r line; do
    printf '%s\t%s\n' "$EPOCHREALTIME" "$line"
  done >"$out/fg-$1.log"
  local rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "[grpo_runs] the fitgrad arm failed (exit $rc); the end of $out/fg-$1.log:" >&2
    tail -20 "$out/fg-$1.log" >&2
    exit 1
  fi
}

trl_arm() {
  local flags=(bench/grpo/trl_grpo_baseline.py --model "$model" --data "$data"
    --num_generations "$g" --prompts_per_step "$prompts" --max_completion_length "$length"
    --lora_r "$rank" --lora_alpha "$alpha" --learning_rate "$lr" --seed "$seed"
    --warmup "$warmup" --steps "$steps" --threads "$threads" --output_dir "$out/trl-$1.run"
    "${precision[@]}")
  echo "$py ${flags[*]}" >"$out/trl-$1.cmd"
  "${pin[@]}" "$py" "${flags[@]}" >"$out/trl-$1.log" 2>&1 || {
    echo "[grpo_runs] the TRL arm failed; the end of $out/trl-$1.log:" >&2
    tail -20 "$out/trl-$1.log" >&2
    exit 1
  }
}

{
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  echo "machine: $cpu, $(nproc) cores visible, $(free -g | awk '/^Mem:/ {print $2}') GiB"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "settings: rounds $rounds, warm-up $warmup + $steps timed steps, G $g, $prompts prompts" \
    "a step, max_completion_length $length, LoRA r $rank alpha $alpha, lr $lr, seed $seed," \
    "$threads threads${CPUS:+ on CPUs $CPUS}, $([ "$bf16" = 1 ] && echo bf16 autocast || echo fp32)"
  echo "fitgrad: $fg ($(git -C "$root" rev-parse --short HEAD)); model: $model"
} | tee "$out/machine.txt"

for r in $(seq "$rounds"); do
  echo "round $r: fitgrad"
  fitgrad_arm "$r"
  echo "round $r: TRL"
  trl_arm "$r"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"

# fitgrad's RESULT lines, defined as the TRL arm's, then the table.
python3 - "$out" "$rounds" "$warmup" "$steps" "$((prompts * g))" <<'PY' | tee "$out/table.md"
import json, math, re, statistics, sys

out, rounds, warmup, steps, per_step = sys.argv[1], *map(int, sys.argv[2:])
step_line = re.compile(r"^step (\d+)/(\d+) \|")


def fitgrad_result(r):
    stamps = {}
    with open(f"{out}/fg-{r}.log", encoding="utf-8") as f:
        for line in f:
            stamp, _, text = line.rstrip("\n").partition("\t")
            m = step_line.match(text)
            if m:
                stamps[int(m.group(1))] = float(stamp)
    total = warmup + steps
    if sorted(stamps) != list(range(1, total + 1)):
        sys.exit(f"fg-{r}.log: progress lines of steps {sorted(stamps)}, expected 1..{total}")
    times = [stamps[k] - stamps[k - 1] for k in range(warmup + 1, total + 1)]
    records = {}
    with open(f"{out}/fg-{r}/metrics.jsonl", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec:
                records[rec["step"]] = rec
    timed = [records.get(k, {}) for k in range(warmup + 1, total + 1)]
    rewards = [records.get(k, {}).get("reward", math.nan) for k in range(1, total + 1)]

    def mean(key):
        values = [x[key] for x in timed if key in x]
        return sum(values) / len(values) if values else math.nan

    seconds = sum(times)
    result = {"completions_per_s": per_step * steps / seconds, "mean_step_s": seconds / steps,
              "mean_reward": mean("reward"),
              "mean_completion_length": mean("completions/mean_length"),
              "clipped_ratio": mean("completions/clipped_ratio")}
    with open(f"{out}/fg-{r}.result", "w", encoding="utf-8") as f:
        f.write("RESULT arm=fitgrad " + " ".join(f"{k}={v:.4f}" for k, v in result.items())
                + f" steps={steps} warmup={warmup} completions={per_step * steps}"
                + " step_s=" + ",".join(f"{t:.3f}" for t in times)
                + " rewards=" + ",".join(f"{x:.3f}" for x in rewards) + "\n")
    result["rewards"] = rewards
    return result


def trl_result(r):
    with open(f"{out}/trl-{r}.log", encoding="utf-8") as f:
        lines = [x for x in f if x.startswith("RESULT arm=trl ")]
    if not lines:
        sys.exit(f"trl-{r}.log has no RESULT line")
    fields = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    result = {k: float(fields[k]) for k in ("completions_per_s", "mean_step_s", "mean_reward",
                                            "mean_completion_length", "clipped_ratio")}
    result["rewards"] = [float(x) for x in fields["rewards"].split(",")]
    return result


rows = {"fitgrad": [], "TRL + PEFT": []}
print("| round | arm | completions/s | completion tokens/s | mean step (s) | mean completion "
      "length | truncated share | mean reward | reward at each step (warm-up first) |")
print("|---|---|---|---|---|---|---|---|---|")
for r in range(1, rounds + 1):
    for arm, result in (("fitgrad", fitgrad_result(r)), ("TRL + PEFT", trl_result(r))):
        rows[arm].append(result)
        tokens = result["completions_per_s"] * result["mean_completion_length"]
        trend = " ".join(f"{x:.2f}" for x in result["rewards"])
        print(f"| {r} | {arm} | {result['completions_per_s']:.3f} | {tokens:.1f} "
              f"| {result['mean_step_s']:.2f} | {result['mean_completion_length']:.1f} "
              f"| {result['clipped_ratio']:.2f} | {result['mean_reward']:.3f} | {trend} |")


def median(arm, tokens=False):
    return statistics.median(x["completions_per_s"] * (x["mean_completion_length"] if tokens else 1)
                             for x in rows[arm])


fg, trl = median("fitgrad"), median("TRL + PEFT")
fg_tok, trl_tok = median("fitgrad", True), median("TRL + PEFT", True)
print()
print(f"Median over {rounds} rounds: fitgrad {fg:.3f} completions/s, TRL + PEFT {trl:.3f} "
      f"completions/s: fitgrad / TRL **{fg / trl:.2f}x** (completion tokens per second: "
      f"{fg_tok:.1f} against {trl_tok:.1f}, {fg_tok / trl_tok:.2f}x).")
PY
