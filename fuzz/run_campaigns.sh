#!/usr/bin/env bash
# Runs a short libFuzzer campaign for every fuzz target built in BUILD_DIR (`make fuzz`):
#   fuzz/run_campaigns.sh BUILD_DIR SECONDS [TARGET...]
# Each target starts from a temporary copy of its committed seeds, fuzz/corpus/<name>/, or of
# golden files of the tests (golden_seeds below), so the repository is never written, and
# uses fuzz/<name>.dict. The targets of the input surfaces run each input on a thread with a
# bounded stack (fuzz/small_stack.h). A crash, a sanitizer report, a stack overflow, a leak, a
# timeout (-timeout, seconds per input) or running out of memory (-rss_limit_mb) fails the
# script; the input that did it is kept as BUILD_DIR/fuzz/artifacts/<name>-crash-<sha1>
# and the end of the target's log is printed. The last line per target has its speed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if (($# < 2)); then
  echo "usage: fuzz/run_campaigns.sh BUILD_DIR SECONDS [TARGET...]" >&2
  exit 2
fi
build=$1
seconds=$2
shift 2
targets=("$@")
if ((${#targets[@]} == 0)); then
  for src in fuzz/*_fuzz.cpp; do
    name=$(basename "$src" _fuzz.cpp)
    targets+=("$name")
  done
fi

artifacts="$build/fuzz/artifacts"
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The seeds of the targets that start from golden files of the tests (fuzz/CMakeLists.txt
# names their folders): the real templates, records and tokenizer.json files.
golden_seeds() {
  case $1 in
    jinja) ls tests/golden/chat_templates/*.jinja ;;
    sft_records) ls tests/golden/sft/records/* ;;
    tokenizer_json) ls tests/golden/hf_tokenizers/*/tokenizer.json ;;
  esac
}

failed=()
for name in "${targets[@]}"; do
  bin="$build/fuzz/${name}_fuzz"
  if [[ ! -x "$bin" ]]; then
    echo "fuzz: $bin is not built" >&2
    exit 1
  fi
  mkdir -p "$work/$name"
  if [[ -d "fuzz/corpus/$name" ]]; then
    cp -r "fuzz/corpus/$name/." "$work/$name/"
  else
    for f in $(golden_seeds "$name"); do  # tokenizer.json files share a name: prefix the folder
      cp "$f" "$work/$name/$(basename "$(dirname "$f")")_$(basename "$f")"
    done
  fi
  log="$work/$name.log"
  echo "fuzz: $name for ${seconds}s (seeds: $(ls "$work/$name" | wc -l))"
  status=0
  "$bin" -max_total_time="$seconds" -dict="fuzz/$name.dict" -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$name-" "$work/$name" >"$log" 2>&1 ||
    status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
  corpus=$(ls "$work/$name" | wc -l)
  if ((status != 0)); then
    echo "fuzz: $name FAILED (exit $status); the end of its log:" >&2
    tail -n 60 "$log" >&2
    failed+=("$name")
  else
    echo "fuzz: $name ok: ${runs:-?} runs, ${rate:-?} runs/s, ${cov:-cov: ?}, corpus $corpus"
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz: failed: ${failed[*]} (inputs in $artifacts)" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s without a crash"
