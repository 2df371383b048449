# Shared by bench/compare_replays.sh and bench/compare_advise.sh (sourced):
# compares one run's outputs (a folder of stdout, stderr, rc and any written
# files) from the baseline binary with the candidate's, counting in the
# globals compared, ok (exit 0 in both) and differ, and prints a difference.
compared=0 ok=0 differ=0
compare_run() {  # compare_run BASE_DIR CAND_DIR LABEL
  compared=$((compared + 1))
  if diff -r -q "$1" "$2" >/dev/null; then
    [ "$(cat "$1/rc")" = 0 ] && ok=$((ok + 1))
  else
    differ=$((differ + 1))
    echo "DIFFERS: $3"
    diff -r "$1" "$2" | head -20
  fi
}
