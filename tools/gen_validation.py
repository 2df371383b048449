#!/usr/bin/env python3
"""Writes the validation pages' predicted-vs-measured tables from fresh
gpusim runs (no hand-copied figures): each table, and the sentences that
quote its figures, sits between `<!-- NAME:begin -->` and `<!-- NAME:end -->`
markers and is replaced. Measured and published values come from committed
data files (validation/measured.json with each value's source, the
calibration files under traces/calibration/, validation/h200_2026-12-04/,
validation/h200_kernels.json); every error is computed here.

    tools/gen_validation.py --gpusim build/gpusim [--check] [PART ...]

PART (default `validation`):
  validation  docs/validation.md: MaxText Llama2-7B, the calibrations, scan_carry,
              remat policies, Korthikanti 22B (gpusim run / compare / calibrate /
              diff --format json; seconds). Standard library only.
  zoo         docs/validation_torch_zoo.md: every case of validation/h200_2026-12-04/
              zoo.json recorded on the CPU (python -m gpusim_torch record, needs torch,
              transformers, timm: --python) and replayed (minutes).
  step_time   docs/validation_step_time.md: the gpu- and test-size cases recorded the
              same way, their kernel time per class against the Kineto traces, and the
              H200 GEMM reference (tools/collect/kineto_classes.py).
zoo and step_time record each case once when given together; --traces DIR keeps
the recordings there, and --reuse replays those already in DIR instead.

--check: write nothing; exit 1, with a diff, when a page's blocks differ from
a fresh run. The generator also checks the claims the pages' prose makes of
the figures (an order, a sign) and stops, naming the sentence, when a fresh
run no longer bears one out."""

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = float(1 << 30)
MINUS = "\u2212"


# ---------------------------------------------------------------- helpers

def gpusim_json(gpusim, *args):
    cmd = [gpusim] + list(args) + ["--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit("gen_validation: `%s` exited %d: %s" % (" ".join(cmd[1:]), r.returncode,
                                                                r.stderr.strip()[-2000:]))
    return json.loads(r.stdout)


def claim(ok, sentence):
    """A statement the page's prose makes of the figures: stop when a fresh run contradicts it."""
    if not ok:
        raise SystemExit("gen_validation: a fresh run no longer bears out the page's prose: %s -- "
                         "reword it (and this check) to what the tables now show" % sentence)


def para(*parts, indent=""):
    """Prose, wrapped as the pages are (100 columns)."""
    return textwrap.fill(" ".join(parts), 100, initial_indent=indent, subsequent_indent=" " * len(indent),
                         break_long_words=False, break_on_hyphens=False)


def rel(measured, predicted):
    return (predicted - measured) / measured


def pct(x, digits=2, minus=MINUS):
    """+2.86% / −1.25%; exactly 0 as "0"."""
    if x == 0:
        return "0"
    s = "%+.*f%%" % (digits, 100.0 * x)
    return s.replace("-", minus)


def signed(x, fmt, minus=MINUS):
    return (fmt % x).replace("-", minus)


def nbytes(b):
    return format(int(b), ",")


def gib(b):
    return "%.2f" % (b / GIB)


def replace_block(text, name, body, path):
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit("gen_validation: %s has no %s ... %s block" % (path, begin, end))
    return text[:i + len(begin)] + "\n" + body.rstrip("\n") + "\n" + text[j:]


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


# ---------------------------------------------------------------- docs/validation.md

MAXTEXT = "configs/llama7b.yaml"


