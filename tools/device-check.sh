#!/usr/bin/env bash
# The device check (issues 15, 26 and 57): one command for a lent GPU machine, which gives a
# verdict on every CUDA op and figure within 6 minutes, whatever hangs. It takes the pack
# that tools/device-prepare.sh built here and, each step capped in time:
#   binaries  the CLI starts, and CudaCard.TheRuntimeCountsADevice, which prints
#             cudaGetDeviceCount's error where CUDA cannot start;
#   libraries ldd over the pack's binaries: each library is packed or found on the machine
#             (Note [What the device pack leaves out] in tools/device/libraries.sh);
#   new_cases, nccl_dropped, racecheck
#             what no card has run yet, first (issue 57): flash attention soft-capped at head
#             dims 96, 128 and 256 and over packed rows (one with a window and the cap); an
#             all-reduce dropped while it runs, which must not hold up the group's end;
#             compute-sanitizer racecheck over two small multi-tile flash cases (the mma and
#             the SIMT path), marked skipped where the sanitizer refuses the device;
#   dropout, apollo, error_records, nccl_timeout, expandable
#             one test each, the card-side checks of issue 46 in its order: flash
#             attention with dropout against the CPU (T 77, S 93, causal, grouped-query heads,
#             f32, bf16 and f16); APOLLO's steps against the CPU's; a bad id in the first
#             index-checking call behind a busy legacy stream; an NCCL average past its
#             timeout; a fresh process whose first allocation is an expandable segment;
#   tests     the CUDA tests with CUDA_LAUNCH_BLOCKING=1: the cross-backend op harness, the
#             multi-tile attention cases, the device error records, stream-ordered reuse,
#             pinned loader batches, the training tests on cuda:0, the host-read count and a
#             one-rank NCCL group;
#   bench     bench/cuda_bench (GEMMs, flash attention) and tools/device/torch_reference.py,
#             PyTorch's same rows on the same card;
#   train     GPT-2 124M (T 1024, bf16, AdamW) with `fitgrad train`, and `fitgrad memplan` of
#             the same run for this card, the real peak beside the plan's;
#   qlora     a QLoRA step (NF4, r 16) of SmolLM2-135M's shapes with GPT-2's vocabulary
#             (tools/device/smollm2-135m-gpt2-vocab.json): the real GGUF (98 MB) cannot travel,
#             and the time and memory do not depend on the weights' values;
#   sanitizer compute-sanitizer memcheck over the op harness and the multi-tile cases, with
#             what time is left.
#
# Note [The device check's budget]
# Every step runs under `timeout` with the smaller of its own cap and what is left of
# BUDGET_S (330 s) less a reserve for the report, and is killed 5 s after that; a step with
# under 10 s left is not started. So the whole check ends within BUDGET_S + 5 s by
# construction: with a machine's start (one to two minutes) and the transfers, two runs fit
# a 15-minute lease, so a failed first run leaves room for one rerun. The steps that have never
# run on a card come first, the long measurements last. The table is written whatever failed,
# with each step's time and cap. $OUT receives three files, within the run tool's eight:
#   results.txt  the table, one status line per step, and the last lines of each failed step;
#   tests.txt    the whole log of the tests step;
#   logs.tar.gz  every other log and output folder.
# Libraries are scoped: only the fitgrad binaries see the pack's lib/ and the directories of
# the machine's own CUDA libraries that the pack leaves out (LD_LIBRARY_PATH on their command
# lines alone: tools/device/libraries.sh's lib_dirs, the toolkit's first, then the torch
# venv's nvidia wheels); python3 runs untouched, since PyTorch brings its own CUDA libraries.
# Outside --rehearse, FITGRAD_REQUIRE_CUDA=1 makes a card test that would skip fail instead
# (Note [Card tests cannot pass by skipping] in tests/card.h).
#
# --rehearse runs every step on this CPU machine with the same command lines at small sizes
# (cpu device, GPT-2 tiny shapes, T 64), the same step runner and the same table writer, so
# that a step that would fail on the card fails here first (CI runs it). Its pack comes from
# `tools/device-prepare.sh --rehearse`; the CUDA-only tests skip there, the sanitizer steps
# run their command without the sanitizer, and the PyTorch step needs torch >= 2.0 in
# python3 (it says so and is marked skipped where it is older or absent). A rehearsal exits
# 1 when a step failed.
# Usage: bash tools/device-check.sh [--rehearse] [pack, default build-device/pack]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/device/libraries.sh
rehearse=0
if [[ ${1:-} == --rehearse ]]; then
  rehearse=1
  shift
