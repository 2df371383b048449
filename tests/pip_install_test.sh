#!/usr/bin/env bash
# Issue 18's "Done when" for the Python package: `pip install .` into a fresh
# virtual environment (made from Debian's python3; pip fetches the build
# backend, scikit-build-core, and pybind11 from PyPI, pinned in
# pyproject.toml), then `import gpusim` outside the source tree: run() gives
# the CLI's peak bytes for configs/llama7b.yaml, and the installed package
# finds its own configs (gpusim/data). The C++ is built afresh in build-pip/
# with the test build's compiler and flags, so ccache serves it from
# build/'s objects (under pip, CMake would otherwise pick Python's
# x86_64-linux-gnu-g++, another name for the compiler, and miss the cache).
#   tests/pip_install_test.sh BUILD/gpusim SOURCE_DIR CXX_COMPILER
set -euo pipefail
BIN="$(realpath "$1")"
SRC="$(realpath "$2")"
export CXX="$3"
rm -rf "$SRC/build-pip"
W="$(mktemp -d "${TMPDIR:-/tmp}/gpusim_pip.XXXXXX")"
trap 'rm -rf "$W"' EXIT
/usr/bin/python3 -m venv "$W/venv"
"$W/venv/bin/pip" install --disable-pip-version-check -q "$SRC" > "$W/pip.log" 2>&1 || { tail -n 40 "$W/pip.log"; exit 1; }
cd "$W"  # not the source tree: the installed package, not python/
cli="$("$BIN" run "$SRC/configs/llama7b.yaml" --format json | "$W/venv/bin/python" -c \
  'import json, sys; print(json.load(sys.stdin)["memory"]["peak_bytes"])')"
py="$("$W/venv/bin/python" -c "import gpusim; print(gpusim.run('$SRC/configs/llama7b.yaml')['memory']['peak_bytes'])")"
echo "CLI peak_bytes $cli; pip-installed gpusim.run peak_bytes $py"
[ "$cli" = "$py" ]
# A relative config path and a named device resolved from the package's data.
cp "$SRC/configs/llama7b.yaml" "$W/llama7b.yaml"
GPUSIM_TEST_VENV="$W/venv" "$W/venv/bin/python" - <<'PY'
import gpusim, os
r = gpusim.run("llama7b.yaml", batch__per_device=2)
assert r["memory"]["peak_bytes"] > 0
assert gpusim.__file__.startswith(os.environ["GPUSIM_TEST_VENV"]), gpusim.__file__
try:
    gpusim.run("llama7b.yaml", sets={"batch.per_devise": 2})
except gpusim.Error as e:
    assert "per_devise" in str(e), e
else:
    raise SystemExit("no gpusim.Error")
print("installed at", os.path.dirname(gpusim.__file__), "version", gpusim.__version__)
PY