def maxtext_blocks(gpusim):
    m = load("validation/measured.json")
    mx = m["maxtext_llama2_7b"]
    runs = {}
    for policy in ("minimal_flash", "full"):
        for axis in (0, 1):
            runs[policy, axis] = gpusim_json(gpusim, "run", MAXTEXT, "--set", "model.param_scan_axis=%d" % axis,
                                             "--set", "remat.policy=%s" % policy)
    cal = gpusim_json(gpusim, "calibrate", "traces/calibration/maxtext_llama7b.yaml")
    cases = {c["name"]: c for c in cal["cases"]}
    for axis in (0, 1):
        c = cases["param_scan_axis_%d" % axis]
        key = "param_scan_axis_%d" % axis
        if (c["measured"]["peak_bytes"] != mx["temp_size_in_bytes"][key]
                or abs(c["measured"]["step_time_s"] - mx["step_time_s"][key]) > 1e-12):
            raise SystemExit("gen_validation: traces/calibration/maxtext_llama7b.yaml's measured %s differs from "
                             "validation/measured.json's" % key)
        if runs["minimal_flash", axis]["memory"]["temp_bytes"] != c["predicted_before"]["peak_bytes"]:
            raise SystemExit("gen_validation: gpusim calibrate's predicted temp of %s is not gpusim run's" % key)
    mem = {k: r["memory"] for k, r in runs.items()}
    step = {k: r["time"]["step_time_s"] for k, r in runs.items()}

    def row(case, quantity, measured, predicted, error, source="same"):
        return "| %s | %s | %s | %s | %s | %s |" % (case, quantity, measured, predicted, error, source)

    def bytes_row(case, quantity, measured, predicted, source="same"):
        return row(case, quantity, nbytes(measured), nbytes(predicted), pct(rel(measured, predicted)), source)

    t0m, t1m = mx["temp_size_in_bytes"]["param_scan_axis_0"], mx["temp_size_in_bytes"]["param_scan_axis_1"]
    s0m, s1m = mx["step_time_s"]["param_scan_axis_0"], mx["step_time_s"]["param_scan_axis_1"]
    mf0, mf1 = mem["minimal_flash", 0], mem["minimal_flash", 1]
    for k in ("argument_bytes", "output_bytes"):
        claim(mf0[k] == mf1[k] == mem["full", 0][k] == mem["full", 1][k],
              "the argument and output rows hold for both axes and policies")
    params = runs["minimal_flash", 0]["config"]["param_count"]
    ratio_m, ratio_p = s1m / s0m, step["minimal_flash", 1] / step["minimal_flash", 0]
    after0 = cases["param_scan_axis_0"]["predicted_after"]["step_time_s"]
    after1 = cases["param_scan_axis_1"]["predicted_after"]["step_time_s"]
    lines = [
        "| case | quantity | measured | predicted | error | source |",
        "|---|---|---|---|---|---|",
        bytes_row("MaxText Llama2-7B, FSDP 2, H100 (`configs/llama7b.yaml`, remat `minimal_flash`)",
                  "argument_size_in_bytes", mx["argument_size_in_bytes"], mf0["argument_bytes"],
                  "MaxText issue (seeds/param_scan_axis.txt)"),
        bytes_row("same", "output_size_in_bytes", mx["output_size_in_bytes"], mf0["output_bytes"]),
        bytes_row("Llama2-7B", "parameters", m["llama2_7b_parameters"]["value"], params, "Llama 2 paper / HF"),
        bytes_row("same, param_scan_axis=0", "temp_size_in_bytes", t0m, mf0["temp_bytes"]),
        bytes_row("same, param_scan_axis=1", "temp_size_in_bytes", t1m, mf1["temp_bytes"]),
        bytes_row("same", "temp(axis 1) %s temp(axis 0)" % MINUS, t1m - t0m, mf1["temp_bytes"] - mf0["temp_bytes"]),
        bytes_row("same, `--set remat.policy=full`, axis 0", "temp_size_in_bytes", t0m, mem["full", 0]["temp_bytes"]),
        bytes_row("same, `--set remat.policy=full`, axis 1", "temp_size_in_bytes", t1m, mem["full", 1]["temp_bytes"]),
        row("same", "step time axis 1 / axis 0 (uncalibrated)", "%.3f (%.3f / %.3f s)" % (ratio_m, s1m, s0m),
            "%.3f (%.4f / %.4f s)" % (ratio_p, step["minimal_flash", 1], step["minimal_flash", 0]),
            pct(rel(ratio_m, ratio_p), 1)),
        row("same, calibrated on axis 0 (`gpusim calibrate traces/calibration/maxtext_llama7b.yaml`)",
            "step time axis 0 (fitted)", "%.3f s" % s0m, "%.4f s" % after0, pct(rel(s0m, after0))),
        row("same, calibrated on axis 0", "step time axis 1 (held out)", "%.3f s" % s1m, "%.4f s" % after1,
            pct(rel(s1m, after1))),
    ]
    # The prose: minimal_flash comes closer than full at both axes, and the
    # axis difference is the transposed copy.
    for axis, meas in ((0, t0m), (1, t1m)):
        claim(abs(rel(meas, mem["minimal_flash", axis]["temp_bytes"])) < abs(rel(meas, mem["full", axis]["temp_bytes"]))
              and mem["full", axis]["temp_bytes"] < meas,
              "`minimal_flash` comes closest to the measured temps at both axes, `full` falls short")
    d = gpusim_json(gpusim, "diff", MAXTEXT, "--set", "model.param_scan_axis=1", "--base-set", "model.param_scan_axis=0")
    g = d["memory"]["groups"]
    claim(g and g[0]["kind"].startswith("transposed copy") and
          g[0]["delta_bytes"] >= 0.999 * d["memory"]["temp_delta_bytes"],
          "`gpusim diff` attributes the axis difference to the transposed copy")

    params_fit = cal["parameters"]
    short = {"efficiency.matmul": "matmul", "efficiency.attention": "attention", "efficiency.memory": "memory",
             "efficiency.collective": "collective"}
    before = [-cases["param_scan_axis_%d" % a]["relative_error_before"]["step_time"] for a in (0, 1)]
    claim(all(b > 0 for b in before), "uncalibrated, the step times are below the measured ones")
    b0 = cases["param_scan_axis_0"]["predicted_after"]
    calib = [
        para("Device files hold datasheet rates and starting efficiencies; `gpusim calibrate` fits the",
             "efficiencies to measured runs (with one measured step time the fit is %s and is" % (
                 "underdetermined" if cal["calibration"]["underdetermined"] else "determined"),
             "regularised toward the device file: %s; uncalibrated, the step times are %.1f%% / %.1f%% below the" % (
                 ", ".join("%s %.2f → %.3f" % (short[k], v["initial"], v["fitted"]) for k, v in params_fit.items()),
                 100 * before[0], 100 * before[1]),
             "measured ones)."),
        para("Calibrated breakdown, axis 0: compute %.4f s (of which recompute %.4f s), communication" % (
            b0["compute_s"], b0["recompute_s"]),
            "%.4f s (exposed %.4f s)." % (b0["communication_s"], b0["exposed_communication_s"])),
    ]
    return {"maxtext-table": "\n".join(lines), "maxtext-calibration": "\n".join(calib)}


