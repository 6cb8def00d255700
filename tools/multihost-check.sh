#!/usr/bin/env bash
# make multihost-check: data parallelism across hosts, rehearsed on one machine (issue 44).
#
# Two network namespaces stand for two hosts, joined by a veth pair on a private subnet
# (10.231.0.1 and 10.231.0.2, each end the host's eth0); a Redis server listens on the first
# host's address as the README's two-node recipe starts it, and each host runs
# `GLOO_SOCKET_IFNAME=eth0 fitgrad launch --nnodes 2 --node_rank K --nproc_per_node 2
# --master_addr 10.231.0.1 --master_port 29500 train ...` as the recipe writes it. The ranks of
# one host reach the other's only over the veth link, so what crosses hosts is what a
# cluster's network carries.
#
# Cases:
#   equality  DDP, ZeRO-1 and ZeRO-2: the 2 x 2 job's losses equal a 1 x 4 job's bit for bit
#             (the same four ranks reduce in the same order; only the transport differs); the
#             three jobs meet in one Redis server, one after the other.
#   linkdown  the second host's link goes down after the first checkpoint: both launchers end
#             nonzero within --ddp_timeout plus the stop grace, a log names the lost peer, the
#             checkpoint is whole, and the job resumes on the first host alone (2 ranks of
#             twice the batch: the same global batch).
#   storedown the Redis server is killed before the second host arrives: its ranks end with an
#             error naming the store within a bounded time.
#   late      the second host starts 5 s late: the job trains; it never starts: the first
#             host's ranks end within --ddp_timeout naming the ranks that never came.
#   bytes     what each host sends per step, counted on its eth0 (two runs of 2 x 1 ranks, 4
#             and 12 steps, differenced so that the start's traffic cancels), against the
#             formulas for P parameters of 4 bytes and N = 2 ranks: DDP's ring all-reduce sends
#             2 (N-1)/N * 4P; ZeRO-1 adds the all-gather of the updated parameters, (N-1)/N *
#             4P; ZeRO-2's reduce-scatter is an all-reduce on Gloo (Note [Reduce-scatter as an
#             all-reduce] in dist/gloo_group.h), so it sends what ZeRO-1 does. The count
#             includes the frames' headers and the step's small collectives: within 10%.
#   shaped    both links shaped (tc netem delay 20ms loss 1%; where the kernel has no netem,
#             a 100 Mbit/s token bucket instead, and the line says so): a 2 x 1 job of the
#             3M-parameter demo model completes, and its step time is printed beside the same
#             job on plain links and the communication-free step (one process, one rank's
#             batch) for bench/RESULTS.md.
#
# Needs root (network namespaces) and redis-server (tools/install-deps.sh installs it); where
# namespaces cannot be made, it prints one line saying why and exits 0.
#
# Usage: tools/multihost-check.sh BUILD_DIR [case ...]   (default: every case)
set -euo pipefail

build=${1:?usage: tools/multihost-check.sh BUILD_DIR [case ...]}
shift
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(equality linkdown storedown late bytes shaped)
cli=$(realpath "$build/fitgrad")
root=$(cd "$(dirname "$0")/.." && pwd)

