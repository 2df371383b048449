#!/usr/bin/env python3
"""Megatron-LM's functional-test goldens as gpusim validation data:
validation/megatron_functional.json, read from a local git mirror of
NVIDIA/Megatron-LM at one pinned commit (git show; nothing is fetched).

    tools/collect/megatron_functional.py --mirror DIR [--out FILE] [--check]

DIR is a git directory holding COMMIT (the session's `fetch
github:NVIDIA/Megatron-LM` gives /work/.mirror/NVIDIA+Megatron-LM/repo).
--check: write nothing, exit 1 when FILE differs from a fresh collection.

Per case (CASES below; a test directory and the golden file's environment and
platform), from tests/functional_tests/test_cases/<model>/<case>/:
  - model_config.yaml MODEL_ARGS -> the launch line. Arguments whose value is
    a ${...} path the CI script fills in (data, vocabulary and merge files,
    checkpoint save/load, data cache, tensorboard directory) are dropped and
    listed in `dropped`: they name files on NVIDIA's cluster, not the step.
    `true` is the bare flag; `false` drops the flag (listed too). Without a
    --tokenizer-type, GPT2BPETokenizer is added: pretrain_gpt.py calls
    initialize_megatron with args_defaults={'tokenizer_type':
    'GPT2BPETokenizer'} (the vocabulary of the dropped --vocab-file).
    ENV_VARS are kept as they are (`env`); CUBLAS_WORKSPACE_CONFIG, the one
    gpusim reads, also leads the launch line as the CI sets it
    ("CUBLAS_WORKSPACE_CONFIG=:4096:8 pretrain_gpt.py --num-layers ...", the
    recipe's TRAINING_SCRIPT_PATH).
  - golden_values_<env>_<platform>.json: Megatron's tensorboard scalars,
    written by megatron/training/training.py training_log on the one rank
    that has a tensorboard writer, rank world_size - 1
    (megatron/training/global_vars.py _set_tensorboard_writer:
    `args.rank == (args.world_size - 1)`):
      iteration-time: elapsed time per iteration (training_log), median over
        the steady steps (step >= WARM_STEPS; the first iterations hold
        NCCL set-up, autotuning and allocator warm-up: step 1 is 4.8 s
        where the rest are 0.21 s in gpt3_mcore_te_tp2_pp2);
      mem-max-allocated-bytes: torch.cuda.memory_stats()
        ["allocated_bytes.all.peak"], the largest logged value (the peak
        since the process started: it only grows);
      mem-allocated-bytes: ["allocated_bytes.all.current"] at the last
        logged step (between iterations).
  - the world size: `nodes` x `gpus` of the CI recipe listing the case
    (tests/test_utils/recipes/h100/*.yaml spec, or the product's own; for a
    case no recipe lists at COMMIT, its model's recipe spec).
  - the device: dgx_a100 -> a100-sxm-80gb, dgx_h100 -> h100-sxm-80gb (DGX
    A100 / H100 carry the 80 GB SXM parts).
The test files are NVIDIA's, under Megatron-LM's BSD-3-Clause terms ("applies
to all files unless otherwise noted"): validation/LICENSE.megatron-lm is its
LICENSE at COMMIT."""

import json
import os
import sys
from statistics import median

import yaml

import mirror_collect

REPO = "NVIDIA/Megatron-LM"
COMMIT = "57a0267265f6a37c4eb0b49dff840c1bd35d84f4"
TESTS = "tests/functional_tests/test_cases"
RECIPES = "tests/test_utils/recipes/h100"
WARM_STEPS = 5
DEVICES = {"dgx_a100": "a100-sxm-80gb", "dgx_h100": "h100-sxm-80gb"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "validation", "megatron_functional.json")

