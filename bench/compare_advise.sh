#!/usr/bin/env bash
# Byte-for-byte comparison of `gpusim advise` (and `gpusim run`, which
# shares the step) between a baseline binary and a candidate, on the run
# configs in the checkout (configs/, examples/): each config's default grid
# in text and JSON, then llama7b's larger grids (the 1,000 points of
# bench/advise_benchmark.cc's BM_AdviseLlama7bGrid1000, with and without
# the device axis), a shard, the pytorch_caching allocator options, a
# budget; and `gpusim run` of every config in text and JSON. stdout, stderr
# and the exit status must match.
#
#   bench/compare_advise.sh BASELINE_GPUSIM CANDIDATE_GPUSIM
set -u
base=${1:?baseline gpusim binary}
cand=${2:?candidate gpusim binary}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/compare_advise.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$root"

grid1000="--vary remat.policy=none,minimal,save_dot_except_mlpwi,save_dot_except_mlp,save_qkv_proj,save_out_proj,full,dots_saveable,nothing_saveable,everything_saveable --vary loop.mode=rolled,unrolled --vary batch.per_device=1,2,4,8,16 --vary model.param_scan_axis=0,1"
devices="--vary device=h100-sxm-80gb,h100-pcie-80gb,h200-sxm-141gb,a100-sxm-80gb,a100-sxm-40gb"
seqs="--vary batch.seq_len=512,1024,2048,4096,8192"
runs=()
for c in configs/llama7b.yaml examples/*.yaml examples/maxtext/*.yaml examples/megatron/*.yaml; do
  runs+=("advise $c" "advise $c --format json" "run $c" "run $c --format json")
done
runs+=(
  "advise configs/llama7b.yaml $grid1000 $devices --format json"
  "advise configs/llama7b.yaml $grid1000 $seqs --format json"
  "advise configs/llama7b.yaml $grid1000 $devices --budget 40GiB"
  "advise configs/llama7b.yaml --shard 1/3"
  "advise configs/llama7b.yaml --budget 80GiB --allocator pytorch_caching --set allocator.expandable_segments=true --format json"
  "advise configs/llama7b.yaml --allocator pytorch_caching --set allocator.max_split_size_mb=128 --format json"
  "advise configs/llama7b.yaml --allocator bfc --format json"
  "advise examples/megatron/llama3_8b_cp2.yaml --vary megatron.args.micro-batch-size=1,2 --format json"
)

# shellcheck source=bench/compare_common.sh
. "$root/bench/compare_common.sh"
for k in "${!runs[@]}"; do
  for tag in base cand; do
    bin=$base
    [ "$tag" = cand ] && bin=$cand
    mkdir -p "$work/$tag/$k"
    # shellcheck disable=SC2086
    timeout 900 "$bin" ${runs[$k]} >"$work/$tag/$k/stdout" 2>"$work/$tag/$k/stderr"
    echo $? >"$work/$tag/$k/rc"
    sed -i "s#$bin#GPUSIM#g" "$work/$tag/$k/stdout" "$work/$tag/$k/stderr"
  done
  compare_run "$work/base/$k" "$work/cand/$k" "gpusim ${runs[$k]}"
done
echo "commands compared: $compared (exit 0 in both: $ok); differing: $differ"
[ "$differ" = 0 ]
