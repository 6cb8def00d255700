#!/usr/bin/env bash
# Builds, on this machine, the pack that tools/device-check.sh runs on a lent GPU machine
# (issues 15, 26 and 57). The run tool's `carry` takes the pack, 64 MiB at most with the
# working tree:
#   bin/  fitgrad_tests, fitgrad (the CLI) and cuda_bench, stripped;
#   lib/  the shared libraries they load that the lent machine does not provide: fmt, OpenMP,
#         Gloo, hiredis and the CUDA runtime (libcudart, small). NCCL, cuBLAS, cuSOLVER,
#         cuSPARSE and nvJitLink stay behind, and device-check.sh finds the machine's own
#         (Note [What the device pack leaves out] in tools/device/libraries.sh).
# OpenBLAS and oneDNN are left out (-DFITGRAD_OPENBLAS=OFF -DFITGRAD_DNNL=OFF): the pack
# checks the CUDA backend, and the two would not fit the carry.
#
# The build directory is reused: it is configured only when it has no build.ninja, so a
# second call (after a change, or on the day a GPU is lent) recompiles only what changed.
# The pack's size is printed; above 48 MiB it is replaced by pack.tar.xz beside it, which
# device-check.sh unpacks (carry that file instead); so is one that would not fit the carry
# beside the working tree (about 23 MiB of tracked files). What is carried (the folder or the
# file) must stay within 60 MiB, and within 64 MiB with the working tree: above that the
# script fails, naming the largest files.
#
# --rehearse packs the CPU build of `make build` (BUILD_DIR, default build) the same way, for
# `tools/device-check.sh --rehearse`; nothing is compiled for CUDA, and the libraries that
# this machine's Debian packages provide are not copied (they are installed here).
# --libraries BINARY... classifies the libraries that ldd lists for the binaries as the pack
# would (system, driver, provided, packed), prints them with the packed ones' size, and fails
# when a library to pack is missing here or the packed ones pass 60 MiB: `make
# device-rehearsal` runs it over the CUDA build of `make cuda-check`, whose link check loads
# the same libraries as the pack's binaries.
# Usage: tools/device-prepare.sh [--rehearse] [build dir, default build-device]
#        tools/device-prepare.sh --libraries BINARY...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/device/libraries.sh
limit_mib=60

# needed BINARY...: "name path" for every library ldd lists ("name not" when not found).
needed() {
  local bin
  for bin in "$@"; do
    ldd "$bin" | awk '$2 == "=>" {print $1, ($3 == "not" ? "not" : $3)}'
  done | sort -u
}

if [[ ${1:-} == --libraries ]]; then
  shift
  (($# > 0)) || { echo "device-prepare: --libraries takes the binaries to inspect" >&2; exit 2; }
  bytes=0
  missing=""
  while read -r name path; do
    kind=$(lib_kind "$name")
    size=-
    if [[ $kind == packed ]]; then
      if [[ $path == not ]]; then
        missing+=" $name"
      else
        size=$(stat -L -c %s "$path")
        bytes=$((bytes + size))
      fi
    fi
    printf 'device-prepare:   %-9s %-28s %10s  %s\n' "$kind" "$name" "$size" "$path"
  done < <(needed "$@")
  echo "device-prepare: the libraries to pack take $((bytes / 1048576)) MiB (limit ${limit_mib} MiB)"
  [[ -z $missing ]] || { echo "device-prepare: libraries to pack are missing here:$missing" >&2; exit 1; }
  ((bytes <= limit_mib * 1048576)) || {
    echo "device-prepare: the libraries to pack pass ${limit_mib} MiB: leave the large ones out" \
      "(the provided list of tools/device/libraries.sh) if the lent machine has them" >&2
    exit 1
  }
  exit 0
fi

rehearse=0
if [[ ${1:-} == --rehearse ]]; then
  rehearse=1
  shift
fi
if ((rehearse)); then
  build=${1:-${BUILD_DIR:-build}}
  [[ -f $build/build.ninja ]] || { echo "device-prepare: $build is not configured: run make build" >&2; exit 1; }
else
  build=${1:-build-device}
  if [[ ! -f $build/build.ninja ]]; then
    ccache=$(command -v ccache || true)
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFITGRAD_WERROR=ON \
      -DFITGRAD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DFITGRAD_TESTS=ON -DFITGRAD_BENCH=ON \
      -DFITGRAD_OPENBLAS=OFF -DFITGRAD_DNNL=OFF \
      ${ccache:+-DCMAKE_CXX_COMPILER_LAUNCHER=$ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=$ccache} >/dev/null
  fi
fi
cmake --build "$build" --target fitgrad_tests fitgrad_cli cuda_bench
pack="$build/pack"
rm -rf "$pack" "$build/pack.tar.xz"
mkdir -p "$pack/bin" "$pack/lib"
cp "$build/tests/fitgrad_tests" "$build/fitgrad" "$build/bench/cuda_bench" "$pack/bin/"
strip "$pack"/bin/*
# Note [What the device pack leaves out]; a rehearsal copies only the CUDA runtime (none in
# a CPU build): this machine's Debian packages provide the rest here.
while read -r name path; do
  [[ $(lib_kind "$name") == packed ]] || continue
  [[ $path != not ]] || { echo "device-prepare: $name is not found here" >&2; exit 1; }
  if ((!rehearse)) || [[ $name == libcudart* ]]; then
    cp -L "$path" "$pack/lib/"
  fi
done < <(needed "$pack"/bin/*)
bytes=$(du -sb "$pack" | cut -f1)
# What travels with the pack: the working tree (tracked files, and untracked ones that git
# does not ignore); the pack's folder is ignored, so it is not counted twice.
tree=$(git ls-files -z --cached --others --exclude-standard |
  du -cb --files0-from=- 2>/dev/null | awk 'END {print $1 + 0}')
echo "device-prepare: $pack is $((bytes / 1048576)) MiB; the working tree $((tree / 1048576)) MiB" \
  "(the carry takes 64 MiB of both)"
carried=$pack
if ((bytes > 48 * 1048576 || bytes + tree > 64 * 1048576)); then
  tar -C "$build" -cJf "$build/pack.tar.xz" pack
  carried=$build/pack.tar.xz
  echo "device-prepare: compressed to $carried ($(du -m "$carried" | cut -f1) MiB)"
fi
carried_bytes=$(du -sb "$carried" | cut -f1)
if ((carried_bytes > limit_mib * 1048576 || carried_bytes + tree > 64 * 1048576)); then
  echo "device-prepare: $carried is $((carried_bytes / 1048576)) MiB: over ${limit_mib} MiB, or" \
    "with the working tree over the 64 MiB carry; its largest files:" >&2
  find "$pack" -type f -printf '%s %p\n' 2>/dev/null | sort -rn | head -5 | sed 's/^/  /' >&2
  exit 1
fi
[[ $carried == "$pack" ]] || rm -rf "$pack"
echo "device-prepare: carry $carried, then run: bash tools/device-check.sh $pack"