# (model, case, golden environment_platform, what it covers). Regular tests
# only (TEST_TYPE regular: one training run from scratch; the resume tests'
# goldens span a checkpoint load).
CASES = [
    ("gpt", "gpt3_mcore_te_tp2_pp2", "dev_dgx_a100", "TP 2 x PP 2, TE, unfused attention"),
    ("gpt", "gpt3_mcore_tp1_pp2", "dev_dgx_a100", "PP 2, local transformer"),
    ("gpt", "gpt3_mcore_tp1_pp2", "dev_dgx_h100", "PP 2, local transformer"),
    ("gpt", "gpt3_mcore_tp4_pp1", "dev_dgx_a100", "TP 4, local transformer"),
    ("gpt", "gpt3_mcore_te_tp1_pp1_uniform_full_recompute", "dev_dgx_a100", "full recompute, uniform"),
    ("gpt", "gpt3_mcore_te_tp1_pp1_dist_optimizer_no_mmap_bin_files", "dev_dgx_a100", "DP 8, distributed optimizer"),
    ("gpt", "gpt3_mcore_te_tp1_pp1_dist_optimizer_no_mmap_bin_files", "dev_dgx_h100", "DP 8, distributed optimizer"),
    ("gpt", "gpt3_mcore_te_tp1_pp2_rope_embeddings", "dev_dgx_a100", "RoPE"),
    ("gpt", "gpt3_mcore_te_tp1_pp4_swiglu", "dev_dgx_a100", "SwiGLU"),
    ("gpt", "gpt3_mcore_te_tp1_pp4_untie_embeddings_and_outputs", "dev_dgx_a100", "untied output layer"),
    ("gpt", "gpt3_mcore_te_tp1_pp4_disable_bias_linear", "dev_dgx_a100", "no linear biases"),
    ("gpt", "gpt3_mcore_te_tp1_pp4_vp1", "dev_dgx_a100", "interleaved schedule, 1 layer a chunk"),
    ("gpt", "gpt3_mcore_te_tp1_pp4_vp1", "dev_dgx_h100", "interleaved schedule, 1 layer a chunk"),
    ("gpt", "gpt3_mcore_te_tp1_pp4_vp1_dist_optimizer_overlap_grad_reduce_param_gather", "dev_dgx_a100",
     "interleaved, distributed optimizer, overlapped grad reduce and param gather"),
    ("gpt", "gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather", "dev_dgx_a100",
     "TP 4, distributed optimizer, overlapped grad reduce and param gather"),
    ("gpt", "gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather", "dev_dgx_h100",
     "TP 4, distributed optimizer, overlapped grad reduce and param gather"),
    ("gpt", "gpt3_mcore_te_tp2_pp1_cp2_nondeterministic", "dev_dgx_a100", "TP 2, CP 2, sequence parallel"),
    ("gpt", "gpt3_mcore_te_tp2_pp2_cp2", "dev_dgx_a100", "TP 2, PP 2, CP 2, sequence parallel"),
    ("gpt", "gpt3_mcore_te_tp2_pp2_cp2", "dev_dgx_h100", "TP 2, PP 2, CP 2, sequence parallel"),
    ("gpt", "gpt3_mcore_te_tp1_pp2_cp4_a2a_p2p_nondeterministic", "dev_dgx_a100", "CP 4, a2a+p2p"),
    ("gpt", "gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion", "dev_dgx_a100", "fused cross-entropy"),
    ("gpt", "gpt3_7b_tp1_pp4_memory_speed", "dev_dgx_a100", "7B, PP 4, interleaved"),
    ("gpt", "gpt3_7b_tp1_pp4_memory_speed", "dev_dgx_h100", "7B, PP 4, interleaved"),
    ("gpt", "gpt3_7b_tp4_pp1_memory_speed", "dev_dgx_a100", "7B, TP 4"),
    ("gpt", "gpt3_7b_tp4_pp1_memory_speed", "dev_dgx_h100", "7B, TP 4"),
    ("moe", "gpt3_mcore_tp2_pp2_ep2_te_4experts2parallel", "dev_dgx_a100", "MoE 4 experts, EP 2, TP 2, PP 2"),
    ("moe", "gpt3_mcore_tp2_pp2_ep2_te_4experts2parallel", "dev_dgx_h100", "MoE 4 experts, EP 2, TP 2, PP 2"),
    ("moe", "gpt3_mcore_te_tp2_pp1_te_8experts2parallel_dist_optimizer", "dev_dgx_a100",
     "MoE 8 experts, EP 2, distributed optimizer"),
    ("moe", "gpt3_mcore_te_tp2_pp1_te_8experts2parallel_top2router", "dev_dgx_a100", "MoE top-2 router"),
    ("moe", "gpt3_mcore_te_tp2_pp1_te_8experts_etp1_ep4", "dev_dgx_a100", "MoE EP 4, ETP 1"),
    ("moe", "gpt3_mcore_tp2_pp2_ep2_etp2_te_4experts2parallel", "dev_dgx_a100", "MoE EP 2, ETP 2"),
    ("moe", "gpt3_mcore_te_tp2_pp1_te_8experts2parallel_overlap_grad_reduce_param_gather_groupedGEMM",
     "dev_dgx_a100", "MoE grouped GEMM, overlapped grad reduce and param gather"),
    ("moe", "gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed", "dev_dgx_h100", "MoE 32 experts, EP 4, seq 4096"),
]


