#!/usr/bin/env bash
# One prepared run of the GPU measurements, for a machine lent for minutes:
# the model zoo and the CUDA dispatch probes (collect_zoo.py), then what
# XLA-GPU compiles for the Llama step (collect_xla_gpu.py), each under a
# time budget, packed into at most 8 files under $OUT (results.tar.gz first:
# every number and log; then the HLO modules, snapshots and Kineto traces,
# split in 15 MiB parts, as many as fit in 60 MiB).
#   OUT=/tmp/out tools/collect/device_run.sh [ZOO_BUDGET_S] [XLA_BUDGET_S]
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:?set OUT to the folder to write}"
ZOO_BUDGET="${1:-240}"
XLA_BUDGET="${2:-120}"
W="$(mktemp -d)"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
{ date -u; uname -a; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; git log -1 --format=%H 2>/dev/null; } > "$W/machine.txt" 2>&1
python3 -m pip list 2>/dev/null | grep -iE '^(torch|transformers|timm|torchvision|jax|jaxlib|jax-cuda|triton|nvidia-cudnn|nvidia-cublas) ' >> "$W/machine.txt"
timeout $((ZOO_BUDGET + 120)) python3 tools/collect/collect_zoo.py --out "$W/zoo" --probes --budget "$ZOO_BUDGET" \
  --probe-budget 40 --iters 6 > "$W/zoo.log" 2>&1
echo "collect_zoo exit $?" >> "$W/zoo.log"
grep -vE 'USDT|profiler_(start|stop)' "$W/zoo.log" | tail -60
timeout $((XLA_BUDGET + 90)) python3 tools/collect/collect_xla_gpu.py --out "$W/xla" --budget "$XLA_BUDGET" \
  > "$W/xla.log" 2>&1
echo "collect_xla_gpu exit $?" >> "$W/xla.log"
tail -15 "$W/xla.log"
mkdir -p "$W/res"
cp "$W/machine.txt" "$W/zoo.log" "$W/xla.log" "$W/res/"
cp "$W/zoo/zoo.json" "$W/zoo/probes.json" "$W/xla/xla_gpu.json" "$W/res/" 2>/dev/null
tar -C "$W" -czf "$OUT/results.tar.gz" res
left=$((60 * 1024 * 1024 - $(stat -c %s "$OUT/results.tar.gz")))
files=1
for part in xla/hlo zoo/snapshots zoo/kineto; do
  [ -d "$W/$part" ] || continue
  name="$(basename "$part")"
  tar -C "$W" -cf "$W/$name.tar" "$part"
  split -b 15M -d -a 1 "$W/$name.tar" "$W/$name.tar.part"
  for p in "$W/$name.tar.part"*; do
    s=$(stat -c %s "$p")
    if [ "$files" -lt 8 ] && [ "$s" -le "$left" ]; then
      mv "$p" "$OUT/"; left=$((left - s)); files=$((files + 1))
    else
      echo "left out: $(basename "$p") ($s bytes)"
    fi
  done
done
ls -l "$OUT"
