#!/usr/bin/env python3
"""SimuMax's public B200 table as gpusim validation data:
validation/simumax_b200.json, read from a local git mirror of
MooreThreads/SimuMax at one pinned commit (git show; nothing is fetched).

    tools/collect/simumax_b200.py --mirror DIR [--out FILE] [--check]

DIR is a git directory holding COMMIT (the session's `fetch
github:MooreThreads/SimuMax` gives /work/.mirror/MooreThreads+SimuMax/repo).
--check: write nothing, exit 1 when FILE differs from a fresh collection.

Per row of docs/b200/b200_release_v1.2_summary.json (43 Megatron-LM runs on
one 8-GPU B200 node, each with SimuMax's prediction beside it):
  - the measured figures as SimuMax records them: real_ms (the smallest
    "elapsed time per iteration" of iterations >= 2 on the highest rank,
    timing_rank, which is the one rank Megatron's print_rank_last writes the
    iteration line on), real_alloc_gib (the largest over all ranks of
    torch.cuda.max_memory_allocated(), their memory-logging patch), the
    per-rank peaks, and SimuMax's perf_ms / perf_alloc_gib
    (tools/b200/run_megatron_perf_real_pipeline.py parse_run_logs, and
    docs/b200/b200_real_repro_guide.md section 6);
  - the launch line, rebuilt from the launcher that ran it: the bash arrays
    of simu_tools/megatron_scripts/scripts/run_pretrain_llama3.sh (dense) or
    run_pretrain_deepseekv2.sh (MoE) in the order their `cmd=` joins them,
    with the script's variables set as run_llama3.sh / run_deepseekv2.sh set
    them from the case (micro-batch 1, micro-batches mbc, TP/EP, PP, model
    type, layers, CP; data parallel = 8 / (TP x PP x CP), global batch =
    1 x mbc x DP) and SEQ_LEN from the case name. Each group of flags names
    the file and array it came from (`flags_from`); what the public files do
    not settle is listed per row (`undetermined`), never guessed silently.
    `_cef` is docs/strategy.md's "cross_entropy_loss_fusion" mapping:
    --cross-entropy-loss-fusion --cross-entropy-fusion-impl te.
    --tensorboard-dir (a path on their machine) is dropped and listed.
    Environment the scripts export is kept per row (`env`); only
    CUDA_DEVICE_MAX_CONNECTIONS, which Megatron-LM reads
    (megatron/training/arguments.py validate_args), leads the launch line;
    the others are paths, rendezvous, logging, or names Megatron-LM does not
    read at the commit the runs used (git grep), each said so in the top
    level's `env_why`.
SimuMax is Apache-2.0 (validation/LICENSE.simumax is its LICENSE at COMMIT);
only the figures and the flags are copied, no code."""

import json
import os
import re
import shlex
import sys

import mirror_collect

REPO = "MooreThreads/SimuMax"
COMMIT = "4dcaae513ba7679d56c116a17cd4a691ec41e252"
SUMMARY = "docs/b200/b200_release_v1.2_summary.json"
GUIDE = "docs/b200/b200_real_repro_guide.md"
STRATEGY_DOC = "docs/strategy.md"
PIPELINE = "tools/b200/run_megatron_perf_real_pipeline.py"
SCRIPTS = "simu_tools/megatron_scripts"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "validation", "simumax_b200.json")
WORLD = 8  # run_llama3.sh / run_deepseekv2.sh world_size=8, one node (hostfile 127.0.0.1)

