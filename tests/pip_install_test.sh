#!/usr/bin/env bash
# Issues 18 and 32, the Python package as a user gets it: a wheel built from
# the checkout (`pip wheel`: scikit-build-core and pybind11 from PyPI,
# pinned in pyproject.toml; only the library, the binary and the extension
# compiled, without GoogleTest or Google Benchmark), installed into a fresh
# virtual environment made from Debian's python3, then used from a
# directory outside the checkout:
#   - `gpusim` on PATH is the C++ CLI binary: `gpusim run llama7b` finds
#     the bundled config by name and gives the build's peak bytes, a named
#     device resolves, an unknown name fails (exit 1) listing the bundled
#     configs;
#   - `import gpusim`: run() by name and by relative path as the CLI, the
#     CLI's error message, advise('llama7b').to_pandas() (without pandas:
#     the ImportError that says what to install);
#   - `python -m gpusim_torch --help`, which needs no torch.
# Then, with the test venv's packages (pandas, torch) visible to the fresh
# one (a .pth file; none are downloaded), to_pandas() gives one row per grid
# point and `python -m gpusim_torch record` records a step that the
# installed `gpusim replay` reads. Without TEST_PYTHON those two steps are
# skipped, named.
# The C++ is compiled in build-pip/ (-O2 without -g: ccache serves a second
# build from any checkout path under base_dir) with the test build's
# compiler. Prints the wheel's build time.
#   tests/pip_install_test.sh BUILD/gpusim SOURCE_DIR CXX_COMPILER [TEST_PYTHON]
set -euo pipefail
BIN="$(realpath "$1")"
SRC="$(realpath "$2")"
export CXX="$3"
TEST_PY="${4:-}"
rm -rf "$SRC/build-pip"
W="$(mktemp -d "${TMPDIR:-/tmp}/gpusim_pip.XXXXXX")"
trap 'rm -rf "$W"' EXIT
/usr/bin/python3 -m venv "$W/venv"
V="$W/venv/bin"
start=$(date +%s)
"$V/pip" wheel --disable-pip-version-check --no-deps -w "$W/wheels" "$SRC" > "$W/pip.log" 2>&1 ||
  { tail -n 40 "$W/pip.log"; exit 1; }
echo "wheel built in $(( $(date +%s) - start )) s: $(cd "$W/wheels" && ls gpusim-*.whl)"
"$V/pip" install --disable-pip-version-check -q --no-deps "$W"/wheels/gpusim-*.whl
mkdir "$W/work"
cd "$W/work"  # not the source tree: the installed package and data, not python/ or configs/
export PATH="$V:$PATH"

# The command: the C++ binary itself, its configs found beside it.
[ "$(command -v gpusim)" = "$V/gpusim" ]
[ "$(head -c 4 "$V/gpusim" | od -An -c | tr -d ' ')" = '177ELF' ] || { echo "gpusim is not the binary"; exit 1; }
want="$("$BIN" run "$SRC/configs/llama7b.yaml" --format json | "$V/python" -c \
  'import json, sys; print(json.load(sys.stdin)["memory"]["peak_bytes"])')"
got="$(gpusim run llama7b --format json | "$V/python" -c \
  'import json, sys; print(json.load(sys.stdin)["memory"]["peak_bytes"])')"
echo "build/gpusim peak_bytes $want; installed 'gpusim run llama7b' $got"
[ "$want" = "$got" ]
gpusim run llama7b --set device=a100-sxm-80gb > /dev/null
rc=0; gpusim run llama8b 2> err.txt || rc=$?
[ "$rc" = 1 ] && grep -q "no bundled run config of that name; bundled: llama7b" err.txt ||
  { echo "gpusim run llama8b: exit $rc, $(cat err.txt)"; exit 1; }

# The package.
cp "$SRC/configs/llama7b.yaml" llama7b_copy.yaml
GPUSIM_WANT="$want" GPUSIM_TEST_VENV="$W/venv" "$V/python" - <<'PY'
import os
import gpusim
assert gpusim.__file__.startswith(os.environ["GPUSIM_TEST_VENV"]), gpusim.__file__
here = os.path.dirname(gpusim.__file__)
assert all(os.path.isfile(os.path.join(here, f)) for f in ("py.typed", "_gpusim.pyi", "data/configs/llama7b.yaml"))
want = int(os.environ["GPUSIM_WANT"])
assert gpusim.run("llama7b").peak_bytes == want
r = gpusim.run("llama7b_copy.yaml", batch__per_device=2)  # a relative path; device by name from gpusim/data
assert r.peak_bytes > want, r.peak_bytes
assert gpusim.configs() == ["llama7b"], gpusim.configs()
try:
    gpusim.run("llama7b", sets={"batch.per_devise": 2})
except gpusim.Error as e:
    assert "per_devise" in str(e) and e.exit_code == 1, e
else:
    raise SystemExit("no gpusim.Error")
a = gpusim.advise("llama7b")
try:
    a.to_pandas()
except ImportError as e:
    assert "pip install pandas" in str(e), e
else:
    raise SystemExit("to_pandas() without pandas did not raise")
print("installed at", os.path.dirname(gpusim.__file__), "version", gpusim.__version__, "-",
      len(a.points), "grid points")
PY
help=$("$V/python" -m gpusim_torch --help)
grep -q "record" <<<"$help"

if [ -z "$TEST_PY" ]; then
  echo "skipped: to_pandas() and gpusim_torch record with pandas and torch (no test venv given)"
  exit 0
fi
site="$("$TEST_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$site" > "$("$V/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/gpusim_test_venv.pth"
"$V/python" - <<'PY'
import gpusim
df = gpusim.advise("llama7b").to_pandas()
assert list(df.columns[:3]) == ["remat.policy", "loop.mode", "batch.per_device"], list(df.columns)
assert len(df) > 1 and df["winner"].sum() == 1 and str(df["batch.per_device"].dtype) == "int64"
print("advise('llama7b').to_pandas():", len(df), "rows")
PY
cat > step.py <<'PY'
import torch


def setup(device, batch_size=4):
    model = torch.nn.Linear(64, 64, device=device)
    return dict(model=model, batch=torch.randn(batch_size, 64, device=device),
                optimizer=torch.optim.SGD(model.parameters(), lr=0.1), loss_fn=lambda m, b: m(b).sum())
PY
"$V/python" -m gpusim_torch record step.py --out step.gpusim --batch-size 8
gpusim replay step.gpusim --format json | "$V/python" -c \
  'import json, sys; d = json.load(sys.stdin); assert d["allocator"]["peak_allocated_bytes"] > 0; print("replayed", d["source"])'
