#!/usr/bin/env bash
# `cmake --install` to a prefix: the installed binary runs, reads the
# installed device configs found relative to itself (sim/base/data_dir.h),
# and reads snapshot pickles in process (sim/import/pickle.h: nothing but
# the binary and the configs is installed, and no python3 is needed).
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
test -x "$bin" && test -f "$share/configs/devices/h100-sxm-80gb.yaml"
test ! -e "$share/tools" || { echo "FAIL: $share/tools installed"; exit 1; }
"$bin" --version
# Whole outputs captured first: `cmd | grep -q` under pipefail fails when
# grep exits before the writer's last write (SIGPIPE, exit 141), which it
# did once the device table passed one 4 KiB pipe buffer.
devices=$("$bin" devices --format json)
grep -q '"h100-sxm-80gb"' <<<"$devices" || { echo "FAIL: h100-sxm-80gb not in gpusim devices"; exit 1; }
validated=$(env -i PATH=/nonexistent "$bin" validate "$src/traces/recorded/cs336_gpt_training_snapshot.pickle" --format json)
grep -q '"kind": "snapshot"' <<<"$validated" || { echo "FAIL: the pickle was not read as a snapshot"; exit 1; }
echo "ok: installed to $tmp/prefix; configs found relative to the binary; a pickle read without python3"
