"""The typed API (issue 32): every function against the CLI's --format json,
the result types and their to_pandas() columns, dict configs, bundled
config names, errors, and calls from several threads.

Run by ctest (python.pytest) with PYTHONPATH=build/python:python and
GPUSIM_BINARY / GPUSIM_SOURCE_DIR set; needs pandas and PyYAML
(tools/requirements-test.txt), and torch for record().
"""
import json
import os
import subprocess
import sys
import threading

import pytest
import yaml

import gpusim

SRC = os.environ.get("GPUSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.abspath(os.environ.get("GPUSIM_BINARY", os.path.join(SRC, "build", "gpusim")))
LLAMA = os.path.join(SRC, "configs", "llama7b.yaml")
# llama7b.yaml writes XLA scan settings an eager step refuses (Note
# [Framework semantics], sim/lower/semantics.h): under pytorch, their eager values.
EAGER = {"model__param_scan_axis": 0, "loop__mode": "unrolled"}
EAGER_SETS = ["--set", "model.param_scan_axis=0", "--set", "loop.mode=unrolled"]
SCAN = os.path.join(SRC, "examples", "scan_carry.yaml")
NATIVE = os.path.join(SRC, "tests", "golden", "llama7b.trace.gpusim")
KINETO = os.path.join(SRC, "traces", "recorded", "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz")


def cli(*args, cwd=None):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def cli_json(*args, cwd=None):
    rc, out, err = cli(*args, "--format", "json", cwd=cwd)
    assert rc == 0, err
    return json.loads(out)


def llama_dict():
    with open(LLAMA) as f:
        return yaml.safe_load(f)


# --- run, bundled names, dict configs ---------------------------------------

def test_run_by_bundled_name_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here: the name is the rule's
    r = gpusim.run("llama7b")
    assert isinstance(r, gpusim.RunResult)
    assert r.config_file == os.path.realpath(LLAMA) or os.path.samefile(r.config_file, LLAMA)
    doc = cli_json("run", "llama7b", cwd=tmp_path)
    assert r.to_dict() == doc
    assert r.peak_bytes == doc["memory"]["peak_bytes"] == gpusim.run(LLAMA).peak_bytes
    assert gpusim.configs() == sorted(f[:-5] for f in os.listdir(os.path.join(SRC, "configs")) if f.endswith(".yaml"))


def test_run_result_fields_are_the_json():
    r = gpusim.run(LLAMA, batch__per_device=2, allocator="bfc", framework="pytorch", **EAGER)
    d = r.to_dict()
    assert (r.peak_bytes, r.capacity_bytes, r.fits) == (d["memory"]["peak_bytes"], d["memory"]["capacity_bytes"],
                                                       d["memory"]["fits"])
    assert (r.step_time_s, r.tokens_per_s_per_device) == (d["time"]["step_time_s"],
                                                         d["time"]["tokens_per_s_per_device"])
    assert (r.device, r.framework, r.allocator) == ("h100-sxm-80gb", "pytorch", "bfc")
    assert r.breakdown == d["breakdown"] and sum(r.breakdown.values()) > 0
    assert r.to_json() == json.dumps(d, indent=2)
    d["memory"]["peak_bytes"] = -1  # a copy: the result is unchanged
    assert r.peak_bytes == r["memory"]["peak_bytes"] > 0
    assert "<svg" in r.timeline_svg


def test_unknown_name_lists_the_bundled_configs(tmp_path):
    with pytest.raises(gpusim.Error) as e:
        gpusim.run("llama8b")
    assert e.value.exit_code == 1
    assert "llama8b: no such file, and no bundled run config of that name; bundled: llama7b" in str(e.value)
    rc, _, err = cli("run", "llama8b", cwd=tmp_path)
    assert rc == 1 and err.strip() == "gpusim: error: " + str(e.value)
    # A path that does not exist is not a name: the file's own error.
    with pytest.raises(gpusim.Error, match="cannot open"):
        gpusim.run(str(tmp_path / "llama8b.yaml"))


def test_a_dict_config_is_the_yaml_file():
    d = llama_dict()
    r = gpusim.run(d)
    assert r.config_file == "<dict>"
    ref = gpusim.run(LLAMA).to_dict()
    got = r.to_dict()
    ref["config"]["file"] = got["config"]["file"] = ""
    assert got == ref
    d["batch"]["per_device"] = 2
    assert gpusim.run(d).peak_bytes == gpusim.run(LLAMA, batch__per_device=2).peak_bytes
    # Every command takes one.
    assert gpusim.validate(d).to_dict() == dict(cli_json("validate", LLAMA), file="<dict>")
    assert gpusim.explain(d, top=3).buffers[0] == gpusim.explain(LLAMA, top=3, batch__per_device=2).buffers[0]
    assert gpusim.diff(d, remat__policy="full").peak_delta_bytes == \
        gpusim.diff(LLAMA, {"remat.policy": "full"}, base_sets={"batch.per_device": 2}).peak_delta_bytes
    assert [p.peak_bytes for p in gpusim.advise(d, vary={"remat.policy": ["full"]}).points] == \
        [gpusim.run(d, remat__policy="full").peak_bytes]


def test_dict_config_errors_name_the_key_path(tmp_path):
    d = llama_dict()
    d["batch"]["per_devise"] = 2
    with pytest.raises(gpusim.Error) as e:
        gpusim.run(d)
    msg = str(e.value)
    assert msg.startswith("<dict>:") and "batch: unknown key 'per_devise' (did you mean 'per_device'?)" in msg
    # The same as the CLI says for the YAML file, but for the name.
    f = tmp_path / "c.yaml"
    f.write_text(gpusim.to_yaml(d))
    rc, _, err = cli("run", str(f))
    assert rc == 1 and err.strip() == "gpusim: error: " + msg.replace("<dict>", str(f))
    d = llama_dict()
    d["model"] = {"from": "llama2-7b", "n_layers": "many"}
    with pytest.raises(gpusim.Error, match=r"model.n_layers: expected an integer"):
        gpusim.run(d)
    with pytest.raises(TypeError, match=r"config batch.per_device: cannot write a set"):
        gpusim.run({"batch": {"per_device": {1, 2}}})
    with pytest.raises(TypeError, match=r"config key 3 in batch: keys must be strings"):
        gpusim.run({"batch": {3: 1}})
    with pytest.raises(TypeError, match="config must be a path"):
        gpusim.run(42)


def test_to_yaml_round_trips():
    d = {"a": {"b": [1, 2.5, True, None, "x: y", 'q"uote'], "c": {}}, "d e": -3, "f": "true", "g": 1e-07}
    assert yaml.safe_load(gpusim.to_yaml(d)) == d


def test_device_keyword_is_a_set_for_configs():
    r = gpusim.run("llama7b", device="a100-sxm-80gb")
    assert r.device == "a100-sxm-80gb"
    assert r.to_dict() == cli_json("run", LLAMA, "--set", "device=a100-sxm-80gb")


def test_run_of_a_recorded_step_is_its_replay():
    r = gpusim.run(NATIVE)
    assert isinstance(r, gpusim.ReplayResult)
    assert r == gpusim.replay(NATIVE)
    assert r.step_time_s == r["step"]["step_time_s"] > 0


# --- explain, diff, compare, advise, replay, viz, validate, devices ----------

def test_explain_config_and_trace():
    e = gpusim.explain("llama7b", top=3)
    assert isinstance(e, gpusim.ExplainResult)
    assert e.to_dict() == cli_json("explain", LLAMA, "--top", "3")
    assert len(e.buffers) == 3 and e.peak_bytes == gpusim.run("llama7b").peak_bytes
    df = e.to_pandas()
    assert list(df.columns) == ["name", "bytes", "role", "origin", "from", "to"]
    assert df["bytes"].tolist() == sorted(df["bytes"].tolist(), reverse=True)
    t = gpusim.explain(NATIVE, top=2)
    assert t.to_dict() == cli_json("explain", NATIVE, "--top", "2")
    assert t.peak_bytes == t["peak_live_bytes"] and len(t.buffers) == 2


def test_diff_is_the_cli_json():
    d = gpusim.diff("llama7b", {"batch.per_device": 2}, base_sets={"remat.policy": "full"})
    assert isinstance(d, gpusim.DiffResult)
    assert d.to_dict() == cli_json("diff", LLAMA, "--base-set", "remat.policy=full", "--set", "batch.per_device=2")
    a = gpusim.run(LLAMA, remat__policy="full")
    b = gpusim.run(LLAMA, remat__policy="full", batch__per_device=2)
    assert d.peak_delta_bytes == b.peak_bytes - a.peak_bytes
    assert (d.step_time_a_s, d.step_time_b_s) == (a.step_time_s, b.step_time_s)
    with pytest.raises(gpusim.Error, match="--set is required"):
        gpusim.diff("llama7b")


def test_compare_config_rows_are_typed():
    c = gpusim.compare("llama7b", vary={"batch.per_device": [1, 2]})
    assert c.kind == "config" and c.axis == "batch.per_device" and len(c) == 2
    assert c.to_dict() == cli_json("compare", LLAMA, "--vary", "batch.per_device=1,2")
    df = c.to_pandas()
    assert list(df.columns[:3]) == ["batch.per_device", "ok", "peak_bytes"]
    assert df["batch.per_device"].tolist() == [1, 2] and str(df["batch.per_device"].dtype) == "int64"
    assert df["peak_bytes"].tolist() == [gpusim.run(LLAMA, batch__per_device=n).peak_bytes for n in (1, 2)]
    assert gpusim.compare(LLAMA, "remat.policy=full,minimal").to_records()[1]["remat.policy"] == "minimal"
    with pytest.raises(ValueError, match="vary one setting"):
        gpusim.compare(LLAMA, vary={"a": [1], "b": [2]})
    with pytest.raises(gpusim.Error, match="give --vary"):
        gpusim.compare(LLAMA)


def test_compare_trace_rows_per_allocator():
    c = gpusim.compare(KINETO, allocators=["pytorch_caching", "bfc"])
    assert c.kind == "trace" and [r["allocator"] for r in c] == ["pytorch_caching", "bfc"]
    assert c.to_dict() == cli_json("compare", KINETO, "--allocators", "pytorch_caching,bfc")
    df = c.to_pandas()
    assert df.columns[0] == "allocator" and "peak_reserved_bytes" in df.columns and "oom" in df.columns
    assert df["peak_reserved_bytes"].tolist()[0] == gpusim.replay(KINETO).peak_reserved_bytes == 8388608


def test_advise_points_and_to_pandas():
    a = gpusim.advise("llama7b", vary={"batch.per_device": [1, 2], "remat.policy": ["full", "minimal_flash"]})
    assert isinstance(a, gpusim.AdviseResult)
    assert a.to_dict() == cli_json("advise", LLAMA, "--vary", "batch.per_device=1,2", "--vary",
                                   "remat.policy=full,minimal_flash")
    assert a.axes == ["batch.per_device", "remat.policy"]
    assert a.points[3].settings == {"batch.per_device": 2, "remat.policy": "minimal_flash"}
    assert a.winner is not None and a.winner.index == a.winner_index and a.winner.fits
    assert all(p.on_front for p in a.front) and a.front
    df = a.to_pandas()
    assert list(df.columns) == ["batch.per_device", "remat.policy", "index", "ok", "peak_bytes", "step_time_s",
                                "tokens_per_s_per_device", "fits", "on_front", "winner", "error"]
    assert len(df) == 4 and df["winner"].sum() == 1 and df.loc[df["winner"], "index"].item() == a.winner_index
    assert str(df["batch.per_device"].dtype) == "int64" and df["remat.policy"].tolist()[:2] == ["full",
                                                                                               "minimal_flash"]
    # An int budget is bytes, as the same digits on the command line.
    small = gpusim.advise("llama7b", budget=10**9, vary={"batch.per_device": [1]})
    assert small.budget_bytes == 10**9 and small.winner is None and small.winner_index is None
    assert small == cli_json("advise", LLAMA, "--budget", "1000000000", "--vary", "batch.per_device=1")
    with pytest.raises(gpusim.Error, match="--budget"):
        gpusim.advise("llama7b", budget="lots")


def test_replay_result_fields():
    r = gpusim.replay(KINETO, allocator="bfc")
    assert r.to_dict() == cli_json("replay", KINETO, "--allocator", "bfc")
    assert (r.allocator, r.format, r.source) == ("bfc", "kineto", KINETO)
    assert r.peak_reserved_bytes == r["allocator"]["peak_reserved_bytes"] and r.step_time_s is None


def test_viz_writes_the_report(tmp_path):
    # A snapshot needs an allocator that places blocks.
    v = gpusim.viz("llama7b", tmp_path / "out", snapshot=tmp_path / "s.pickle", framework="pytorch",
                   allocator="pytorch_caching", **EAGER)
    assert isinstance(v, gpusim.VizResult)
    assert v.out == str(tmp_path / "out") and v.snapshot == str(tmp_path / "s.pickle")
    assert os.path.isfile(v.report) and os.path.isfile(v.snapshot) and all(os.path.isfile(f) for f in v.files)
    ref = cli_json("viz", LLAMA, "--out", str(tmp_path / "cli"), "--allocator", "pytorch_caching",
                   "--set", "framework=pytorch", *EAGER_SETS)
    assert [os.path.basename(f) for f in v.files] == [os.path.basename(f) for f in ref["files"]]
    with open(v.report) as a, open(os.path.join(tmp_path, "cli", "report.html")) as b:
        assert a.read() == b.read()
    t = gpusim.viz(llama_dict(), tmp_path / "dict")  # a dict config draws too
    assert os.path.isfile(t.report)


def test_validate_and_errors():
    v = gpusim.validate("llama7b")
    assert (v.kind, v["model"]) == ("run_config", "llama2-7b")
    assert gpusim.validate(KINETO).kind == "kineto"
    with pytest.raises(gpusim.Error) as e:
        gpusim.validate({"device": "h100-sxm-81gb", "model": "llama2-7b"})
    assert "device: unknown device 'h100-sxm-81gb'" in str(e.value) and e.value.exit_code == 1


def test_devices():
    d = gpusim.devices()
    assert d.to_dict() == cli_json("devices")
    assert d.names == [x["name"] for x in d["devices"]] and "h100-sxm-80gb" in d.names
    h = d.by_name("h100-sxm-80gb")
    assert isinstance(h, gpusim.Device) and h.usable_bytes == h.cuda_total_bytes - h.context_reserve_bytes
    assert h.usable_bytes == gpusim.run("llama7b").capacity_bytes
    with pytest.raises(KeyError, match="no device 'h100'"):
        d.by_name("h100")
    df = d.to_pandas()
    assert len(df) == len(d.names) and df.columns[0] == "name" and "usable_bytes" in df.columns


def test_to_pandas_without_pandas_says_what_to_install(monkeypatch):
    a = gpusim.advise(SCAN, vary={"loop.mode": ["rolled"]}, loop__trip_count=2)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install pandas, or gpusim\[pandas\]"):
        a.to_pandas()
    assert a.to_records()[0]["loop.mode"] == "rolled"


def test_calls_from_threads_do_not_mix():
    # The CLI's output is captured per thread and dict configs are
    # registered per thread: concurrent calls get their own results.
    want = {n: gpusim.run(LLAMA, batch__per_device=n).peak_bytes for n in (1, 2, 3, 4)}
    got, errors = {}, []

    def work(n):
        try:
            d = llama_dict()
            d["batch"]["per_device"] = n
            for _ in range(3):
                got.setdefault(n, set()).add(gpusim.run(d).peak_bytes)
                got[n].add(gpusim.explain(d, top=1).peak_bytes)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in want]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert got == {n: {p} for n, p in want.items()}


