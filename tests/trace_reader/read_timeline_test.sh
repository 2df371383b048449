#!/usr/bin/env bash
# timeline.json read by a real Chrome-trace reader: Chrome DevTools' trace
# engine (npm, installed by tools/setup_trace_reader.sh into the directory
# $GPUSIM_TRACE_READER) on three timelines: the llama7b XLA step, an eager
# step that runs out of memory through pytorch_caching, a replayed
# Kineto trace with recorded counters, and a memory snapshot on its
# recorder's clock (read_timeline.mjs says what is checked). Exit 77 = skipped: no reader installed and not required
# (`make test` requires it).
#   tests/trace_reader/read_timeline_test.sh BUILD/gpusim SOURCE_DIR
set -euo pipefail
BIN="$1"
SRC="$2"
READER="${GPUSIM_TRACE_READER:-}"
if [ -z "$READER" ] || [ ! -d "$READER/node_modules/@paulirish/trace_engine" ] || ! command -v node >/dev/null; then
  echo "no Chrome-trace reader (tools/setup_trace_reader.sh, with node, installs it; GPUSIM_TRACE_READER names it)"
  [ -n "${GPUSIM_REQUIRE_TRACE_READER:-}" ] && exit 1
  exit 77
fi
W="$(mktemp -d "${TMPDIR:-/tmp}/gpusim_trace_reader.XXXXXX")"
trap 'rm -rf "$W"' EXIT
"$BIN" run "$SRC/configs/llama7b.yaml" --timeline "$W/llama7b.json" >/dev/null
"$BIN" run "$SRC/configs/llama7b.yaml" --set framework=pytorch --set model.param_scan_axis=0 --set loop.mode=unrolled --set batch.per_device=8 \
  --allocator pytorch_caching --timeline "$W/eager_oom.json" >/dev/null
"$BIN" viz "$SRC/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz" \
  --out "$W/kineto" >/dev/null
"$BIN" viz "$SRC/tests/data/snapshots/cpp_frames_snapshot.json" --out "$W/snapshot" >/dev/null
for f in "$W/llama7b.json" "$W/eager_oom.json" "$W/kineto/timeline.json" "$W/snapshot/timeline.json"; do
  node "$SRC/tests/trace_reader/read_timeline.mjs" "$READER" "$f"
done
