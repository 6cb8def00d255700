#!/usr/bin/env bash
# The memviz page renders in a real browser (issue 14): a dry run of `fitgrad train` on meta
# writes memory.html beside memory_trace.json; headless Chromium (Debian's `chromium`) loads
# the page, and the DOM it dumps after the script ran must hold what only the script makes:
# data-rendered="1" on <body>, the timeline's layer paths, its marks and peak marker, the
# allocator state's segment rows and the peak table's rows. Then a screenshot is saved and
# must be a non-trivial PNG. `fitgrad memviz` on the same trace must write a page and an SVG.
# Exits 77 (ctest's skip) when chromium is not installed.
# Usage: memviz_chromium.sh FITGRAD_BINARY WORK_DIR
set -euo pipefail
bin=$1
work=$2
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "SKIP: chromium is not installed (tools/install-deps.sh installs it)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

"$bin" train --device meta --model gpt2-tiny --seq_len 64 --max_steps 2 --progress plain \
  --output_dir "$work/run" >"$work/train.out" 2>&1 ||
  { echo "FAIL: the dry run failed"; cat "$work/train.out"; exit 1; }
page="$work/run/memory.html"
[[ -s "$page" ]] || { echo "FAIL: train wrote no memory.html"; ls "$work/run"; exit 1; }
"$bin" memviz "$work/run/memory_trace.json" -o "$work/memviz.html" --svg "$work/memviz.svg" \
  >"$work/memviz.out" 2>&1 || { echo "FAIL: fitgrad memviz failed"; cat "$work/memviz.out"; exit 1; }
[[ -s "$work/memviz.html" && -s "$work/memviz.svg" ]] ||
  { echo "FAIL: fitgrad memviz wrote no page or no SVG"; exit 1; }
grep -q '<polygon class="layer"' "$work/memviz.svg" || { echo "FAIL: the SVG has no layers"; exit 1; }

chrome=("$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions
        --user-data-dir="$work/profile" --virtual-time-budget=5000)
"${chrome[@]}" --dump-dom "file://$page" >"$work/dom.html" 2>"$work/chromium.err" ||
  { echo "FAIL: chromium could not load the page"; tail -5 "$work/chromium.err"; exit 1; }
count() { { grep -o "$1" "$work/dom.html" || true; } | wc -l; }
rendered=$(count 'data-rendered="1"')
layers=$(count '<path class="layer"')
marks=$(count '<line class="mark"')
peak=$(count 'class="peak-marker"')
segments=$(count '<div class="segment"')
rows=$(count '<tr data-category=')
labels=$({ grep -o '<table id="peak-labels">.*</table>' "$work/dom.html" || true; } | { grep -o '<tr' || true; } | wc -l)
failed=$(count 'data-rendered="error"')
echo "DOM: rendered=$rendered layers=$layers marks=$marks peak_marker=$peak segments=$segments" \
  "category_rows=$rows label_rows=$labels"
if ((rendered != 1 || failed != 0 || layers < 2 || marks < 4 || peak != 1 || segments < 1 ||
     rows < 2 || labels < 3)); then
  echo "FAIL: the page did not render what it should"
  grep -o '<p id="error"[^<]*<' "$work/dom.html" || true
  exit 1
fi

shot="$work/memviz.png"
"${chrome[@]}" --hide-scrollbars --window-size=1400,900 --screenshot="$shot" "file://$page" \
  >/dev/null 2>>"$work/chromium.err" || { echo "FAIL: chromium took no screenshot"; exit 1; }
[[ -f "$shot" ]] || { echo "FAIL: no screenshot at $shot"; exit 1; }
bytes=$(stat -c %s "$shot")
signature=$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')
if [[ "$signature" != "89504e470d0a1a0a" ]] || ((bytes < 20000)); then
  echo "FAIL: the screenshot is not a non-trivial PNG ($bytes bytes, signature $signature)"
  exit 1
fi
echo "PASS: memviz page rendered in chromium; screenshot $shot ($bytes bytes)"
