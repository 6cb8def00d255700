#!/usr/bin/env bash
# Builds, on this machine, the pack that tools/device-check.sh runs on a lent GPU machine
# (issues 15 and 26). The run tool's `carry` takes the pack folder, 64 MiB at most:
#   bin/  fitgrad_tests, fitgrad (the CLI) and cuda_bench, stripped;
#   lib/  the shared libraries they load that are not the C/C++ runtime or the driver:
#         fmt, OpenMP and the CUDA runtime (libcudart, small). cuBLASLt (about 500 MiB)
#         cannot travel: device-check.sh finds the GPU machine's own (its CUDA 13 toolkit or
#         PyTorch's nvidia-cublas wheel) and names the one it used.
# OpenBLAS and oneDNN are left out (-DFITGRAD_OPENBLAS=OFF -DFITGRAD_DNNL=OFF): the pack
# checks the CUDA backend, and the two would not fit the carry.
#
# The build directory is reused: it is configured only when it has no build.ninja, so a
# second call (after a change, or on the day a GPU is lent) recompiles only what changed.
# The pack's size is printed; above 48 MiB it is replaced by pack.tar.xz beside it, which
# device-check.sh unpacks (carry that file instead).
#
# --rehearse packs the CPU build of `make build` (BUILD_DIR, default build) the same way, for
# `tools/device-check.sh --rehearse`; nothing is compiled for CUDA.
# Usage: tools/device-prepare.sh [--rehearse] [build dir, default build-device]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
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
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFITGRAD_WERROR=ON \
      -DFITGRAD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DFITGRAD_TESTS=ON -DFITGRAD_BENCH=ON \
      -DFITGRAD_OPENBLAS=OFF -DFITGRAD_DNNL=OFF >/dev/null
  fi
fi
cmake --build "$build" --target fitgrad_tests fitgrad_cli cuda_bench
pack="$build/pack"
rm -rf "$pack" "$build/pack.tar.xz"
mkdir -p "$pack/bin" "$pack/lib"
cp "$build/tests/fitgrad_tests" "$build/fitgrad" "$build/bench/cuda_bench" "$pack/bin/"
strip "$pack"/bin/*
# Every library the binaries load except the C/C++ runtime, the driver and cuBLAS; on a
# rehearsal, also what this machine's Debian packages provide (they are installed here).
for bin in "$pack"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libstdc++* | libgcc_s* | ld-linux* | libdl.so* | libpthread* | librt.so*) ;;
    libcuda.so* | libcublas* | libnvidia*) ;;
    libcudart*) cp -L "$lib" "$pack/lib/" ;;
    *) ((rehearse)) || cp -L "$lib" "$pack/lib/" ;;
  esac
done
bytes=$(du -sb "$pack" | cut -f1)
echo "device-prepare: $pack is $((bytes / 1048576)) MiB (carry limit 64 MiB with the working tree)"
if ((bytes > 48 * 1048576)); then
  tar -C "$build" -cJf "$build/pack.tar.xz" pack
  rm -rf "$pack"
  echo "device-prepare: compressed to $build/pack.tar.xz ($(du -m "$build/pack.tar.xz" | cut -f1) MiB)"
  echo "device-prepare: carry $build/pack.tar.xz, then run: bash tools/device-check.sh $pack"
else
  echo "device-prepare: carry $pack, then run: bash tools/device-check.sh $pack"
fi
