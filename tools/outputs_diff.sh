#!/usr/bin/env bash
# Compares two gpusim binaries on every command that writes a step's
# outputs, byte for byte: stdout, stderr, the exit status and every file
# written (--out DIR, --snapshot FILE). Inputs: the run configs under
# configs/ and examples/, the HLO modules (traces/hlo, validation/*/hlo,
# tests/fuzz/hlo, tests/hostile), the native traces (tests/golden,
# tests/data) and every recorded trace under traces/recorded and
# validation/ (Kineto, snapshots, memory timelines). Commands: run (--out,
# and under framework=pytorch with --snapshot), explain (and --time), viz
# (--out --snapshot, and through bfc), validate, diff (configs) and replay
# (--snapshot, text and json), run TRACE (traces). Each binary runs in a
# directory of its own, so the paths it prints are the same.
#   tools/outputs_diff.sh OLD/gpusim NEW/gpusim [JOBS]
# Prints one line per difference, then the counts; exits 1 on any.
set -u
old=$(realpath "$1") new=$(realpath "$2") jobs=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
# WORK=DIR keeps the outputs there; SIDES=old (or new) runs one binary only,
# so that the old side can run while the new one builds.
if [[ -n ${WORK:-} ]]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
sides=${SIDES:-old new}
cd "$root" || exit 2
configs=() traces=()
for f in configs/*.yaml configs/models/*.yaml examples/*.yaml examples/*/*.yaml traces/hlo/*.hlo* \
         validation/*/hlo/*.hlo* tests/fuzz/hlo/*.hlo tests/hostile/*.hlo; do
  [[ -f $f ]] && configs+=("$f")
done
for f in traces/recorded/* validation/*/kineto/*.gz validation/*/snapshots/* tests/golden/*.gpusim \
         tests/data/explain_time/*.gpusim; do
  [[ -f $f ]] && traces+=("$f")
done
# One command a line: NAME<TAB>ARGS; outputs go under out/NAME. The
# commands that write PNGs (--out: rasterising them takes most of their
# time, minutes for llama7b on a loaded machine) run on the inputs below
# unless ALL=1; --snapshot and --timeline (no PNG) on every input.
heavy() {
  [[ ${ALL:-0} == 1 ]] && [[ $1 != tests/hostile/* ]] && return 0
  case $1 in
    examples/scan_carry.yaml | tests/golden/*.gpusim | tests/data/explain_time/*.gpusim | \
      traces/recorded/cs336_gpt_training_snapshot.pickle | traces/recorded/hta_memory_timeline_raw.json.gz | \
      traces/recorded/tracelens_h100_bert-small_inference.pt.trace.json.gz | validation/*/kineto/gpt2_test.* | \
      validation/*/snapshots/gpt2_test.*) return 0 ;;
  esac
  return 1
}
cmds=$work/cmds
: >"$cmds"
n=0
for c in "${configs[@]}"; do
  n=$((n + 1))
  k="c$n"
  printf '%s\n' \
    "$k.run	run $root/$c --format json --timeline out/$k.run.json" \
    "$k.runpt	run $root/$c --set framework=pytorch --snapshot out/$k.runpt.pickle --timeline out/$k.runpt.json" \
    "$k.explain	explain $root/$c" \
    "$k.time	explain $root/$c --time --format json" \
    "$k.validate	validate $root/$c" \
    "$k.diff	diff $root/$c --set remat.policy=full --format json" >>"$cmds"
  if heavy "$c"; then
    printf '%s\n' \
      "$k.viz	run $root/$c --out out/$k.out --snapshot out/$k.out.pickle" \
      "$k.vizpt	viz $root/$c --set framework=pytorch --allocator bfc --out out/$k.vizpt --snapshot out/$k.vizpt.pickle" \
      >>"$cmds"
  fi
done
for t in "${traces[@]}"; do
  n=$((n + 1))
  k="t$n"
  printf '%s\n' \
    "$k.replay	replay $root/$t --format json --snapshot out/$k.replay.pickle" \
    "$k.replaytext	replay $root/$t" \
    "$k.explain	explain $root/$t" \
    "$k.time	explain $root/$t --time" \
    "$k.validate	validate $root/$t" \
    "$k.run	run $root/$t --format json" >>"$cmds"
  if heavy "$t"; then
    printf '%s\n' \
      "$k.viz	viz $root/$t --out out/$k.viz --snapshot out/$k.viz.pickle" \
      "$k.vizbfc	viz $root/$t --allocator bfc --out out/$k.vizbfc --snapshot out/$k.vizbfc.pickle" >>"$cmds"
  fi
done
for side in $sides; do
  rm -rf "${work:?}/$side"
  mkdir -p "$work/$side/out" "$work/$side/log"
done
run_one() {  # SIDE BINARY NAME ARGS...
  local side=$1 bin=$2 name=$3
  shift 3
  cd "$work/$side" || exit 2
  "$bin" "$@" >"log/$name.out" 2>"log/$name.err"
  echo "rc $?" >>"log/$name.err"
}
export -f run_one
export work
while IFS=$'\t' read -r name args; do
  for side in $sides; do
    bin=$old
    [[ $side == new ]] && bin=$new
    # shellcheck disable=SC2086
    printf '%s\0' "run_one $side $bin $name $args"
  done
done <"$cmds" | xargs -0 -P "$jobs" -I{} bash -c '{}'
[[ -d $work/old && -d $work/new ]] || { echo "ran $(wc -l <"$cmds") commands ($sides) into $work"; exit 0; }
files=$(cd "$work/old" && find out log -type f | wc -l)
differ=0
if ! diff -rq "$work/old" "$work/new" >"$work/diff.txt"; then
  differ=$(wc -l <"$work/diff.txt")
  cat "$work/diff.txt"
fi
echo "$(wc -l <"$cmds") commands on ${#configs[@]} configs and modules and ${#traces[@]} traces; $files files compared; $differ differ"
[[ $differ -eq 0 ]]