# --- record --------------------------------------------------------------------

STEP = '''
import torch


def setup(device, batch_size=4, width=32):
    model = torch.nn.Sequential(torch.nn.Linear(width, width, device=device), torch.nn.ReLU(),
                                torch.nn.Linear(width, 1, device=device))
    batch = torch.randn(batch_size, width, device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return dict(model=model, batch=batch, optimizer=opt, loss_fn=lambda m, b: m(b).sum())
'''


def test_record_a_step_file_as_the_collector_does(tmp_path):
    pytest.importorskip("torch", reason="record needs torch (the test venv has it)")
    step = tmp_path / "step.py"
    step.write_text(STEP)
    r = gpusim.record(step, tmp_path / "a.gpusim", batch_size=8, setup_args={"width": 64}, mode="meta")
    assert isinstance(r, gpusim.RecordResult) and r.events > 0 and 0 < r.allocations <= r.events
    assert r.name == "step" and r.to_dict()["out"] == str(tmp_path / "a.gpusim")
    p = subprocess.run([sys.executable, "-m", "gpusim_torch", "record", str(step), "--out", str(tmp_path / "b.gpusim"),
                        "--batch-size", "8", "--arg", "width=64", "--mode", "meta"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "a.gpusim").read_bytes() == (tmp_path / "b.gpusim").read_bytes()
    rep = r.replay(device="a100-sxm-80gb")
    assert rep == gpusim.replay(str(tmp_path / "a.gpusim"), device="a100-sxm-80gb")
    assert rep.step_time_s > 0
    # Wider layers hold more bytes.
    r2 = gpusim.record(step, tmp_path / "c.gpusim", batch_size=8, setup_args={"width": 256}, mode="meta")
    assert r2.replay().peak_allocated_bytes > rep.peak_allocated_bytes


def test_record_a_setup_callable_and_its_errors(tmp_path):
    pytest.importorskip("torch", reason="record needs torch (the test venv has it)")
    ns = {}
    exec(compile(STEP, "step_fn.py", "exec"), ns)
    r = gpusim.record(ns["setup"], tmp_path / "f.gpusim", batch_size=2, mode="meta")
    assert r.name == "setup" and r.replay().peak_allocated_bytes > 0
    with pytest.raises(gpusim.Error, match=r"takes no parameter depth \(setup_args\)"):
        gpusim.record(ns["setup"], tmp_path / "g.gpusim", setup_args={"depth": 2})
    with pytest.raises(gpusim.Error, match="no such file"):
        gpusim.record(tmp_path / "missing.py", tmp_path / "h.gpusim")
    with pytest.raises(gpusim.Error, match="mode 'gpu'"):
        gpusim.record(ns["setup"], tmp_path / "h.gpusim", mode="gpu")


def test_record_without_torch_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(gpusim.Error, match=r"pip install torch .*gpusim\[torch\]"):
        gpusim.record(tmp_path / "step.py", tmp_path / "x.gpusim")