# The summary's model name -> (launcher, its model type, the inner script,
# the training script the inner script runs).
MODELS = {
    "llama3-70b": ("run_llama3.sh", "llama3_70b", "scripts/run_pretrain_llama3.sh", "pretrain_gpt.py"),
    "llama3-405b": ("run_llama3.sh", "llama3_405b", "scripts/run_pretrain_llama3.sh", "pretrain_gpt.py"),
    "deepseekv2": ("run_deepseekv2.sh", "deepseek_v2", "scripts/run_pretrain_deepseekv2.sh", "pretrain_deepseekv2.py"),
    "deepseekv3": ("run_deepseekv2.sh", "deepseek_v3", "scripts/run_pretrain_deepseekv2.sh", "pretrain_deepseekv2.py"),
}
CEF = "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te"
# Exported by the inner scripts; why each is not on the launch line.
ENV_WHY = {
    "OMP_NUM_THREADS": "host CPU threads",
    "CUDA_VISIBLE_DEVICES": "which GPUs (all 8)",
    "ACCELERATOR_BACKEND": "not read by Megatron-LM at the runs' commit",
    "CUDA_HOME": "a path", "TRITON_PTXAS_PATH": "a path", "PATH": "a path", "CPATH": "a path",
    "C_INCLUDE_PATH": "a path", "CPLUS_INCLUDE_PATH": "a path", "PYTHONPATH": "a path",
    "NODE_ADDR": "rendezvous", "GPUS_PER_NODE": "rendezvous (8: the world size)", "NUM_NODES": "rendezvous (1)",
    "MASTER_ADDR": "rendezvous", "NODE_RANK": "rendezvous", "MASTER_PORT": "rendezvous",
    "MOE_ROUTER_GROUP_TOPK": "the script's own variable (fills --moe-router-group-topk)",
    "ENABLE_ZERO_BUBBLE": "not read by Megatron-LM at the runs' commit",
    "CPU_OPTIMIZER_PRECISION_AWARE_RECONFIG": "not read by Megatron-LM at the runs' commit",
    "ENABLE_D2H_IN_PERMUTATION": "not read by Megatron-LM at the runs' commit",
    "MOE_NUM_EXPERTS": "the script's own variable (fills --num-experts)",
    "CUDA_DEVICE_MAX_CONNECTIONS": "on the launch line: Megatron-LM reads it (megatron/training/arguments.py)",
    "MEGATRON_LOG_MEMORY_ALL_RANKS": "SimuMax's memory-logging patch (logging only)",
    "MEGATRON_REPORT_MEMORY_EVERY_ITER": "SimuMax's memory-logging patch (logging only)",
    "MEGATRON_REPORT_MEMORY_MIN_ITER": "SimuMax's memory-logging patch (logging only)",
}
# The memory-logging patch's switches (simu_tools/megatron_scripts/patches/
# megatron_b200_memory_logging.patch; values from the pipeline's
# REAL_MEMORY_ENV_DEFAULTS): logging only.
MEMORY_LOG_ENV = ["MEGATRON_LOG_MEMORY_ALL_RANKS", "MEGATRON_REPORT_MEMORY_EVERY_ITER", "MEGATRON_REPORT_MEMORY_MIN_ITER"]


def git(mirror, path):
    return mirror_collect.git_show("simumax_b200", mirror, COMMIT, path)


def expand(text, env):
    """$VAR / ${VAR} / ${VAR:-default} / $((a * b)) as bash expands them, from env."""
    def var(m):
        name, default = m.group(1) or m.group(3), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return expand(default, env)
        raise SystemExit("simumax_b200: the scripts use $%s, which nothing sets" % name)
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)", var, text)


def script_vars(text, env, model_type):
    """The inner script's variables after its set-up: the ${X:-default}
    assignments, and the model branch `if/elif [ ... == "<type>" ]`."""
    out = dict(env)
    for m in re.finditer(r"^(?:export )?(\w+)=\$\{\1:-(.*)\}\s*$", text, re.M):
        out.setdefault(m.group(1), expand(m.group(2).strip('"'), out))
    for m in re.finditer(r"^(\w+)=(\d+)\s*$", text, re.M):  # WARMUP_STEPS=2000
        out.setdefault(m.group(1), m.group(2))
    for m in re.finditer(r"^(\w+)=\$\(\((.*)\)\)\s*$", text, re.M):  # NUM_LAYERS_MINUS_ONE=$((NUM_LAYER - 1))
        out[m.group(1)] = str(arith(m.group(2), out))
    branch = re.search(r'(?:if|elif) \[ "?\$\{?MODEL_TYPE\}?"? == "%s" \]; then\n(.*?)\n(?:elif|else|fi)' % model_type,
                       text, re.S)
    if not branch:
        raise SystemExit("simumax_b200: no MODEL_TYPE branch for %s" % model_type)
    for line in branch.group(1).splitlines():
        m = re.match(r"\s*(?:export\s+)?(\w+)=(\S+)", line)
        if m:
            out[m.group(1)] = expand(m.group(2).strip('"'), out)
    return out