KINETO_CAL = "traces/calibration/h100_kineto_kernels.yaml"
# The other Kineto traces of traces/recorded/: how many of their kernels the
# calibration sizes (they are not fitted to).
OTHER_TRACES = [
    ("the MI300X one", "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz", ""),
    ("the PyTorch 1.9 ResNet-50 one", "kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz",
     " (convolutions and batch norms are not sized)"),
    ("the HTA torch.compile trace", "hta_df_index_resolver_v100_rank1.pt.trace.json.gz", " (no shapes recorded)"),
]
TRACE_LABELS = {"owlv2_large": "OWLv2-large inference", "bert_small": "bert-small inference"}


def kineto_blocks(gpusim):
    cal = gpusim_json(gpusim, "calibrate", KINETO_CAL)
    p = cal["parameters"]
    lines = [
        para("The fit weighs each op by its share of the kernel time. Summed kernel time, predicted vs measured",
             "(H100 80GB HBM3, bf16; fit: %s):" % ", ".join(
                 "`%s` %.2f → %.3f" % (k, v["initial"], v["fitted"]) for k, v in p.items())),
        "",
        "| trace (TraceLens, H100) | kernels (sized) | class | measured | before | after |",
        "|---|---|---|---|---|---|",
    ]
    kc = {c["name"]: c for c in cal["kernel_cases"]}
    for c in cal["kernel_cases"]:
        first = True
        for cls in ("gemm", "attention", "memory", "collective", "other", "all"):
            v = c["classes"][cls]
            if not v["sized_kernels"]:
                continue
            label = "%s (%s)" % (TRACE_LABELS.get(c["name"], c["name"]), "fit" if c["fit"] else "held out")
            lines.append("| %s | %s | %s | %.3f ms | %s | %s |" % (
                label if first else "same", "%s (%s)" % (format(c["kernels"], ","), format(
                    c["classes"]["all"]["sized_kernels"], ",")) if first else "", cls, v["measured_s"] * 1e3,
                pct(v["time_error_before"], 1), pct(v["time_error_after"], 1)))
            first = False
    own = kc["owlv2_large"]["classes"]["memory"]
    bert = kc["bert_small"]["classes"]["memory"]
    claim(bert["time_error_after"] > bert["time_error_before"] > 0,
          "after the fit bert-small's memory ops are further over than before")
    # The traces the calibration file does not name: a held-out-only file.
    tmp = tempfile.mkdtemp(prefix="gpusim_gen_validation_")
    path = os.path.join(tmp, "others.yaml")
    with open(path, "w") as f:
        f.write("name: other-recorded-kineto-traces\ncases:\n")
        for i, (_, trace, _) in enumerate(OTHER_TRACES):
            f.write("  - name: t%d\n    kineto: %s\n    device: h100-sxm-80gb\n    fit: false\n"
                    "    source: traces/recorded\n    hardware: as recorded\n    software: as recorded\n" % (
                        i, os.path.join(ROOT, "traces", "recorded", trace)))
    others = gpusim_json(gpusim, "calibrate", path)["kernel_cases"]
    os.remove(path)
    os.rmdir(tmp)
    parts = []
    for (what, _, why), c in zip(OTHER_TRACES, others):
        sized = c["classes"]["all"]["sized_kernels"]
        parts.append("%s sizes %s%s" % (what, "none" if sized == 0 else "%s of %s kernels" % (
            format(sized, ","), format(c["kernels"], ",")), why))
    notes = [para(
        "One memory efficiency cannot fit both OWLv2's 5185² softmax and short elementwise kernels: after",
        "the fit the per-op RMS error of memory ops is %.0f%% (OWLv2) and bert-small's memory ops go from" % (
            100 * own["rms_error_after"]),
        "%s to %s. Of the other shipped traces, %s." % (pct(bert["time_error_before"], 0), pct(bert["time_error_after"], 0),
                                                       ", ".join(parts[:-1]) + " and " + parts[-1]))]
    return {"kineto-calibration": "\n".join(lines), "kineto-notes": "\n".join(notes)}


