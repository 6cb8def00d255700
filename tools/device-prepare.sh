#!/usr/bin/env bash
# Builds, on this machine, what tools/device-check.sh runs on a lent GPU machine (issue 15),
# into build-device/pack (the run tool's `carry` takes that folder, 64 MiB at most):
#   bin/  fitgrad_tests, fitgrad (the CLI) and cuda_bench, built for sm_90 (H100 / H200),
#         stripped;
#   lib/  the shared libraries they need that a CUDA image lacks (fmt, OpenMP); cuBLASLt
#         and the CUDA runtime come from the GPU machine's own CUDA 13.
# OpenBLAS and oneDNN are left out (-DFITGRAD_OPENBLAS=OFF -DFITGRAD_DNNL=OFF): the pack
# checks the CUDA backend, and the two would not fit the carry. The GPU machine's image is
# newer than this one, so binaries linked against this machine's glibc and libstdc++ run
# there; device-check.sh says so plainly where they do not.
# Usage: tools/device-prepare.sh [build dir, default build-device]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build-device}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFITGRAD_WERROR=ON \
  -DFITGRAD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DFITGRAD_TESTS=ON -DFITGRAD_BENCH=ON \
  -DFITGRAD_OPENBLAS=OFF -DFITGRAD_DNNL=OFF >/dev/null
cmake --build "$build" --target fitgrad_tests fitgrad_cli cuda_bench
pack="$build/pack"
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib"
cp "$build/tests/fitgrad_tests" "$build/fitgrad" "$build/bench/cuda_bench" "$pack/bin/"
strip "$pack"/bin/*
# Every library the binaries load except the C/C++ runtime and CUDA's own.
for bin in "$pack"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libdl.so*|libpthread*|librt.so*) ;;
    libcuda.so*|libcudart*|libcublas*|libnvidia*) ;;
    *) cp -L "$lib" "$pack/lib/" ;;
  esac
done
du -sh "$pack"
echo "device-prepare: carry $pack, then run: bash tools/device-check.sh $pack"