fi
pack=${1:-$( ((rehearse)) && echo "${BUILD_DIR:-build}/pack" || echo build-device/pack)}
out=${OUT:-device-check-out}
budget=${BUDGET_S:-330}
reserve=15
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results="$out/results.txt"
rows="$work/rows.txt"
status="$work/status.txt"
: >"$rows"
: >"$status"
say() { echo "device-check: $*" | tee -a "$status"; }

# A compressed pack (device-prepare.sh compresses one over 48 MiB) is unpacked first.
if [[ ! -d $pack && -f $(dirname "$pack")/pack.tar.xz ]]; then
  tar -C "$(dirname "$pack")" -xJf "$(dirname "$pack")/pack.tar.xz"
fi
[[ -d $pack ]] || { echo "device-check: no pack at $pack: run tools/device-prepare.sh" >&2; exit 1; }
pack=$(realpath "$pack")

# step NAME CAP COMMAND...: runs COMMAND with its output in $work/NAME.txt (tests.txt goes
# to $out), within the budget (Note [The device check's budget]); records its status line.
step() {
  local name=$1 cap=$2
  shift 2
  local left=$((budget - SECONDS - reserve))
  local cap_now=$((cap < left ? cap : left))
  local log="$work/$name.txt"
  [[ $name == tests ]] && log="$out/tests.txt"
  if ((cap_now < 10)); then
    echo "step $name: not started: ${left} s of the budget left" >>"$status"
    echo "$name budget" >>"$work/failed"
    return 124
  fi
  local t0=$SECONDS
  timeout -k 5 "$cap_now" "$@" >"$log" 2>&1
  local rc=$?
  local verdict=ok
  ((rc == 124 || rc == 137)) && verdict="timed out after ${cap_now} s"
  ((rc != 0 && rc != 124 && rc != 137)) && verdict="failed"
  echo "step $name: rc $rc, $((SECONDS - t0)) s (cap ${cap_now} s), $verdict" >>"$status"
  if ((rc != 0)); then
    echo "$name $log" >>"$work/failed"
  fi
  return $rc
}

# gtest_step NAME CAP FILTER: fitgrad_tests filtered to FILTER as the step NAME; a filter
# that matches no test fails the step (a renamed test must not pass unseen), and gtest's
# summary (passed, skipped and failed counts, then each failed test) joins the status lines.
gtest_step() {
  local name=$1 cap=$2 filter=$3
  local log="$work/$name.txt"
  [[ $name == tests ]] && log="$out/tests.txt"
  step "$name" "$cap" "${fg[@]}" "$pack/bin/fitgrad_tests" --gtest_filter="$filter"
  if [[ -f $log ]] && ! grep -qE '^\[==========\] [1-9][0-9]* tests? from' "$log"; then
    echo "step $name: the filter matched no test" >>"$status"
    echo "$name $log" >>"$work/failed"
  fi
  [[ -f $log ]] && grep -E '^\[  PASSED  \] [0-9]+ tests?\.|^\[  SKIPPED \] [0-9]+ tests?,|^\[  FAILED  \] [0-9]+ tests?,|^\[  FAILED  \] .*\)$' \
    "$log" | head -25 | sed 's/^/  /' >>"$status"
}