def git(mirror, path):
    return mirror_collect.git_show("megatron_functional", mirror, COMMIT, path)


def launch_line(model_args, env):
    """(launch line, dropped [(name, why)]) from MODEL_ARGS and ENV_VARS."""
    out, dropped = ["pretrain_gpt.py"], []
    if "CUBLAS_WORKSPACE_CONFIG" in env:
        out.insert(0, "CUBLAS_WORKSPACE_CONFIG=%s" % env["CUBLAS_WORKSPACE_CONFIG"])
    for name, value in model_args.items():
        if not name.startswith("--"):
            raise SystemExit("megatron_functional: MODEL_ARGS key %r is not a --flag" % name)
        if value is True:
            out.append(name)
        elif value is False:
            dropped.append((name, "false in MODEL_ARGS: the flag is not passed"))
        elif "${" in str(value):
            dropped.append((name, "a path on NVIDIA's CI cluster (%s)" % value))
        else:
            text = str(value)
            out.append("%s %s" % (name, text if " " not in text and text else json.dumps(text)))
    if "--tokenizer-type" not in model_args:
        out.append("--tokenizer-type GPT2BPETokenizer")
    return " ".join(out), dropped


def world_size(mirror, model, case):
    """nodes x gpus of the recipe that lists `case` (a product's own values first)."""
    for name in ("%s.yaml" % model, "gpt.yaml", "moe.yaml"):
        try:
            recipe = yaml.safe_load(git(mirror, "%s/%s" % (RECIPES, name)))
        except SystemExit:
            continue
        for product in recipe.get("products", []):
            if case in product.get("test_case", []):
                spec = recipe["spec"]
                return (int(product.get("nodes", spec["nodes"])) * int(product.get("gpus", spec["gpus"])),
                        "%s/%s" % (RECIPES, name))
    # Cases no longer scheduled at COMMIT (gpt3_mcore_te_tp2_pp2): the model's
    # recipe spec, which every case of that recipe runs with.
    spec = yaml.safe_load(git(mirror, "%s/%s.yaml" % (RECIPES, model)))["spec"]
    return int(spec["nodes"]) * int(spec["gpus"]), "%s/%s.yaml spec (the case is not listed)" % (RECIPES, model)


def series(golden, key):
    """{step: value} of one golden metric, or None when it is not logged."""
    if key not in golden:
        return None
    values = golden[key]["values"]
    if isinstance(values, str):  # some goldens store the dict as its repr
        values = yaml.safe_load(values.replace("'", '"'))
    out = {int(k): float(v) for k, v in values.items()}
    return {k: v for k, v in out.items() if v == v}  # NaN: the step was not logged