def arith(expr, env):
    """bash $(( )) over integers: names read from env, + - * and integer /."""
    words = re.findall(r"\$?\w+|[-+*/()]", expr)
    if "".join(words) != re.sub(r"\s", "", expr):
        raise SystemExit("simumax_b200: cannot evaluate $((%s))" % expr)
    out = []
    for w in words:
        name = w.lstrip("$")
        if re.match(r"[A-Za-z_]", name):
            if name not in env:
                raise SystemExit("simumax_b200: $((%s)) reads %s, which nothing sets" % (expr, name))
            w = env[name]
        out.append("//" if w == "/" else w)
    return int(eval(" ".join(out), {"__builtins__": {}}))  # digits and + - * // ( ) only, checked above


def bash_array(text, name, env, append=False):
    """The words of `NAME=( ... )` (or `NAME+=(`), comments dropped, expanded."""
    m = re.search(r"^\s*%s%s=\(\s*\n(.*?)^\s*\)" % (name, r"\+" if append else ""), text, re.M | re.S)
    if not m:
        raise SystemExit("simumax_b200: no %s array" % name)
    words = []
    for line in m.group(1).splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            words += shlex.split(expand(line, env))
    return words


def cmd_order(text):
    """The arrays `cmd="torchrun ${DISTRIBUTED_ARGS[@]} ./X.py ${A[@]} ..."` joins, in order."""
    m = re.search(r'^cmd="torchrun \$\{DISTRIBUTED_ARGS\[@\]\} \./(\S+)(.*?)"', text, re.M | re.S)
    if not m:
        raise SystemExit("simumax_b200: no torchrun cmd= line")
    return m.group(1), re.findall(r"\$\{(\w+)\[@\]\}", m.group(2)) + (["EXTRA_ARGS"] if "${EXTRA_ARGS}" in m.group(2) else [])


def case_shape(row):
    """tp, ep, pp, cp, dp, seq from the case name (checked against the row's fields)."""
    name = row["case"]
    get = {k: int(v) for k, v in re.findall(r"(?:^|_)(tp|ep|pp|cp|dp|seq|mbc|l)(\d+)(?=_|$)", name)}
    shape = {"tp": get.get("tp", 1), "ep": get.get("ep", 1), "pp": get.get("pp", 1), "cp": get.get("cp", 1),
             "dp": get["dp"], "seq": get.get("seq", 4096)}
    if get.get("mbc") != row["mbc"] or get.get("l") != row["layer_num"] or shape["cp"] != row.get("cp_size", 1):
        raise SystemExit("simumax_b200: %s: the name disagrees with mbc/layer_num/cp_size" % name)
    if shape["dp"] * shape["tp"] * shape["pp"] * shape["cp"] != WORLD:
        raise SystemExit("simumax_b200: %s: TP x PP x CP x DP is not %d" % (name, WORLD))
    return shape


