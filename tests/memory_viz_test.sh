#!/usr/bin/env bash
# `--snapshot FILE.pickle` opened by PyTorch's own torch.cuda._memory_viz
# (Debian's python3-torch through /usr/bin/python3; tests/python/
# memory_viz_check.py), on a predicted llama7b eager step (`gpusim run`) and
# a replayed recorded snapshot (`gpusim replay`), with their totals checked
# against gpusim's JSON report; then each written snapshot read back by
# gpusim: replaying the predicted one gives the run's peaks, and the replayed
# one puts every allocation at its address (--check-addresses).
# Exit 77 (ctest: skipped) without torch unless GPUSIM_REQUIRE_TORCH=1
# (`make test` sets it; tools/setup.sh --test installs python3-torch).
#
# Usage: tests/memory_viz_test.sh BUILD/gpusim SOURCE_DIR
set -euo pipefail
gpusim=$1
src=$2
py=/usr/bin/python3
if ! "$py" -c 'import torch.cuda._memory_viz' 2>/dev/null; then
  if [ "${GPUSIM_REQUIRE_TORCH:-0}" = 1 ]; then
    echo "FAIL: $py cannot import torch.cuda._memory_viz (install python3-torch: tools/setup.sh --test)"; exit 1
  fi
  echo "SKIP: no torch for $py"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$gpusim" run "$src/configs/llama7b.yaml" --set framework=pytorch --set model.param_scan_axis=0 --set loop.mode=unrolled --set allocator.impl=pytorch_caching \
    --snapshot "$tmp/eager.pickle" --format json >"$tmp/eager.json"
"$py" "$src/tests/python/memory_viz_check.py" "$tmp/eager.pickle" "$tmp/eager.json" run
"$gpusim" replay "$src/traces/recorded/cs336_gpt_training_snapshot.pickle" --snapshot "$tmp/replayed.pickle" \
    --format json >"$tmp/replayed.json"
"$py" "$src/tests/python/memory_viz_check.py" "$tmp/replayed.pickle" "$tmp/replayed.json" replay

# Read back by gpusim.
"$gpusim" replay "$tmp/eager.pickle" --format json >"$tmp/back.json"
"$py" - "$tmp/eager.json" "$tmp/back.json" <<'PY'
import json, sys
run, back = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("peak_allocated_bytes", "peak_reserved_bytes"):
    assert run["allocator"][k] == back["allocator"][k], (k, run["allocator"][k], back["allocator"][k])
print("ok: the predicted snapshot replays to the run's peaks:",
      run["allocator"]["peak_allocated_bytes"], run["allocator"]["peak_reserved_bytes"])
PY
out=$("$gpusim" replay "$tmp/replayed.pickle" --check-addresses)
echo "$out" | grep -E '^addresses: ([0-9]+) of \1 allocations' || { echo "FAIL: $out"; exit 1; }