SCAN = "examples/scan_carry.yaml"


def scan_blocks(gpusim):
    def total(mode, t, *extra):
        r = gpusim_json(gpusim, "run", SCAN, "--set", "loop.mode=" + mode, "--set", "loop.trip_count=%d" % t, *extra)
        return r["memory"]["output_bytes"] + r["memory"]["temp_bytes"]

    g = 4 * GIB
    lines = ["| T | unrolled | its 4 GiB buffers | rolled | its 4 GiB buffers (entry schedule, Note [Entry schedule]) |",
             "|---|---|---|---|---|"]
    for t in (1, 2, 3, 4):
        u, r = total("unrolled", t), total("rolled", t)
        claim(int(u // g) == t, "unrolled at T = %d: output + %d w2 (T 4 GiB buffers)" % (t, t - 1))
        its_u = "output" if t == 1 else "output + w2 of iteration%s %s" % (
            "" if t == 2 else "s", {2: "1", 3: "1, 2"}.get(t, "1-%d" % (t - 1)))
        if t == 1:
            claim(r == u, "rolled at T = 1 is inlined: as unrolled")
            its_r = "inlined: as unrolled"
        else:
            claim(int(r // g) == t + 2, "rolled at T = %d: output + T G stack + 1 G cotangent state" % t)
            its_r = ("output + %d G residual stack of w2 + 1 G cotangent state of w2" % t if t == 2
                     else "output + %d G stack + 1 G cotangent state" % t)
            claim(total("rolled", t, "--set", "xla.dynamic_slice_fusion=true") == r,
                  "`--set xla.dynamic_slice_fusion=true` leaves the rolled totals unchanged")
        lines.append("| %d | %.6f (%s) | %s | %.6f (%s) | %s |" % (t, u / GIB, nbytes(u), its_u, r / GIB, nbytes(r), its_r))
    return {"scan-carry": "\n".join(lines)}


REMAT = "examples/remat_llama7b.yaml"
REMAT_POLICIES = ["full", "save_qkv_proj", "save_out_proj", "save_dot_except_mlp", "save_dot_except_mlpwi",
                  "save_dot_with_context_except_mlp", "minimal", "minimal_flash", "qkv_proj_offloaded",
                  "minimal_offloaded", "custom", "none"]
# remat.names / remat.offload_names of examples/remat_llama7b.yaml.
REMAT_LABELS = {"custom": "custom (q,k saved; v,out,wi_0,wi_1 offloaded)"}


def remat_blocks(gpusim):
    vary = "remat.policy=" + ",".join(REMAT_POLICIES)
    b1 = gpusim_json(gpusim, "compare", REMAT, "--vary", vary)
    b8 = gpusim_json(gpusim, "compare", REMAT, "--vary", vary, "--set", "batch.per_device=8")
    for rows in (b1, b8):
        bad = [r["setting"] for r in rows if not r.get("ok")]
        if bad:
            raise SystemExit("gen_validation: gpusim compare %s failed for %s" % (REMAT, ", ".join(bad)))
    capacity = gpusim_json(gpusim, "run", REMAT)["memory"]["capacity_bytes"]

    def pcie(r):
        if not r["host_transfer_s"]:
            return "–"
        return "%.4f (%.3f)" % (r["host_transfer_s"], r["host_transfer_exposed_s"])

    def peak(r):
        return gib(r["peak_bytes"]) + ("" if r["fits"] else " (no fit)")

    lines = ["| policy | peak b=1 | temp b=1 | host b=1 | recompute b=1 (s) | PCIe b=1 (s) | step b=1 (s) | peak b=8 "
             "| host b=8 | recompute b=8 (s) | PCIe b=8 (s) | step b=8 (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by1, by8 = {}, {}
    for policy, r1, r8 in zip(REMAT_POLICIES, b1, b8):
        by1[policy], by8[policy] = r1, r8
        lines.append("| %s | %s | %s | %s | %.4f | %s | %.4f | %s | %s | %.4f | %s | %.4f |" % (
            REMAT_LABELS.get(policy, policy), peak(r1), gib(r1["temp_bytes"]),
            gib(r1["host_bytes"]) if r1["host_bytes"] else "0", r1["recompute_s"], pcie(r1), r1["step_time_s"],
            peak(r8), gib(r8["host_bytes"]) if r8["host_bytes"] else "0", r8["recompute_s"], pcie(r8),
            r8["step_time_s"]))
    order = ["full", "save_qkv_proj", "save_dot_except_mlp", "minimal", "none"]
    pk = [by8[p]["peak_bytes"] for p in order]
    rc = [by8[p]["recompute_s"] for p in order]
    claim(pk == sorted(pk) and len(set(pk)) == len(pk) and rc == sorted(rc, reverse=True),
          "at batch 8 the peak orders full < save_qkv_proj < save_dot_except_mlp < minimal < none, recompute "
          "the other way")
    under8 = [p for p in REMAT_POLICIES if by8[p]["peak_bytes"] <= capacity]
    claim(under8 == ["full", "qkv_proj_offloaded", "minimal_offloaded"],
          "at batch 8 only `full` and the two `*_offloaded` policies come under the device's usable memory")
    fit8 = [p for p in REMAT_POLICIES if by8[p]["fits"]]
    pk1 = [by1[p]["peak_bytes"] for p in order[:-1]]
    claim(pk1 == sorted(pk1), "at batch 1 the order holds except for `none`")
    claim(by1["none"]["peak_bytes"] < by1["minimal"]["peak_bytes"] < by1["minimal_flash"]["peak_bytes"],
          "at batch 1 `none` sits below `minimal` and `minimal_flash`")
    claim(all(by1[p]["peak_phase"] == "backward" for p in REMAT_POLICIES), "at batch 1 every peak is in the backward scan")
    claim(by1["save_dot_except_mlpwi"] == dict(by1["save_dot_except_mlp"], setting=by1["save_dot_except_mlpwi"]["setting"]),
          "`save_dot_except_mlpwi` equals `save_dot_except_mlp`")
    for p in ("qkv_proj_offloaded", "minimal_offloaded"):
        claim(by1[p]["peak_bytes"] == by1["full"]["peak_bytes"], "offloading holds the device peak at `full`'s")
        claim(by1[p]["host_transfer_exposed_s"] > 0, "the PCIe copies exceed what one iteration's compute hides")
    ax0 = {r["setting"].split("=")[1]: r for r in gpusim_json(gpusim, "compare", REMAT, "--vary",
                                                               "remat.policy=none,minimal", "--set",
                                                               "model.param_scan_axis=0")}
    claim(ax0["minimal"]["peak_bytes"] < ax0["none"]["peak_bytes"]
          and abs(rel(by1["none"]["peak_bytes"], ax0["none"]["peak_bytes"])) < 1e-4,
          "at param_scan_axis 0 `none` peaks about where it does at axis 1 and `minimal` below it")
    mo = by1["minimal_offloaded"]
    if fit8:
        fits = "%s fit%s." % (", ".join("`%s`" % p for p in fit8), "s" if len(fit8) == 1 else "")
    else:
        v = gpusim_json(gpusim, "run", REMAT, "--set", "batch.per_device=8")["verdict"]
        claim(v["kind"] == "does_not_fit" and v["need_bytes"] <= v["limit_bytes"],
              "at batch 8 `full` is under the usable memory, but its blocks do not fit BFC's bins")
        fits = ("none fits: at %s GiB, `full` and the offloaded ones are under it, but `gpusim run` finds no "
                "`XLA_PYTHON_CLIENT_MEM_FRACTION` whose BFC bins hold their blocks." % gib(by8["full"]["peak_bytes"]))
    notes = [para(
        "At batch 8 the peaks are %s GiB (full, save_qkv_proj, save_dot_except_mlp, minimal, none)." % " < ".join(
            gib(b) for b in pk),
        "Of the %s GiB usable, %s At `--set model.param_scan_axis=0`, batch 1, `none` peaks at %s GiB" % (
            gib(capacity), fits, gib(ax0["none"]["peak_bytes"])),
        "and `minimal` at %s GiB. `minimal_offloaded` at batch 1 copies %.1f GB each way over PCIe." % (
            gib(ax0["minimal"]["peak_bytes"]), mo["host_bytes"] / 1e9))]
    return {"remat-policies": "\n".join(lines), "remat-notes": "\n".join(notes)}


KORTHIKANTI = "examples/gpt22b_korthikanti.yaml"
KORTHIKANTI_ROWS = [  # (label, measured.json key, sequence parallel, policy)
    ("baseline", "baseline", False, "none"),
    ("sequence parallel", "sequence_parallel", True, "none"),
    ("full recompute", "full_recompute", False, "full"),
    ("selective recompute", "selective_recompute", False, "selective"),
    ("selective + SP", "selective_sequence_parallel", True, "selective"),
]


def korthikanti_blocks(gpusim):
    paper = load("validation/measured.json")["korthikanti_2022_22b"]["layer_ms"]
    pred = {}
    for sp in (False, True):
        for r in gpusim_json(gpusim, "compare", KORTHIKANTI, "--vary", "remat.policy=none,full,selective",
                             "--set", "parallelism.sequence_parallel=%s" % ("true" if sp else "false")):
            pred[sp, r["setting"].split("=")[1]] = (r["layer_forward_ms"], r["layer_backward_ms"])
    base_m = sum(paper["baseline"].values())
    base_p = sum(pred[False, "none"])
    lines = ["| variant | paper fwd / bwd ms | predicted fwd / bwd ms | error fwd / bwd | overhead paper / predicted |",
             "|---|---|---|---|---|"]
    over = {}
    for label, key, sp, policy in KORTHIKANTI_ROWS:
        mf, mb = paper[key]["forward"], paper[key]["backward"]
        pf, pb = pred[sp, policy]
        if key == "baseline" or key == "sequence_parallel":
            o = "–"
        else:
            om, op = (mf + mb) / base_m - 1, (pf + pb) / base_p - 1
            over[key] = (om, op)
            o = "%s / %s" % (pct(om, 0), pct(op, 1))
        lines.append("| %s | %.1f / %.1f | %.3f / %.3f | %s / %s | %s |" % (
            label, mf, mb, pf, pb, pct(rel(mf, pf), 1), pct(rel(mb, pb), 1), o))
    claim(pred[False, "full"][1] > pred[False, "selective"][1] > pred[False, "none"][1]
          and pred[False, "full"][0] == pred[False, "selective"][0] == pred[False, "none"][0],
          "full the slowest backward, selective a small overhead, forward unchanged by recompute")
    claim(sum(pred[True, "none"]) < base_p and rel(paper["sequence_parallel"]["backward"], pred[True, "none"][1]) < 0,
          "sequence parallelism is predicted faster than measured")
    om, op = over["selective_sequence_parallel"]
    claim(om > 0 > op, "selective + SP comes out below the baseline where the paper measures it above")
    return {"korthikanti": "\n".join(lines)}


def flash_selective_blocks(gpusim):
    def run(policy):
        return gpusim_json(gpusim, "run", KORTHIKANTI, "--set", "model.attention=flash", "--set", "remat.policy=" + policy)
    none, sel = run("none"), run("selective")
    layers = len(sel["layers"])
    rec_layer = sel["time"]["recompute_s"] / layers
    cp = gpusim_json(gpusim, "compare", "examples/megatron/llama3_8b_cp2.yaml", "--vary",
                     "megatron.args.recompute-activations=false,true")
    claim(sel["memory"]["peak_bytes"] < none["memory"]["peak_bytes"] and sel["time"]["step_time_s"] > none["time"][
        "step_time_s"] and cp[1]["step_time_s"] > cp[0]["step_time_s"],
          "selective under flash saves the statistics and reruns the kernel")
    saved = none["memory"]["peak_bytes"] - sel["memory"]["peak_bytes"]
    lines = [
        para("`gpusim run examples/gpt22b_korthikanti.yaml --set model.attention=flash --set",
             "remat.policy=selective` against `none`: peak %s → %s B (%s less%s), step %.4f → %.4f s," % (
                 nbytes(none["memory"]["peak_bytes"]), nbytes(sel["memory"]["peak_bytes"]), nbytes(saved),
                 (": %d × the %s B statistics" % (layers, nbytes(saved // layers))) if saved % layers == 0 else "",
                 none["time"]["step_time_s"], sel["time"]["step_time_s"]),
             "recompute %.3f ms per layer." % (rec_layer * 1e3), indent="- "),
        para("`gpusim compare examples/megatron/llama3_8b_cp2.yaml --vary",
             "megatron.args.recompute-activations=false,true`: step %.4f → %.4f s, recompute %.4f s." % (
                 cp[0]["step_time_s"], cp[1]["step_time_s"], cp[1]["recompute_s"]),
             "Before this, both rows were the same.", indent="- "),
    ]
    return {"flash-selective": "\n".join(lines)}


def validation_blocks(gpusim, _ctx):
    blocks = {}
    for f in (maxtext_blocks, kineto_blocks, scan_blocks, remat_blocks, korthikanti_blocks, flash_selective_blocks):
        blocks.update(f(gpusim))
    return blocks


# ---------------------------------------------------------------- driver

PARTS = {
    "validation": ("docs/validation.md", validation_blocks),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", nargs="*", metavar="PART", help=", ".join(PARTS) + " (default validation)")
    ap.add_argument("--gpusim", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that records (torch, transformers, timm)")
    ap.add_argument("--traces", help="keep the recorded traces here (zoo, step_time)")
    ap.add_argument("--reuse", action="store_true", help="replay the traces already in --traces")
    a = ap.parse_args()
    gpusim = os.path.abspath(a.gpusim)
    ctx = {"python": a.python, "traces": a.traces, "reuse": a.reuse}
    bad = [p for p in a.parts if p not in PARTS]
    if bad:
        ap.error("unknown PART %s (one of %s)" % (", ".join(bad), ", ".join(PARTS)))
    status = 0
    for part in a.parts or ["validation"]:
        doc, make = PARTS[part]
        path = os.path.join(ROOT, doc)
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = old
        for name, body in make(gpusim, ctx).items():
            new = replace_block(new, name, body, doc)
        if new == old:
            print("%s: up to date" % doc)
            continue
        if a.check:
            sys.stderr.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), doc,
                                                       doc + " (fresh run)"))
            print("%s: the generated blocks differ from a fresh run; regenerate with `tools/gen_validation.py "
                  "--gpusim BUILD/gpusim %s`" % (doc, part), file=sys.stderr)
            status = 1
            continue
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(path + ".tmp", path)
        print("%s: written" % doc)
    return status


if __name__ == "__main__":
    sys.exit(main())