# The fitgrad binaries, with the pack's libraries and the directories of the machine's own
# CUDA libraries that the pack leaves out on their command lines only (Note [What the device
# pack leaves out] in tools/device/libraries.sh).
lib_path=$pack/lib
found=""
if ((!rehearse)); then
  mapfile -t dirs < <(lib_dirs)
  while read -r name; do
    dir=$(lib_find "$name" "${dirs[@]}") || continue
    [[ :$lib_path: == *:$dir:* ]] || lib_path+=":$dir"
    found+=" $name"
  done < <(for bin in "$pack"/bin/*; do LD_LIBRARY_PATH=$pack/lib ldd "$bin"; done |
    awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u)
  # Note [Card tests cannot pass by skipping] in tests/card.h
  export FITGRAD_REQUIRE_CUDA=1
fi
fg=(env LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
export FITGRAD_ASSETS="$PWD/data/assets"

if ((rehearse)); then
  device=cpu
  say "rehearsal on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  gpt2=(--model gpt2-tiny --seq_len 64 --per_device_train_batch_size 2 --max_steps 4)
  qlora_shape=(--seq_len 64 --per_device_train_batch_size 1 --max_steps 2)
  bench_size=(--small --reps 1 --warmup 0)
  torch_size=(--small --reps 1 --warmup 0 --batch 2)
  sanitizer=()
  racecheck=()
  plan_card=h200
else
  device=cuda:0
  if ! nvidia-smi -L >"$work/gpu.txt" 2>&1; then
    say "no GPU visible (nvidia-smi -L failed: $(head -1 "$work/gpu.txt")): nothing can be checked"
    cp "$status" "$results"
    exit 1
  fi
  say "$(head -1 "$work/gpu.txt")"
  say "the machine's own libraries:${found:- none needed}; library path $lib_path"
  gpt2=(--model gpt2 --seq_len 1024 --per_device_train_batch_size 8 --max_steps 12)
  qlora_shape=(--seq_len 1024 --per_device_train_batch_size 8 --max_steps 8)
  bench_size=(--reps 10)
  torch_size=(--reps 10)
  sanitizer=(compute-sanitizer --tool memcheck --error-exitcode 99)
  racecheck=(compute-sanitizer --tool racecheck --error-exitcode 99)
  if ! command -v compute-sanitizer >/dev/null; then
    say "compute-sanitizer not found: the sanitizer steps run their tests without it"
    sanitizer=()
    racecheck=()
  fi
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  case "$card" in *H200*) plan_card=h200 ;; *H100*) plan_card=h100 ;; *A100*80*) plan_card=a100-80g ;;
    *A100*) plan_card=a100-40g ;; *4090*) plan_card=rtx4090 ;; *3090*) plan_card=rtx3090 ;; *) plan_card=h100 ;;
  esac
fi

# Where each library comes from (a missing one fails here by name), then the CLI starts and
# the card is counted: where CUDA cannot start, CudaCard's failure carries
# cudaGetDeviceCount's error (a rehearsal skips it).
step libraries 15 "${fg[@]}" bash -c 'source tools/device/libraries.sh && lib_check "$@"' \
  _ "$pack" "$rehearse"
step binaries 30 "${fg[@]}" bash -c '"$1" --help >/dev/null && "$2" --gtest_filter=CudaCard.*' \
  _ "$pack/bin/fitgrad" "$pack/bin/fitgrad_tests"
binaries=$?
grep -m1 -o 'no usable CUDA device (.*' "$work/binaries.txt" | sed 's/^/  /' >>"$status"
if ((binaries == 0)); then
  # 1. What no card has run yet (issue 57), first.
  tiles='CudaMultiTile/AttentionTiles.CudaMatchesTheCpu'
  CUDA_LAUNCH_BLOCKING=1 gtest_step new_cases 60 \
    "$tiles/*_D96_*:$tiles/*_D256_*:$tiles/T130_S257_D128_causal_softcap_*:CudaPacked.WideHeadsWindowsAndCapsMatchTheCpu"
  gtest_step nccl_dropped 20 'NcclGroup.ADroppedRunningAllReduceDoesNotHoldUpTheGroupsEnd'
  # Shared-memory races, which memcheck cannot see: the tensor-core (d 64, bf16) and SIMT
  # (d 36, f32) kernels over several tiles.
  step racecheck 90 "${fg[@]}" "${racecheck[@]}" "$pack/bin/fitgrad_tests" \
    --gtest_filter="$tiles/T200_S200_D64_causal_bf16:$tiles/T200_S200_D36_causal_f32"
  if grep -qiE 'device not supported|not supported on this (device|platform)' "$work/racecheck.txt" 2>/dev/null; then
    echo "step racecheck: skipped: compute-sanitizer refuses this device" >>"$status"
    sed -i '/^racecheck /d' "$work/failed"
    [[ -s $work/failed ]] || rm -f "$work/failed"
  fi

  # 2. Issue 46's card-side checks, in its order; launches synchronous where a fault should
  # name its kernel, but not for the error records, whose test needs the legacy stream's work
  # to stay queued.
  CUDA_LAUNCH_BLOCKING=1 gtest_step dropout 40 'CudaDropout/AttentionDropoutTiles.*/T77_S93_*'
  CUDA_LAUNCH_BLOCKING=1 gtest_step apollo 30 'Apollo.ACardFollowsTheCpuThroughProjectionRefreshes'
  gtest_step error_records 30 'CudaFirstUse.ABadIdInTheFirstIndexCheckingCallIsReported'
  gtest_step nccl_timeout 30 'NcclGroup.ACollectivePastTheTimeoutEndsWithItsErrorAndTheGroupStillCloses'
  gtest_step expandable 30 'CudaFirstUse.TheFirstAllocationCanBeAnExpandableSegment'

  # 3. The CUDA tests, each launch synchronous so that a fault names its kernel.
  CUDA_LAUNCH_BLOCKING=1 gtest_step tests 150 \
    '*BackendOps.*:CudaMultiTile/*:CudaPacked.*:*CudaErrorFlags.*:*StreamReuse.*:*Loader.PinnedBatchesReachTheDevice:*CudaTrain.*:*HostReads.*:NcclGroup.OneRank*'

  # 4. Kernels, fitgrad then PyTorch (python3 without the pack's libraries).
  step bench 60 "${fg[@]}" "$pack/bin/cuda_bench" --device "$device" "${bench_size[@]}"
  sed -n 's/^RESULT /fitgrad /p' "$work/bench.txt" >>"$rows"
  step torch 75 python3 tools/device/torch_reference.py --device "${device%:*}" "${torch_size[@]}"
  sed -n 's/^RESULT /torch /p' "$work/torch.txt" >>"$rows"
  if grep -q '^torch_reference: skipped' "$work/torch.txt"; then
    echo "step torch: $(grep -m1 '^torch_reference: skipped' "$work/torch.txt")" >>"$status"
  fi

  # 5. GPT-2 training, and the plan of the same run for this card.
  train_args=("${gpt2[@]}" --data data/assets/austen.txt --bf16 --optim adamw_torch
    --learning_rate 6e-4 --logging_steps 1 --eval_strategy no --save_strategy no)
  step train 75 "${fg[@]}" "$pack/bin/fitgrad" train "${train_args[@]}" --device "$device" \
    --output_dir "$work/train-run"
  # The steady tokens/s: the median of the logged steps after the first two.
  tail -n +3 <(grep -o '[0-9]* tok/s' "$work/train.txt") | sort -n |
    awk '{v[NR]=$1} END {if (NR) print "fitgrad train gpt2.tokens_per_s", v[int((NR+1)/2)]}' >>"$rows"
  grep -o 'peak memory [0-9.]* [KMG]iB' "$work/train.txt" | tail -1 |
    awk '{print "fitgrad train gpt2.peak", $3, $4}' >>"$rows"
  step memplan 30 "${fg[@]}" "$pack/bin/fitgrad" memplan "${train_args[@]}" --device_memory "$plan_card" \
    --output_dir "$work/memplan-run"
  grep -m1 'peak allocated:' "$work/memplan.txt" |
    awk '{print "memplan train gpt2.peak", $3, $4}' >>"$rows"

  # 6. A QLoRA step.
  step qlora 60 "${fg[@]}" "$pack/bin/fitgrad" train --model tools/device/smollm2-135m-gpt2-vocab.json \
    "${qlora_shape[@]}" --data data/assets/austen.txt --bf16 --quantize nf4 --lora_r 16 \
    --logging_steps 1 --eval_strategy no --save_strategy no --device "$device" \
    --output_dir "$work/qlora-run"
  grep -o '[0-9]* tok/s' "$work/qlora.txt" | tail -1 |
    awk '{print "fitgrad qlora smollm2_v50257.tokens_per_s", $1}' >>"$rows"
  grep -o 'peak memory [0-9.]* [KMG]iB' "$work/qlora.txt" | tail -1 |
    awk '{print "fitgrad qlora smollm2_v50257.peak", $3, $4}' >>"$rows"

  # 7. The memory checker over the op harness and the multi-tile cases, with what is left.
  step sanitizer 120 "${fg[@]}" "${sanitizer[@]}" "$pack/bin/fitgrad_tests" \
    --gtest_filter='*BackendOps.CudaMatchesTheCpu:CudaMultiTile/*CudaMatchesTheCpu*'
fi

# The table: fitgrad against PyTorch (or memplan) for each row both measured.
{
  python3 - "$rows" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    who, kind, name, *value = line.split()
    rows.setdefault((kind, name), {})[who] = " ".join(value)
print(f"{'kind':10} {'row':40} {'fitgrad':>12} {'reference':>12} {'ratio':>7}")
for (kind, name), v in sorted(rows.items()):
    mine = v.get("fitgrad", "-")
    ref = v.get("torch", v.get("memplan", "-"))
    try:
        ratio = f"{float(mine.split()[0]) / float(ref.split()[0]):.3f}"
    except (ValueError, ZeroDivisionError):
        ratio = "-"
    print(f"{kind:10} {name:40} {mine:>12} {ref:>12} {ratio:>7}")
PY
  echo
  cat "$status"
  if [[ -f $work/failed ]]; then
    sort -u "$work/failed" | while read -r name log; do
      [[ $log == budget ]] && continue
      echo
      echo "--- last lines of step $name ($log) ---"
      tail -15 "$log"
    done
  fi
  echo "total: $SECONDS s of the ${budget} s budget"
} >"$results" 2>&1
cat "$results"
tar -C "$work" -czf "$out/logs.tar.gz" --exclude=rows.txt --exclude=status.txt --exclude=failed . 2>/dev/null
[[ -f $work/failed ]] && exit 1
exit 0
