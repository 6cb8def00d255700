# Which shared libraries the device pack carries (issue 57), sourced by tools/device-prepare.sh
# and tools/device-check.sh so that both read one list.
#
# Note [What the device pack leaves out]
# The run tool carries at most 64 MiB with the working tree. The CUDA build links NCCL
# (about 218 MB), cuSOLVER (141 MB) and through it cuSPARSE (163 MB) and nvJitLink (99 MB),
# and cuBLAS/cuBLASLt (about 500 MB): none of them can travel, and the lent machine has its
# own (its CUDA 13 toolkit, and the torch venv's nvidia wheels: nvidia-nccl-cu13,
# nvidia-cusolver, nvidia-cusparse, nvidia-nvjitlink, nvidia-cublas). So a library is
#   system    the C/C++ runtime, found by the loader on any Linux machine;
#   driver    libcuda and libnvidia-*: the machine's driver, never packed;
#   provided  on the list below: left out here, found there by device-check.sh (lib_dirs);
#   off       OpenBLAS and oneDNN with what they bring (gfortran, quadmath, OpenCL): the
#             pack's build turns them off (they would not fit); another build's list, that
#             of `make cuda-check`, has them, and they are not counted;
#   packed    anything else (fmt, OpenMP, Gloo, hiredis, re2, the CUDA runtime): copied into
#             the pack's lib/.
# A new dependency is packed by default, and device-prepare.sh fails when the pack passes
# 60 MiB, so a large one cannot slip through; `make device-rehearsal` runs the same
# classification over the CUDA build of `make cuda-check` (device-prepare.sh --libraries).

# lib_kind FILE: system, driver, provided, off or packed (by the file's base name).
lib_kind() {
  case "$(basename "$1")" in
    linux-vdso* | libc.so* | libm.so* | libstdc++* | libgcc_s* | ld-linux* | libdl.so* | \
      libpthread* | librt.so*) echo system ;;
    libcuda.so* | libnvidia*) echo driver ;;
    libcublas* | libnccl* | libcusolver* | libcusparse* | libnvJitLink*) echo provided ;;
    libopenblas* | libdnnl* | libgfortran* | libquadmath* | libOpenCL*) echo off ;;
    *) echo packed ;;
  esac
}

# lib_dirs: the directories of the machine's own CUDA libraries, most preferred first: the
# toolkit, the driver's folder, then every lib/ of python3's nvidia wheels (nvidia/cu13/lib,
# nvidia/nccl/lib, ...). Only those that exist are printed.
lib_dirs() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [[ -d $d ]] && echo "$d"
  done
  python3 - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia
except Exception:
    raise SystemExit(0)
for root in nvidia.__path__:
    for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
        print(lib)
PY
}

# lib_find NAME DIR...: the first DIR holding NAME (a soname), or nothing.
lib_find() {
  local name=$1 d
  shift
  for d in "$@"; do
    if [[ -e $d/$name ]]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

# lib_check PACK REHEARSE: ldd over PACK's binaries, with the LD_LIBRARY_PATH the check gives
# them; prints where each library comes from and fails (1) on one that is not found, or on one
# to pack that was found outside PACK/lib (outside a rehearsal, whose pack leaves this
# machine's Debian libraries where they are).
lib_check() {
  local pack=$1 rehearse=$2 bad=0 name path kind
  while read -r name path; do
    kind=$(lib_kind "$name")
    if [[ $path == not ]]; then
      echo "libraries: $name ($kind) is not found: neither packed nor on this machine"
      bad=1
    elif [[ $kind == packed && $rehearse == 0 && $path != "$pack"/lib/* ]]; then
      echo "libraries: $name ($kind) comes from $path, not the pack: run device-prepare.sh again"
      bad=1
    else
      echo "libraries: $name ($kind) from $path"
    fi
  done < <(for bin in "$pack"/bin/*; do
    ldd "$bin" | awk '$2 == "=>" {print $1, ($3 == "not" ? "not" : $3)}'
  done | sort -u)
  return $bad
}
