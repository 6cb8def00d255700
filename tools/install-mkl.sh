#!/usr/bin/env bash
# tools/install-mkl.sh — put Intel oneMKL, the GEMM library the CPU backend prefers on Intel
# CPUs (Note [GEMM backend per machine] in tensor/cpu/gemm.cpp), in the checkout's own prefix
# .deps/mkl/, from PyPI's `mkl` wheel (pinned below; Intel Simplified Software License, see
# docs/dependencies.md). tools/install-deps.sh runs it last. A build never links oneMKL: the
# binary loads .deps/mkl/lib/libmkl_rt.so.3 at run time when it is there (Note [oneMKL at run
# time] in tensor/cpu/mkl_blas.cpp), and runs on oneDNN without it, so a failed download is a
# warning, not an error. With the library already in place it makes no network call.
# FITGRAD_NO_MKL=1 skips it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$root/.deps/mkl"
version=2026.2.0  # the pin: change it here and nowhere else
marker="$prefix/lib/libmkl_rt.so.3"

if [[ -n "${FITGRAD_NO_MKL:-}" ]]; then
  echo "install-mkl: FITGRAD_NO_MKL is set: oneMKL not installed (the GEMM runs on oneDNN)"
  exit 0
fi
if [[ -f "$marker" && -f "$prefix/VERSION" && "$(cat "$prefix/VERSION")" == "$version" ]]; then
  echo "install-mkl: oneMKL $version present in $prefix"
  exit 0
fi

echo "install-mkl: installing oneMKL $version from PyPI into $prefix"
rm -rf "$prefix.tmp"
log="$(mktemp)"
trap 'rm -rf "$log" "$prefix.tmp"' EXIT
# --prefix keeps the wheel's data files (lib/); --no-deps leaves out Intel's OpenMP and TBB
# runtimes, which fitgrad does not use (oneMKL runs on GNU OpenMP here).
if ! PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --no-deps --no-compile \
    --ignore-installed --disable-pip-version-check --prefix "$prefix.tmp" "mkl==$version" \
    >"$log" 2>&1; then
  echo "install-mkl: warning: could not install oneMKL (pip: $(tail -n 1 "$log")); the GEMM" \
    "runs on oneDNN. Run tools/install-mkl.sh again with network access to add it." >&2
  exit 0
fi
# pip puts the wheel's lib/ under the prefix, or under prefix/local/ with Debian's pip (its
# posix_local scheme): take it from wherever it landed.
rt=$(find "$prefix.tmp" -name libmkl_rt.so.3 -print -quit)
if [[ -z "$rt" ]]; then
  echo "install-mkl: warning: pip installed no libmkl_rt.so.3 under $prefix.tmp; the GEMM" \
    "runs on oneDNN." >&2
  exit 0
fi
# Only what the single dynamic library loads for BLAS on GNU OpenMP stays: the other
# threading layers, the 64-bit-integer interface, the vector math and the MPI libraries go
# (about 200 MB of the wheel's 655).
libdir=$(dirname "$rt")
(cd "$libdir" && rm -f libmkl_intel_thread.* libmkl_tbb_thread.* libmkl_intel_ilp64.* \
  libmkl_vml_* libmkl_scalapack_* libmkl_blacs_* libmkl_cdft_* && rm -rf python3*)
rm -rf "$prefix" && mkdir -p "$prefix" && mv "$libdir" "$prefix/lib"
echo "$version" >"$prefix/VERSION"
echo "install-mkl: oneMKL $version in $prefix ($(du -sh "$prefix" | cut -f1))"
