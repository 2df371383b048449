"""examples/notebook.ipynb: valid nbformat 4.5 JSON, and its code cells run
in order, as a kernel would run them, in a directory outside the checkout
(bundled config names), each cell's last expression displayed (_repr_html_
where it has one). Needs pandas (tools/requirements-test.txt)."""
import ast
import json
import os
import re

import gpusim

SRC = os.environ.get("GPUSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
NOTEBOOK = os.path.join(SRC, "examples", "notebook.ipynb")


def load():
    with open(NOTEBOOK) as f:
        return json.load(f)


def test_notebook_is_nbformat_4():
    nb = load()
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5)
    assert nb["metadata"]["kernelspec"]["language"] == "python"
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids)
    for c in nb["cells"]:
        assert c["cell_type"] in ("markdown", "code")
        assert isinstance(c["source"], list) and all(isinstance(s, str) for s in c["source"])
        if c["cell_type"] == "code":
            assert c["outputs"] == [] and c["execution_count"] is None  # stored without outputs: small
    assert os.path.getsize(NOTEBOOK) < 20000


def run_cell(source, ns):
    """Runs a cell; returns what its last expression displays."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), ns)
    if last is None:
        return None
    value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
    if hasattr(value, "_repr_html_"):
        value._repr_html_()
    return value


def test_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns = {}
    shown = [run_cell("".join(c["source"]), ns) for c in load()["cells"] if c["cell_type"] == "code"]
    r, a, df = ns["r"], ns["a"], ns["df"]
    assert isinstance(shown[0], gpusim.RunResult) and "<svg" in shown[0]._repr_html_()
    assert r.peak_bytes == gpusim.run(os.path.join(SRC, "configs", "llama7b.yaml")).peak_bytes
    assert len(df) == 6 and df["winner"].sum() == 1
    assert shown[3] == a.winner and a.winner.fits
    assert list(shown[2].columns) == ["batch.per_device", "remat.policy", "peak_bytes", "step_time_s",
                                      "tokens_per_s_per_device", "fits", "winner"]
    fsdp = shown[4]
    assert fsdp["parallelism.fsdp"].tolist() == [2, 4, 8]
    assert fsdp["peak_bytes"].is_monotonic_decreasing