def launch(mirror, row, shape):
    """(launch line, flags_from, env, dropped, undetermined) of one row."""
    launcher, model_type, inner, _ = MODELS[row["model"]]
    text = git(mirror, "%s/%s" % (SCRIPTS, inner))
    moe = launcher == "run_deepseekv2.sh"
    gbs = 1 * row["mbc"] * shape["dp"]
    env = {"TP_SIZE": str(shape["tp"]), "PP_SIZE": str(shape["pp"]), "CP_SIZE": str(shape["cp"]),
           "MICRO_BATCH_SIZE": "1", "GLOBAL_BATCH_SIZE": str(gbs), "MODEL_TYPE": model_type, "DTYPE": "bf16",
           "TEST_TYPE": "test", "SEQ_LEN": str(shape["seq"]), "TB_PATH": "TB_PATH",
           ("NUM_LAYER" if moe else "NUM_LAYERS"): str(row["layer_num"]),
           "WORK_HOME": ".", "OUTPUT_DIR": ".", "EXAMPLE": row["case"]}
    if moe:
        env["EP_SIZE"] = str(shape["ep"])
    v = script_vars(text, env, model_type)
    v["TRAIN_ITERS"] = str(max(row["steady_iterations"]))
    v["WARMUP_ITERS"] = "1"
    script, arrays = cmd_order(text)
    base = "%s/%s" % (SCRIPTS, inner)
    words, flags_from, dropped = [], [], []
    for name in arrays:
        if name == "EXTRA_ARGS":
            group, source = CEF.split(), ("EXTRA_ARGS: the case's `_cef` suffix, %s cross_entropy_loss_fusion "
                                          "(\"enabling both --cross-entropy-loss-fusion and "
                                          "--cross-entropy-fusion-impl te\")" % STRATEGY_DOC)
        elif name == "PROFILE_ARGS":
            continue  # TEST_TYPE test: PROFILE_ARGS=() (the profile branch is not taken)
        elif name == "TRANSFORMER_ENGINE_ARGS":
            # `if [ "$DTYPE" == "bf16" ]` branch: the first TRANSFORMER_ENGINE_ARGS=( in the file.
            group, source = bash_array(text, name, v), "%s %s (the DTYPE bf16 branch)" % (base, name)
        else:
            group, source = bash_array(text, name, v), "%s %s" % (base, name)
            if name == "MODEL_PARALLEL_ARGS" and shape["cp"] > 1:
                group += bash_array(text, name, v, append=True)
                source += " (+= the CP_SIZE > 1 branch: --context-parallel-size, --cp-comm-type CP_COMM_TYPE a2a)"
        kept = []
        i = 0
        while i < len(group):
            if group[i] == "--tensorboard-dir":
                dropped.append({"arg": "--tensorboard-dir", "why": "a path on their machine (TB_PATH); logging only"})
                i += 2
                continue
            kept.append(group[i])
            i += 1
        flags_from.append({"from": source, "args": " ".join(shlex.quote(w) for w in kept)})
        words += kept
    exports = {}
    for m in re.finditer(r"^\s*export (\w+)=(.*)$", text, re.M):  # as written (first assignment), comment dropped
        exports.setdefault(m.group(1), re.sub(r"\s+#.*$", "", m.group(2)).strip().strip("'\""))
    env_out = {k: v.get(k, exports[k]) for k in sorted(exports)}  # the script's variables as set for the row
    for k in MEMORY_LOG_ENV:
        env_out[k] = "1"
    missing = [k for k in env_out if k not in ENV_WHY]
    if missing:
        raise SystemExit("simumax_b200: %s exports %s, which ENV_WHY does not explain" % (inner, ", ".join(missing)))
    line = "CUDA_DEVICE_MAX_CONNECTIONS=%s %s %s" % (exports["CUDA_DEVICE_MAX_CONNECTIONS"], script,
                                                      " ".join(shlex.quote(w) for w in words))
    undetermined = [
        {"what": "how the `_cef` flags were passed",
         "note": "the public pipeline's case list (%s CASES) has no _cef case; the flags are %s's mapping of the "
                 "suffix, appended as the inner script's EXTRA_ARGS" % (PIPELINE, STRATEGY_DOC)},
        {"what": "--train-iters %s" % v["TRAIN_ITERS"],
         "note": "the logged iterations (steady_iterations %s) end at %s; the launcher's default is 10 and the "
                 "pipeline's MEGATRON_TRAIN_ITERS=3 is read by no public script (no effect on one step)"
                 % (row["steady_iterations"], v["TRAIN_ITERS"])},
    ]
    if moe:
        undetermined.append({
            "what": "bf16, not fp8",
            "note": "%s megatron_command passes '<cp>', '4096', 'bf16' as run_deepseekv2.sh's $8 $9 $10, and "
                    "run_deepseekv2.sh reads $9 as dtype, which would take the fp8 branch (--fp8-format hybrid "
                    "--fp8-param-gather); the table's system is b200_bf16_ceperm and SimuMax's strategy files for these "
                    "rows (configs/strategy/ep8_pp1_dp8_mbs1.json, ep4_pp2_dp4_mbs1.json) say dtype bf16, so the "
                    "bf16 branch is taken here" % PIPELINE})
        undetermined.append({
            "what": "the training script",
            "note": "SimuMax's own simu_tools/megatron_scripts/pretrain_deepseekv2.py (get_gpt_decoder_block_spec "
                    "for MoE), not Megatron-LM's pretrain_gpt.py"})
    return line, flags_from, env_out, dropped, undetermined


