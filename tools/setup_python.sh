#!/usr/bin/env bash
# Creates (once) and updates the virtual environment that the Python-side
# tests use: $GPUSIM_VENV (default ~/.cache/gpusim/venv), made from Debian's
# /usr/bin/python3 without system site packages, with the packages listed in
# tools/requirements-test.txt. Kept outside the checkout so that clean clones
# (CI) reuse it; re-running is a no-op unless the requirements changed.
# Prints the venv's interpreter path on stdout as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${GPUSIM_VENV:-$HOME/.cache/gpusim/venv}"
REQ=tools/requirements-test.txt
mkdir -p "$(dirname "$VENV")"
exec 9>"$(dirname "$VENV")/venv.lock"
flock 9
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv "$VENV" >&2
fi
stamp="$VENV/.gpusim-requirements"
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if grep -qvE '^\s*(#|$)' "$REQ"; then
    echo "setup_python: installing $(grep -vcE '^\s*(#|$)' "$REQ") requirement(s) into $VENV" >&2
    # Lines marked `# no-deps` go in without their declared dependencies
    # (PyPI torch: see the note in requirements-test.txt).
    nodeps="$(mktemp)"; deps="$(mktemp)"
    grep -E '#\s*no-deps\s*$' "$REQ" > "$nodeps" || true
    grep -vE '#\s*no-deps\s*$' "$REQ" > "$deps" || true
    "$VENV/bin/pip" install --disable-pip-version-check -q -r "$deps" >&2
    if [ -s "$nodeps" ]; then
      "$VENV/bin/pip" install --disable-pip-version-check -q --no-deps -r "$nodeps" >&2
    fi
    rm -f "$nodeps" "$deps"
  fi
  echo "$want" > "$stamp"
fi
echo "$VENV/bin/python"
