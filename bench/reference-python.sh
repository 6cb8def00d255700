# shellcheck shell=bash
# bench/reference-python.sh — sourced by the comparison drivers (issue 60). Sets ref_python to
# the reference environment's interpreter, $REFERENCE_ENV/bin/python, where REFERENCE_ENV
# defaults to .reference-env/ at the root of this checkout, or stops with how to make the
# environment (bench/reference-env.sh, which pins the releases). Needs $root, the checkout.
# Defines stamp_lines, which prefixes each line of its input with the wall clock as it
# arrives (Note [fitgrad's steady rate from stamped lines] in bench/arm_summary.py).

REFERENCE_ENV="${REFERENCE_ENV:-$root/.reference-env}"
ref_python="$REFERENCE_ENV/bin/python"
if [[ ! -x $ref_python ]]; then
  echo "${0##*/}: no reference environment at $REFERENCE_ENV (no bin/python): make it with" \
    "bench/reference-env.sh [FOLDER] and point REFERENCE_ENV at FOLDER when it is not" \
    "$root/.reference-env" >&2
  exit 1
fi

stamp_lines() {
  local line
  while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done
}
