#!/usr/bin/env bash
# `make fresh-check`: proves that a fresh Debian machine builds and runs fitgrad with no hand
# step. It builds a minimal root of this machine's Debian release with debootstrap (from
# Debian's packages, as root), copies the checkout in (its tracked and untracked, not ignored
# files: no build directory), and inside it, from nothing, runs what a new user runs:
#   1. apt-get install make (the one tool `make demo` presumes; git brought the checkout)
#   2. tools/install-deps.sh
#   3. the configure step of `make build` (tests and benchmarks on, as `make test` has them)
#   4. the `fitgrad` command line's build
#   5. `make demo DEMO_STEPS=$FRESH_DEMO_STEPS`: trains, saves a checkpoint, samples from it,
#      and the loss curve and memory record must exist afterwards
#   6. oneMKL is in .deps/mkl (step 2 put it there) and, on an Intel CPU, the demo ran on it
# Each step prints its time. A failed step ends the check, and its last line names the step
# and the error line of its log (a missing package, header or library is named there).
#
# FITGRAD_CACHE (default ~/.cache/fitgrad) keeps what is safe to keep between runs, under
# fresh-check/: the debootstrap tarball of the base system (rebuilt when unreadable) and the
# .deb files apt fetched (apt checks every one against the release's hashes before use).
# Nothing else survives: the root is made anew every run and removed afterwards.
# Variables: FRESH_DEMO_STEPS (30), FRESH_ROOT_PARENT (/var/tmp), FRESH_KEEP=1 keeps the
# root, DEBIAN_MIRROR (http://deb.debian.org/debian).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$PWD

steps=${FRESH_DEMO_STEPS:-30}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${FITGRAD_CACHE:-${HOME:-/root}/.cache/fitgrad}/fresh-check
parent=${FRESH_ROOT_PARENT:-/var/tmp}

fail() {
  echo "fresh-check: FAILED: $*" >&2
  exit 1
}

[[ $(id -u) -eq 0 ]] || fail "must run as root (debootstrap and chroot need it)"
[[ -r /etc/os-release ]] || fail "no /etc/os-release: cannot tell which Debian release to build"
# shellcheck disable=SC1091
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ -n "$suite" ]] || fail "/etc/os-release names no VERSION_CODENAME"
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 || fail "$src is not a git checkout"

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "fresh-check: installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends debootstrap \
    >/dev/null 2>&1 ||
    { apt-get -q update >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get -q -y install --no-install-recommends debootstrap \
        >/dev/null; } || fail "could not install debootstrap (apt-get install debootstrap)"
fi

mkdir -p "$cache/debs"
root=$(mktemp -d "$parent/fitgrad-fresh.XXXXXX")
logs=$root.logs
mkdir -p "$logs"

cleanup() {
  # Unmount before removing: rm must never walk into the host's /proc.
  if mountpoint -q "$root/proc"; then umount "$root/proc" || umount -l "$root/proc" || true; fi
  if [[ "${FRESH_KEEP:-0}" == 1 ]]; then
    echo "fresh-check: kept the root at $root (logs in $logs)"
  elif ! mountpoint -q "$root/proc"; then
    rm -rf --one-file-system "$root" "$logs"
  fi
}
trap cleanup EXIT

