#!/usr/bin/env bash
# `cmake --install` to a prefix: the installed binary runs, reads the
# installed device configs, and converts snapshot pickles with the installed
# tools/snapshot_to_json.py found relative to itself (sim/base/data_dir.h):
# the test replaces that copy with one that fails with a marker and expects
# the marker in gpusim's error.
# Usage: tests/install_test.sh CMAKE BUILD_DIR SOURCE_DIR
set -euo pipefail
cmake=$1
build=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >/dev/null
bin=$tmp/prefix/bin/gpusim
share=$tmp/prefix/share/gpusim
test -x "$bin" && test -f "$share/tools/snapshot_to_json.py" && test -f "$share/configs/devices/h100-sxm-80gb.yaml"
"$bin" --version
"$bin" devices --format json | grep -q '"h100-sxm-80gb"'
# The installed converter works ...
"$bin" validate "$src/traces/recorded/cs336_gpt_training_snapshot.pickle" --format json | grep -q '"kind": "snapshot"'
# ... and is the one used.
printf 'import sys\nsys.stderr.write("installed converter ran\\n")\nsys.exit(1)\n' >"$share/tools/snapshot_to_json.py"
if out=$("$bin" validate "$src/traces/recorded/cs336_gpt_training_snapshot.pickle" 2>&1); then
  echo "FAIL: the stub converter was not used: $out"; exit 1
fi
echo "$out" | grep -q "installed converter ran" || { echo "FAIL: $out"; exit 1; }
echo "ok: installed to $tmp/prefix; converter found relative to the binary"