skip() {
  echo "multihost-check: skipped: $*"
  exit 0
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root (run it as root, as CI does)"
command -v ip > /dev/null || skip "no ip command (iproute2)"
command -v redis-server > /dev/null || {
  echo "multihost-check: redis-server is missing: run tools/install-deps.sh" >&2
  exit 1
}
ns_a=fg-mh-a-$$
ns_b=fg-mh-b-$$
work=$(mktemp -d /tmp/fitgrad-multihost.XXXXXX)
redis_pid=
cleanup() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2> /dev/null || true
  ip netns pids "$ns_a" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
  ip netns pids "$ns_b" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
  ip netns del "$ns_a" 2> /dev/null || true
  ip netns del "$ns_b" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

addr_a=10.231.0.1
addr_b=10.231.0.2
# The two hosts, each end of the link its eth0 as the README's recipe names it; a machine
# (a container) that cannot make them gets the skip line with the step that failed.
make_hosts() {
  ip netns add "$ns_a" && ip netns add "$ns_b" &&
    ip link add veth-a netns "$ns_a" type veth peer name veth-b netns "$ns_b" &&
    ip -n "$ns_a" link set veth-a name eth0 && ip -n "$ns_b" link set veth-b name eth0 &&
    ip -n "$ns_a" addr add $addr_a/24 dev eth0 && ip -n "$ns_b" addr add $addr_b/24 dev eth0 &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set eth0 up && ip -n "$ns_b" link set eth0 up &&
    ip netns exec "$ns_a" true && ip netns exec "$ns_b" true
}
why=$(make_hosts 2>&1) || skip "this machine cannot join two network namespaces: $why"

port=29500
start_redis() {
  ip netns exec "$ns_a" redis-server --bind $addr_a --port $port --protected-mode no \
    --save '' > "$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 50); do
    ip netns exec "$ns_b" bash -c "exec 3<>/dev/tcp/$addr_a/$port" 2> /dev/null && return 0
    sleep 0.1
  done
  echo "multihost-check: redis-server did not start: $(cat "$work/redis.log")" >&2
  exit 1
}
stop_redis() {
  kill "$redis_pid" 2> /dev/null || true
  wait "$redis_pid" 2> /dev/null || true
  redis_pid=
}

head -c 200000 "$root/data/assets/austen.txt" > "$work/corpus.txt"
flags() { # batch steps [logging steps]
  echo "--model llama-tiny --data $work/corpus.txt --seq_len 16 --per_device_train_batch_size $1" \
    "--max_steps $2 --learning_rate 1e-3 --logging_steps ${3:-1} --eval_strategy no" \
    "--progress plain --ddp_bucket_cap_mb 1"
}
# Host K of the README's two-node recipe: host ns node_rank ranks-per-host log train-args...
host() {
  local ns=$1 k=$2 n=$3 log=$4
  shift 4
  ip netns exec "$ns" env GLOO_SOCKET_IFNAME=eth0 "$cli" launch --nnodes 2 --node_rank "$k" \
    --nproc_per_node "$n" --master_addr $addr_a --master_port $port train "$@" > "$log" 2>&1
}
# Both hosts of one job, host 1 in the background: both_hosts ranks-per-host log train-args...
# (logs log.log and log-b.log); fails naming the host whose launcher failed.
both_hosts() {
  local n=$1 log=$2
  shift 2
  host "$ns_b" 1 "$n" "$log-b.log" "$@" &
  local other=$!
  host "$ns_a" 0 "$n" "$log.log" "$@" || fail "$(basename "$log"): host 0"
  wait $other || fail "$(basename "$log"): host 1"
}
losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl"; }
fail() {
  echo "multihost-check: FAILED: $*" >&2
  for f in "$work"/*.log; do
    echo "--- $f" >&2
    tail -n 20 "$f" >&2
  done
  exit 1
}

case_equality() {
  # One Redis server for the three jobs: each removes its keys when it ends (Note [A job
  # removes its keys] in dist/store.h), so the next meets there afresh.
  start_redis
  for zero in 0 1 2; do
    local one=$work/one-$zero two=$work/two-$zero
    ip netns exec "$ns_a" "$cli" launch --nproc_per_node 4 train $(flags 2 4) --zero_stage $zero \
      --output_dir "$one" > "$work/one.log" 2>&1 || fail "1 x 4, zero $zero"
    both_hosts 2 "$work/two-$zero" $(flags 2 4) --zero_stage $zero --output_dir "$two"
    [ "$(losses "$one" | wc -l)" = 4 ] || fail "1 x 4 logged $(losses "$one" | wc -l) losses"
    diff <(losses "$one") <(losses "$two") > /dev/null ||
      fail "zero $zero: 2 x 2 losses $(losses "$two" | tr '\n' ' ') differ from 1 x 4's" \
        "$(losses "$one" | tr '\n' ' ')"
    echo "multihost-check: equality, zero stage $zero: 2 hosts x 2 ranks = 1 host x 4 ranks," \
      "4 losses bit for bit"
  done
  stop_redis
}

case_linkdown() {
  local run=$work/linkdown
  start_redis
  local t0=$SECONDS
  host "$ns_b" 1 2 "$work/b.log" $(flags 2 400) --save_steps 2 --ddp_timeout 20 \
    --output_dir "$run" &
  local other=$!
  host "$ns_a" 0 2 "$work/a.log" $(flags 2 400) --save_steps 2 --ddp_timeout 20 \
    --output_dir "$run" &
  local mine=$!
  for _ in $(seq 600); do
    [ -d "$run/checkpoint-2" ] && break
    sleep 0.1
  done
  [ -d "$run/checkpoint-2" ] || fail "no checkpoint-2 before the link went down"
  ip -n "$ns_b" link set eth0 down
  t0=$SECONDS
  local rc_a=0 rc_b=0
  wait $mine || rc_a=$?
  wait $other || rc_b=$?
  local took=$((SECONDS - t0))
  stop_redis
  [ $rc_a != 0 ] && [ $rc_b != 0 ] || fail "a lost link ended host 0 with $rc_a, host 1 with $rc_b"
  [ $took -le 120 ] || fail "the ranks took ${took}s to end after the link went down"
  grep -q -i 'rank' "$work/a.log" || fail "host 0's log names no rank"
  ip -n "$ns_b" link set eth0 up
  local last
  last=$(ls -d "$run"/checkpoint-* | sort -t- -k2 -n | tail -n 1)
  "$cli" inspect "$last/model.safetensors" > /dev/null || fail "$last is not whole"
  ip netns exec "$ns_a" "$cli" launch --nproc_per_node 2 train $(flags 4 $(($(basename "$last" |
    cut -d- -f2) + 2))) --save_steps 2 --output_dir "$run" \
    --resume_from_checkpoint "$last" > "$work/resume.log" 2>&1 || fail "the resume on host 0"
  echo "multihost-check: linkdown: both hosts ended (exit $rc_a, $rc_b) ${took}s after the link" \
    "went down; $(basename "$last") resumed on one host of 2 ranks"
  echo "  host 0: $(grep -m1 '^error' "$work/a.log" | cut -c1-300)"
  echo "  host 1: $(grep -m1 '^error' "$work/b.log" | cut -c1-300)"
}

case_storedown() {
  local run=$work/storedown
  start_redis
  host "$ns_a" 0 2 "$work/a.log" $(flags 2 4) --ddp_timeout 15 --output_dir "$run" &
  local mine=$!
  sleep 2
  stop_redis
  local t0=$SECONDS rc=0
  wait $mine || rc=$?
  local took=$((SECONDS - t0))
  [ $rc != 0 ] || fail "host 0 trained without its store"
  [ $took -le 60 ] || fail "host 0 took ${took}s to end after the store died"
  grep -q -i 'redis\|store' "$work/a.log" || fail "host 0's error names no store"
  echo "multihost-check: storedown: host 0 ended (exit $rc) ${took}s after the store died:" \
    "$(grep -i -m1 'error' "$work/a.log" | cut -c1-160)"
}

case_late() {
  start_redis
  host "$ns_a" 0 2 "$work/a.log" $(flags 2 3) --ddp_timeout 20 --output_dir "$work/late" &
  local mine=$!
  sleep 5
  host "$ns_b" 1 2 "$work/b.log" $(flags 2 3) --ddp_timeout 20 --output_dir "$work/late" ||
    fail "the late host"
  wait $mine || fail "host 0, waiting for a late host"
  stop_redis
  [ "$(losses "$work/late" | wc -l)" = 3 ] || fail "the job with a late host did not train"
  start_redis
  local t0=$SECONDS rc=0
  host "$ns_a" 0 2 "$work/a.log" $(flags 2 3) --ddp_timeout 20 --output_dir "$work/never" || rc=$?
  local took=$((SECONDS - t0))
  stop_redis
  [ $rc != 0 ] || fail "host 0 trained without host 1"
  [ $took -le 40 ] || fail "host 0 waited ${took}s for a host that never came"
  grep -q 'never came' "$work/a.log" || fail "host 0's error does not say who never came"
  echo "multihost-check: late: a host 5 s late joined the job; one that never came was named" \
    "after ${took}s: $(grep -m1 '^error' "$work/a.log" | cut -c1-160)"
}

# The bytes host 0 sent on its eth0 during a 2 x 1 job of $1 steps with --zero_stage $2.
two_by_one_tx() {
  local before after
  start_redis
  before=$(ip netns exec "$ns_a" cat /sys/class/net/eth0/statistics/tx_bytes)
  both_hosts 1 "$work/bytes-$1-$2" $(flags 2 "$1" 1000) --save_strategy no --zero_stage "$2" \
    --output_dir "$work/bytes"
  after=$(ip netns exec "$ns_a" cat /sys/class/net/eth0/statistics/tx_bytes)
  stop_redis
  rm -rf "$work/bytes"
  echo $((after - before))
}

case_bytes() {
  local params
  params=$("$cli" train $(flags 2 1) --device meta --output_dir "$work/meta" 2>&1 |
    sed -n 's/^parameters: \([0-9]*\) .*/\1/p')
  [ -n "$params" ] || fail "no parameter count from the dry run"
  for zero in 0 1 2; do
    local short long per want
    short=$(two_by_one_tx 4 $zero)
    long=$(two_by_one_tx 12 $zero)
    per=$(((long - short) / 8))
    want=$((zero == 0 ? 4 * params : 4 * params * 3 / 2))
    awk -v a=$per -v b=$want 'BEGIN { r = a / b; exit !(r > 0.99 && r < 1.10) }' ||
      fail "zero $zero: host 0 sent $per bytes a step, the formula says $want"
    echo "multihost-check: bytes, zero stage $zero: host 0 sent $per bytes a step; the formula" \
      "$want ($(awk -v a=$per -v b=$want 'BEGIN { printf "%.3f", a / b }') of it) for $params" \
      "parameters"
  done
}

# The seconds per step of a finished run's log ("done: N steps in X s").
per_step() {
  sed -n 's/^done: \([0-9]*\) steps in \([0-9.]*\) s.*/\2 \1/p' "$1" |
    awk '{printf "%.3f", $1 / $2}'
}

case_shaped() {
  local shape="netem delay 20ms loss 1%" note=""
  if ! ip netns exec "$ns_a" tc qdisc add dev eth0 root $shape 2> /dev/null; then
    shape="tbf rate 100mbit burst 64kb latency 100ms"
    note=" (this kernel has no netem qdisc: the links are limited to 100 Mbit/s instead)"
    ip netns exec "$ns_a" tc qdisc add dev eth0 root $shape
  fi
  ip netns exec "$ns_b" tc qdisc add dev eth0 root $shape
  local f="--model $root/apps/demo/model.json --data $work/corpus.txt --seq_len 64"
  f+=" --per_device_train_batch_size 2 --max_steps 20 --logging_steps 10 --eval_strategy no"
  f+=" --save_strategy no --progress plain"
  start_redis
  both_hosts 1 "$work/shaped" $f --output_dir "$work/shaped"
  ip netns exec "$ns_a" tc qdisc del dev eth0 root
  ip netns exec "$ns_b" tc qdisc del dev eth0 root
  both_hosts 1 "$work/plain" $f --output_dir "$work/plain"
  stop_redis
  "$cli" train $f --output_dir "$work/alone" > "$work/alone.log" 2>&1 || fail "the lone process"
  echo "multihost-check: shaped: the 2 x 1 job completed over links shaped by '$shape'$note"
  echo "  seconds per step: shaped $(per_step "$work/shaped.log"), plain" \
    "$(per_step "$work/plain.log"), communication-free (one process) $(per_step "$work/alone.log")"
}

for c in "${cases[@]}"; do
  "case_$c"
done
echo "multihost-check: passed (${cases[*]})"