def collect_case(mirror, model, case, env_platform, covers):
    base = "%s/%s/%s" % (TESTS, model, case)
    config = yaml.safe_load(git(mirror, base + "/model_config.yaml"))
    if config.get("TEST_TYPE") != "regular":
        raise SystemExit("megatron_functional: %s is TEST_TYPE %s, not regular" % (case, config.get("TEST_TYPE")))
    golden_path = "%s/golden_values_%s.json" % (base, env_platform)
    golden = json.loads(git(mirror, golden_path))
    platform = next(p for p in DEVICES if env_platform.endswith(p))
    env = {k: str(v) for k, v in (config.get("ENV_VARS") or {}).items()}
    args, dropped = launch_line(config["MODEL_ARGS"], env)
    world, recipe = world_size(mirror, model, case)
    it = series(golden, "iteration-time")
    steady = {s: v for s, v in sorted(it.items()) if s >= WARM_STEPS}
    if len(steady) < 2:
        raise SystemExit("megatron_functional: %s has %d steady iteration-time steps" % (golden_path, len(steady)))
    row = {
        "case": case, "model": model, "covers": covers,
        "commit": COMMIT, "model_config": base + "/model_config.yaml", "golden": golden_path,
        "recipe": recipe, "platform": platform, "device": DEVICES[platform], "world_size": world,
        "args": args, "dropped": [{"arg": n, "why": w} for n, w in dropped],
        "env": env,
        "iteration_time_steps": [s for s in steady],
        "iteration_time_s": [steady[s] for s in steady],
        "iteration_time_s_median": median(steady.values()),
    }
    peak, current = series(golden, "mem-max-allocated-bytes"), series(golden, "mem-allocated-bytes")
    if peak:
        row["mem_max_allocated_bytes"] = int(max(peak.values()))
    if current:
        row["mem_allocated_bytes"] = int(current[max(current)])
    return row


def collect(mirror):
    rows = [collect_case(mirror, *c) for c in CASES]
    return {
        "source": ("%s tests/functional_tests/test_cases at commit %s: each case's model_config.yaml and "
                   "golden_values_<environment>_<platform>.json, Megatron-LM's own CI on one DGX A100 or DGX H100 "
                   "(8 x A100-SXM-80GB / H100-SXM-80GB). Collected by tools/collect/megatron_functional.py from a "
                   "git mirror; NVIDIA's BSD-3-Clause terms, validation/LICENSE.megatron-lm." % (REPO, COMMIT)),
        "logged_rank": ("the last rank, world_size - 1: megatron/training/global_vars.py _set_tensorboard_writer "
                        "creates the tensorboard writer only where args.rank == args.world_size - 1, and "
                        "megatron/training/training.py training_log writes iteration-time, mem-allocated-bytes "
                        "and mem-max-allocated-bytes (torch.cuda.memory_stats() allocated_bytes.all.current / "
                        ".peak) through it (commit %s)" % COMMIT[:12]),
        "iteration_time": ("median of the logged steps >= %d (elapsed time per iteration; earlier steps hold the "
                           "set-up and warm-up)" % WARM_STEPS),
        "launch_line": ("CUBLAS_WORKSPACE_CONFIG=V from ENV_VARS where set, pretrain_gpt.py, MODEL_ARGS as flags; ${...} path arguments (data, vocabulary, merges, checkpoints, data "
                        "cache, tensorboard directory) dropped and listed per case; --tokenizer-type "
                        "GPT2BPETokenizer added where absent (pretrain_gpt.py args_defaults)"),
        "cases": rows,
    }


def main():
    return mirror_collect.main("megatron_functional", __doc__.split("\n\n")[0], REPO, OUT, collect,
                               lambda d: "%d cases" % len(d["cases"]))


if __name__ == "__main__":
    sys.exit(main())
