#!/usr/bin/env bash
# Installs (once) the Chrome-trace reader the timeline test loads
# timeline.json with: Chrome DevTools' trace engine from npm, pinned by
# tests/trace_reader/package-lock.json, into $GPUSIM_TRACE_READER (default
# ~/.cache/gpusim/trace-reader), outside the checkout so clean clones reuse
# it; re-running is a no-op unless the lock file changed. Needs node and npm
# (tools/setup.sh --test installs nodejs). Prints the directory as its last
# line.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${GPUSIM_TRACE_READER:-$HOME/.cache/gpusim/trace-reader}"
mkdir -p "$DIR"
exec 9>"$DIR.lock"
flock 9
stamp="$DIR/.gpusim-lock"
want="$(cat tests/trace_reader/package.json tests/trace_reader/package-lock.json | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup_trace_reader: npm ci into $DIR" >&2
  cp tests/trace_reader/package.json tests/trace_reader/package-lock.json "$DIR/"
  (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$want" > "$stamp"
fi
echo "$DIR"
