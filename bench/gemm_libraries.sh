#!/usr/bin/env bash
# bench/gemm_libraries.sh [--rounds=N] — the GEMM libraries measured at the training step's
# shapes (issue 60; Note [GEMM backend per machine] in tensor/cpu/gemm.cpp): Debian's oneDNN
# 2.6 (libdnnl-dev, what fitgrad links), PyPI's oneDNN 2026.1 (`onednn`, C++ API 3.x) and
# PyPI's oneMKL 2026.2 (`mkl`, what tools/install-mkl.sh puts in .deps/mkl), fp32 and bf16
# operands (f32 results), on every core. bench/gemm_libraries.cpp is compiled once per oneDNN;
# the arms run as separate processes in turn, N rounds (default 3), and the table gives each
# arm's median GFLOP/s over the rounds and its ratio to oneDNN 2.6.
#
# PyPI's oneDNN 2026.1 is its SYCL build: it needs Intel's compiler and OpenCL runtimes (about
# 2 GB with them), which this script installs for the benchmark alone into
# .deps/onednn-2026.1 (git ignores .deps/); its CPU engine runs through the OpenCL CPU device
# (OCL_ICD_FILENAMES). The two OpenBLAS variables are unset for this command alone.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=3
for a in "$@"; do
  case "$a" in
    --rounds=*) rounds="${a#--rounds=}" ;;
    *) echo "gemm_libraries: unknown argument $a (usage: $0 [--rounds=N])" >&2; exit 1 ;;
  esac
done
onednn_version=2026.1.0  # the pin of the benchmark's PyPI oneDNN
onednn="$root/.deps/onednn-$onednn_version"
out="$root/build/gemm-libraries"
mkdir -p "$out"

bash "$root/tools/install-mkl.sh"
mkl_rt="$root/.deps/mkl/lib/libmkl_rt.so.3"
[[ -f "$mkl_rt" ]] || { echo "gemm_libraries: no oneMKL in .deps/mkl (tools/install-mkl.sh)" >&2; exit 1; }
if [[ ! -f "$onednn/lib/libdnnl.so.3" ]]; then
  echo "gemm_libraries: installing oneDNN $onednn_version from PyPI into $onednn (about 2 GB)"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --no-compile --ignore-installed \
    --disable-pip-version-check --prefix "$onednn" "onednn==$onednn_version" \
    "onednn-devel==$onednn_version"
fi

src="$root/bench/gemm_libraries.cpp"
g++ -O2 -std=c++20 "$src" -ldnnl -o "$out/debian"
g++ -O2 -std=c++20 "$src" -I"$onednn/include" -L"$onednn/lib" -Wl,-rpath-link,"$onednn/lib" -ldnnl \
  -o "$out/pypi"
pypi_env=(LD_LIBRARY_PATH="$onednn/lib" OCL_ICD_FILENAMES="$onednn/lib/libintelocl.so")

log="$out/results.txt"
: >"$log"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
  "$(grep -o -m1 -w 'amx_bf16' /proc/cpuinfo || grep -o -m1 -w 'avx512_bf16' /proc/cpuinfo ||
     grep -o -m1 -w 'avx512f' /proc/cpuinfo || echo avx2)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  for dtype in f32 bf16; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$out/debian" dnnl "$dtype" 3 >>"$log"
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${pypi_env[@]}" "$out/pypi" dnnl "$dtype" 3 >>"$log"
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$out/debian" mkl "$dtype" 3 "$mkl_rt" >>"$log"
  done
  echo "round $r of $rounds done"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$log" <<'PY'
import collections, statistics, sys
g = collections.defaultdict(list)
libs, shapes = {}, []
for line in open(sys.argv[1]):
    if not line.startswith("RESULT "):
        continue
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    key = "mkl" if kv["arm"] == "mkl" else ("dnnl26" if kv["lib"].startswith("oneDNN_2.") else "dnnl3")
    libs[key] = kv["lib"].replace("_", " ")
    g[(kv["dtype"], kv["shape"], key)].append(float(kv["gflops"]))
    if kv["shape"] not in shapes:
        shapes.append(kv["shape"])
arms = ["dnnl26", "dnnl3", "mkl"]
print()
print("arms: " + "; ".join(f"{a} = {libs.get(a, '?')[:60]}" for a in arms))
for dtype in ("f32", "bf16"):
    print(f"\n{dtype} operands, GFLOP/s (median of rounds) and ratio to oneDNN 2.6:\n")
    print("| shape | oneDNN 2.6 | oneDNN 2026.1 | oneMKL 2026.2 | 2026.1 / 2.6 | oneMKL / 2.6 |")
    print("|---|---|---|---|---|---|")
    tot = {a: 0.0 for a in arms}
    for s in shapes:
        med = {a: statistics.median(g[(dtype, s, a)]) if g[(dtype, s, a)] else float("nan") for a in arms}
        print(f"| {s} | {med['dnnl26']:.0f} | {med['dnnl3']:.0f} | {med['mkl']:.0f} | "
              f"{med['dnnl3'] / med['dnnl26']:.2f} | {med['mkl'] / med['dnnl26']:.2f} |")
        for a in arms:
            tot[a] += 1.0 / med[a]
    print(f"| all shapes (harmonic mean, time-weighted) | {len(shapes) / tot['dnnl26']:.0f} | "
          f"{len(shapes) / tot['dnnl3']:.0f} | {len(shapes) / tot['mkl']:.0f} | "
          f"{tot['dnnl26'] / tot['dnnl3']:.2f} | {tot['dnnl26'] / tot['mkl']:.2f} |")
PY
