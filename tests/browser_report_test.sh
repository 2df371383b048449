#!/usr/bin/env bash
# report.html in a real browser: headless Chromium (Debian's `chromium`)
# loads three reports — a config (examples/scan_carry.yaml, both loop
# lowerings), a replayed recorded trace (a small Kineto trace) and a
# replayed memory snapshot. report.html ships no test code or text: this
# test copies each page and adds the self-test (tests/report_selftest.js)
# with its two verdict lines before </body>, then loads the copy, and passes
# when, for each,
#   - the render check wrote "render-check: ok, N charts" into the DOM: every
#     figure drew an SVG with a non-empty bounding box (or decoded its
#     image), N the figures the page has;
#   - the interaction self-test wrote
#     "interaction-check: ok, ...": hovering a memory-map block lit the same
#     buffer in the lifetimes chart and the table and filled the hover box,
#     and on the memory map and the timeline the wheel zoomed, a drag panned
#     and a double click reset the view;
#   - the browser logged no console message and no "Uncaught" error;
# and the shipped page holds none of the self-test's text.
# ctest label `browser`. Without chromium it exits 77 (ctest: skipped), unless
# GPUSIM_REQUIRE_BROWSER=1 (`make test` sets it; tools/setup.sh --test
# installs chromium), when a missing browser is a failure.
#
# Usage: tests/browser_report_test.sh BUILD/gpusim SOURCE_DIR
set -euo pipefail
gpusim=$1
src=$2
browser=${GPUSIM_CHROMIUM:-}
if [ -z "$browser" ]; then
  for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
  done
fi
if [ -z "$browser" ]; then
  if [ "${GPUSIM_REQUIRE_BROWSER:-0}" = 1 ]; then
    echo "FAIL: chromium not found (GPUSIM_REQUIRE_BROWSER=1; install it with tools/setup.sh --test)"
    exit 1
  fi
  echo "SKIP: chromium not found"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$gpusim" run "$src/examples/scan_carry.yaml" --set loop.trip_count=2 --out "$tmp/config" >/dev/null
"$gpusim" viz "$src/traces/recorded/tracelens_h100_bert-small_inference.pt.trace.json.gz" --out "$tmp/trace" >/dev/null
"$gpusim" viz "$src/traces/recorded/cs336_gpt_training_snapshot.pickle" --out "$tmp/snapshot" >/dev/null

status=0
for shipped in "$tmp/config/report.html" "$tmp/trace/report.html" "$tmp/snapshot/report.html"; do
  if grep -q -e 'render-check' -e 'interaction-check' -e 'selftest' "$shipped"; then
    echo "FAIL: $shipped: ships self-test text"; status=1; continue
  fi
  report=${shipped%.html}.selftest.html
  python3 - "$shipped" "$src/tests/report_selftest.js" "$report" <<'PY'
import sys
page, script, out = (open(sys.argv[1], encoding="utf-8").read(), open(sys.argv[2], encoding="utf-8").read(),
                     sys.argv[3])
checks = ('<p id="render-check" data-expected="%d">render-check: pending</p>\n'
          '<p id="interaction-check">interaction-check: pending</p>\n' % page.count("<figure"))
at = page.rindex("</body>")
open(out, "w", encoding="utf-8").write(page[:at] + checks + "<script>\n" + script + "</script>\n" + page[at:])
PY
  dom=$tmp/dom.html
  log=$tmp/browser.log
  rc=0
  timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
      --disable-dev-shm-usage --disable-extensions --no-first-run --user-data-dir="$tmp/profile" \
      --enable-logging=stderr --v=0 --dump-dom "file://$report" >"$dom" 2>"$log" || rc=$?
  verdict=$(grep -o 'id="render-check"[^>]*>[^<]*' "$dom" | sed 's/^[^>]*>//' | head -1 || true)
  interaction=$(grep -o 'id="interaction-check"[^>]*>[^<]*' "$dom" | sed 's/^[^>]*>//' | head -1 || true)
  console=$(grep -E ':CONSOLE|Uncaught' "$log" || true)
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $report: chromium exited $rc"; tail -5 "$log"; status=1
  elif [[ "$verdict" != "render-check: ok, "* ]]; then
    echo "FAIL: $report: ${verdict:-no render-check in the DOM}"; status=1
  elif [[ "$interaction" != "interaction-check: ok, "* ]]; then
    echo "FAIL: $report: ${interaction:-no interaction-check in the DOM}"; status=1
  elif [ -n "$console" ]; then
    echo "FAIL: $report: the browser logged:"; echo "$console"; status=1
  else
    echo "ok: ${report#"$tmp"/}: $verdict; $interaction"
  fi
done
exit $status