# The most telling line of a failed step's log: the package CMake could not find, else the
# first two lines of CMake's error joined, a compiler's missing header, the linker's missing
# library or symbol, apt's error, any other error, or else the log's last line.
error_line() {
  local log=$1 line pattern
  line=$(grep -m1 -oE 'Could NOT find [^ ]+ \(missing: [^)]*\)|Could not find a package configuration file provided by "[^"]+"' "$log" || true)
  [[ -z "$line" ]] || { echo "$line"; return; }
  line=$(awk '/CMake Error/ {found = 1; head = $0; next}
              found && NF {sub(/^[ \t]+/, ""); print head " " $0; exit}' "$log")
  for pattern in "fatal error:" "cannot find -l|undefined reference" "^E: " "error:|Error:"; do
    [[ -z "$line" ]] || break
    line=$(grep -m1 -E "$pattern" "$log" | sed 's/^[[:space:]]*//' || true)
  done
  [[ -n "$line" ]] || line=$(tail -n 1 "$log")
  echo "$line"
}

# run_step NAME COMMAND...: runs the command with its output in $logs/<NAME>.log, and prints
# its time, or the failure's error line last.
run_step() {
  local name=$1 start end log
  shift
  log=$logs/${name//[^A-Za-z0-9=._-]/-}.log
  start=$(date +%s)
  if ! "$@" >"$log" 2>&1; then
    tail -n 25 "$log" >&2
    fail "step '$name': $(error_line "$log")"
  fi
  end=$(date +%s)
  echo "fresh-check: $name ok ($((end - start)) s)"
}

# Inside the root: a login-like environment of its own, nothing of this shell's.
# pip in the root trusts what the host trusts (a copy of its CA bundle, which a TLS-inspecting
# proxy between the host and PyPI may extend), as apt there uses the host's resolver.
host_ca=/etc/fitgrad-fresh-host-ca.crt
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=$host_ca DEBIAN_FRONTEND=noninteractive /bin/bash -c "$1"
}

tarball=$cache/$suite-minbase.tgz
make_base() {
  if [[ -s "$tarball" ]] &&
    debootstrap --variant=minbase --unpack-tarball="$tarball" "$suite" "$root" "$mirror"; then
    return 0
  fi
  echo "fresh-check: (re)building the debootstrap tarball $tarball"
  rm -rf --one-file-system "${root:?}"/* "$tarball"
  debootstrap --variant=minbase --make-tarball="$tarball.part" "$suite" "$root.tarball" "$mirror"
  mv "$tarball.part" "$tarball"
  rm -rf --one-file-system "$root.tarball"
  debootstrap --variant=minbase --unpack-tarball="$tarball" "$suite" "$root" "$mirror"
}
run_step "debootstrap $suite" make_base

prepare() {
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$root$host_ca"
  mount -t proc proc "$root/proc"
  cp -p "$cache"/debs/*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
  mkdir -p "$root/src"
  git -C "$src" ls-files -z --cached --others --exclude-standard |
    (cd "$src" && tar --null -T - -cf - 2>/dev/null) | tar -C "$root/src" -xf -
}
run_step "copy the checkout" prepare

keep_debs() { cp -u "$root"/var/cache/apt/archives/*.deb "$cache/debs/" 2>/dev/null || true; }
run_step "apt-get install make" in_root "apt-get -q update && apt-get -q -y install --no-install-recommends make"
run_step "tools/install-deps.sh" in_root "cd /src && bash tools/install-deps.sh"
keep_debs
run_step "configure" in_root "cd /src && make configure"
run_step "build fitgrad" in_root "cd /src && cmake --build build --target fitgrad_cli"
run_step "make demo DEMO_STEPS=$steps" in_root "cd /src && make demo DEMO_STEPS=$steps"

check_demo() {
  local d=$root/src/build/demo log=$logs/make-demo-DEMO_STEPS=$steps.log f
  for f in "checkpoint-$steps/model.safetensors" loss_curve.svg metrics.jsonl memory_trace.json \
    memory.json; do
    [[ -s "$d/$f" ]] || { echo "the demo wrote no build/demo/$f"; return 1; }
  done
  grep -q "== a sample from" "$log" || { echo "the demo printed no sample"; return 1; }
  grep -q "loss curve: " "$log" || { echo "the demo did not say where its loss curve is"; return 1; }
}
run_step "demo outputs" check_demo
# install-deps.sh put oneMKL in the checkout's prefix, and on an Intel CPU the demo's GEMM
# ran on it (Note [GEMM backend per machine] in tensor/cpu/gemm.cpp).
check_mkl() {
  local log=$logs/make-demo-DEMO_STEPS=$steps.log
  [[ -f "$root/src/.deps/mkl/lib/libmkl_rt.so.3" ]] ||
    { echo "tools/install-deps.sh left no oneMKL in .deps/mkl"; return 1; }
  if grep -q GenuineIntel /proc/cpuinfo; then
    grep -q "GEMM mkl (oneMKL" "$log" || { echo "the demo's GEMM was not oneMKL: $(grep -m1 'GEMM' "$log")"; return 1; }
  fi
  grep -m1 "GEMM" "$log"
}
run_step "oneMKL installed and used" check_mkl
echo "fresh-check: passed ($suite, from nothing to a trained and sampled demo)"
