"""The Python package against the CLI: the same dicts as --format json, the
same error messages, the GIL released while simulating, the HTML repr.

Run by ctest (python.pytest, `make test`) with PYTHONPATH=build/python and
GPUSIM_BINARY / GPUSIM_SOURCE_DIR set.
"""
import json
import os
import subprocess
import threading
import time

import pytest

import gpusim

SRC = os.environ.get("GPUSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("GPUSIM_BINARY", os.path.join(SRC, "build", "gpusim"))
LLAMA = os.path.join(SRC, "configs", "llama7b.yaml")
SCAN = os.path.join(SRC, "examples", "scan_carry.yaml")
NATIVE = os.path.join(SRC, "tests", "golden", "llama7b.trace.gpusim")
KINETO = os.path.join(SRC, "traces", "recorded", "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz")


def cli(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def test_run_is_the_cli_json():
    r = gpusim.run(LLAMA)
    rc, out, _ = cli("run", LLAMA, "--format", "json")
    assert rc == 0
    assert dict(r) == json.loads(out)
    assert r["memory"]["peak_bytes"] == json.loads(out)["memory"]["peak_bytes"] > 0


def test_sets_as_keywords_and_dict():
    # llama7b.yaml's XLA scan settings at their eager values (Note
    # [Framework semantics], sim/lower/semantics.h).
    a = gpusim.run(LLAMA, batch__per_device=2, allocator="bfc", framework="pytorch", model__param_scan_axis=0,
                   loop__mode="unrolled")
    b = gpusim.run(LLAMA, sets={"batch.per_device": 2, "allocator.impl": "bfc", "framework": "pytorch",
                                "model.param_scan_axis": 0, "loop.mode": "unrolled"})
    rc, out, _ = cli("run", LLAMA, "--set", "batch.per_device=2", "--allocator", "bfc", "--set", "framework=pytorch",
                     "--set", "model.param_scan_axis=0", "--set", "loop.mode=unrolled", "--format", "json")
    assert rc == 0
    assert dict(a) == dict(b) == json.loads(out)
    assert a["allocator"]["name"] == "bfc"


def test_errors_raise_gpusim_error_with_the_cli_message():
    with pytest.raises(gpusim.Error) as e:
        gpusim.run(LLAMA, sets={"batch.per_devise": 2})
    rc, _, err = cli("run", LLAMA, "--set", "batch.per_devise=2")
    assert rc == 1
    assert err.strip() == "gpusim: error: " + str(e.value)
    with pytest.raises(gpusim.Error):
        gpusim.run("/nonexistent.yaml")
    with pytest.raises(TypeError):
        gpusim.run(42)


def test_replay_is_the_cli_json():
    r = gpusim.replay(KINETO)
    rc, out, _ = cli("replay", KINETO, "--format", "json")
    assert rc == 0
    assert r == json.loads(out)
    assert r["allocator"]["peak_reserved_bytes"] == 8388608
    r2 = gpusim.replay(KINETO, allocator="pytorch_caching", expandable_segments=True)
    rc, out, _ = cli("replay", KINETO, "--set", "allocator.expandable_segments=true", "--format", "json")
    assert r2 == json.loads(out)
    r3 = gpusim.replay(KINETO, cold_start=True, device="a100-sxm-40gb")
    rc, out, _ = cli("replay", KINETO, "--cold-start", "--device", "a100-sxm-40gb", "--format", "json")
    assert rc == 0
    assert r3 == json.loads(out)


def test_replay_of_a_native_trace_has_its_step():
    r = gpusim.replay(NATIVE)
    rc, out, _ = cli("replay", NATIVE, "--format", "json")
    assert rc == 0
    assert r == json.loads(out)
    assert set(r) - set(gpusim.replay(KINETO)), "no native-step keys"


def test_advise_is_the_cli_json():
    a = gpusim.advise(SCAN, vary={"loop.mode": ["rolled", "unrolled"]}, loop__trip_count=2)
    rc, out, _ = cli("advise", SCAN, "--vary", "loop.mode=rolled,unrolled", "--set", "loop.trip_count=2",
                     "--format", "json")
    assert rc == 0
    assert a == json.loads(out)


def _ticks_during_one_call():
    """Ticks of a second Python thread while gpusim.run runs: (ticks inside
    the call, its start, its end)."""
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.0005)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.01)
    start = time.monotonic()
    gpusim.run(LLAMA, remat__policy="full")  # one call of ~0.1-1 s
    end = time.monotonic()
    stop.set()
    t.join()
    return [x for x in ticks if start < x < end], start, end


def test_gil_is_released_while_simulating():
    # With the GIL held for the whole call the ticker cannot run inside it
    # (no tick after the first few µs), in every attempt; released, it ticks
    # all along. The ticker is a thread the OS schedules: on a loaded
    # machine one call may see it descheduled for a while, so the property
    # must hold in one of three calls, never in none.
    seen = []
    for _ in range(3):
        during, start, end = _ticks_during_one_call()
        spread = max(during) - min(during) if during else 0.0
        if len(during) >= 5 and spread > 0.5 * (end - start):
            return
        seen.append((len(during), round(spread, 4), round(end - start, 4)))
    raise AssertionError(f"no call let the ticker run (ticks, spread s, call s): {seen}")


def test_html_repr_shows_summary_and_timeline():
    r = gpusim.run(LLAMA)
    h = r._repr_html_()
    assert "<svg" in h and "</svg>" in h
    assert h.count("<svg") == r.timeline_svg.count("<svg")
    assert f"{r['memory']['peak_bytes']:,} B" in h
    assert "JAX arena" in h
    assert r.plot() is not None