def collect(mirror):
    summary = json.loads(git(mirror, SUMMARY))
    rows = []
    for r in summary["rows"]:
        if r["status"] != "ok" or r["kind"] != "non-vpp":
            raise SystemExit("simumax_b200: %s: status %s kind %s" % (r["case"], r["status"], r["kind"]))
        shape = case_shape(r)
        line, flags_from, env, dropped, undetermined = launch(mirror, r, shape)
        by_rank = {int(k): v["max_allocated_mb"] for k, v in r["peak_memory_by_rank_mb"].items()}
        heaviest = max(by_rank, key=lambda k: by_rank[k])
        if abs(by_rank[heaviest] / 1024 - r["real_alloc_gib"]) > 0.006:
            raise SystemExit("simumax_b200: %s: real_alloc_gib is not the largest rank's peak" % r["case"])
        rows.append({
            "case": r["case"], "model": r["model"], "layers": r["layer_num"], "micro_batches": r["mbc"],
            "tp": shape["tp"], "ep": shape["ep"], "pp": shape["pp"], "cp": shape["cp"], "dp": shape["dp"],
            "seq_length": shape["seq"], "world_size": WORLD, "device": "b200",
            "args": line, "flags_from": flags_from, "dropped": dropped, "env": env,
            "undetermined": undetermined,
            "real_ms": r["real_ms"], "perf_ms": r["perf_ms"],
            "real_alloc_gib": r["real_alloc_gib"], "perf_alloc_gib": r["perf_alloc_gib"],
            "timing_rank": r["timing_rank"], "steady_iterations": r["steady_iterations"],
            "memory_rank": heaviest,
            "max_allocated_mib_by_rank": {str(k): by_rank[k] for k in sorted(by_rank)},
            "memory_source_case": r.get("memory_source_case", r["case"]),
        })
    return {
        "source": ("%s %s at commit %s (%s, Apache-2.0: validation/LICENSE.simumax): Megatron-LM %s runs on one "
                   "8-GPU B200 node with SimuMax's predictions; launch lines rebuilt from the launcher scripts of "
                   "the same commit by tools/collect/simumax_b200.py" % (
                       REPO, SUMMARY, COMMIT, summary["generated_at"][:10], "23e00ed0963c"
                   )),
        "runtime": ("%s: Megatron-LM 23e00ed0963c35382dfe8a5a94fb3cda4d21e133 with the memory-logging patch, "
                    "TransformerEngine 2.11.0+c188b533, torch 2.10.0a0 (NGC PyTorch 26.01 family), CUDA 13.1" % GUIDE),
        "device": ("b200 (configs/devices/b200.yaml, HGX B200 180 GB): the guide names B200 and no other part; the "
                   "largest measured peak, %.2f GiB, rules out an 80 GB device (SimuMax's system file "
                   "configs/system/b200_bf16_ceperm.json says mem_gbs 80, which the measured peaks exceed)" % max(
                       x["real_alloc_gib"] for x in rows)),
        "real_ms": ("the smallest 'elapsed time per iteration' over iterations >= 2 (of 3) on timing_rank, the last "
                    "rank, which Megatron's print_rank_last logs on (%s parse_run_logs)" % PIPELINE),
        "real_alloc": ("the largest over the 8 ranks of torch.cuda.max_memory_allocated() (MiB / 1024), logged on "
                       "every rank by the memory-logging patch; rows whose memory_source_case differs reuse that "
                       "case's memory run (same topology, only mbc differs: %s section 6)" % GUIDE),
        "env_why": ENV_WHY,
        "notes": summary["notes"],
        "rows": rows,
    }


if __name__ == "__main__":
    sys.exit(mirror_collect.main("simumax_b200", __doc__.split("\n\n")[0], REPO, OUT, collect,
                                 lambda d: "%d rows" % len(d["rows"])))
