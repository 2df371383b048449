"""tools/collect/simumax_b200.py's reading of SimuMax's launcher scripts,
on a small script of the same shape (no mirror needed)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "collect"))
import simumax_b200 as sm  # noqa: E402

SCRIPT = """#!/bin/bash
SEQ_LEN=${SEQ_LEN:-4096}
CP_SIZE=${CP_SIZE:-1}
export MOE_ROUTER_GROUP_TOPK=${MOE_ROUTER_GROUP_TOPK:-3}
NUM_LAYERS_MINUS_ONE=$((NUM_LAYER - 1))
if [ "$MODEL_TYPE" == "small" ]; then
    HIDDEN=512
    export MOE_NUM_EXPERTS=8
    FREQ="([0]*1+[1]*${NUM_LAYERS_MINUS_ONE})*1"
elif [ "$MODEL_TYPE" == "large" ]; then
    HIDDEN=8192
else    echo "Unknown"
fi
MODEL_ARGS=(
    --num-layers ${NUM_LAYER}  # a comment
    --hidden-size $HIDDEN
    # --commented-out-flag
    --moe-layer-freq "$FREQ"
    --seq-length ${SEQ_LEN}
)
MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
)
if [ "$CP_SIZE" -gt 1 ]; then
    MODEL_PARALLEL_ARGS+=(
        --context-parallel-size $CP_SIZE
    )
fi
cmd="torchrun ${DISTRIBUTED_ARGS[@]} ./pretrain_x.py \\
        ${MODEL_ARGS[@]} \\
        ${MODEL_PARALLEL_ARGS[@]}
        ${EXTRA_ARGS}
    "
"""


class ReadLauncherTest(unittest.TestCase):
    def vars(self, **env):
        return sm.script_vars(SCRIPT, dict({"NUM_LAYER": "4", "MODEL_TYPE": "small"}, **env), "small")

    def test_defaults_branch_and_arithmetic(self):
        v = self.vars(CP_SIZE="4")
        self.assertEqual(v["SEQ_LEN"], "4096")  # the script's default
        self.assertEqual(v["CP_SIZE"], "4")  # the launcher's value wins
        self.assertEqual(v["MOE_ROUTER_GROUP_TOPK"], "3")
        self.assertEqual(v["NUM_LAYERS_MINUS_ONE"], "3")
        self.assertEqual(v["HIDDEN"], "512")  # the "small" branch, not "large"
        self.assertEqual(v["FREQ"], "([0]*1+[1]*3)*1")

    def test_arrays_in_cmd_order(self):
        v = self.vars(CP_SIZE="4")
        script, arrays = sm.cmd_order(SCRIPT)
        self.assertEqual((script, arrays), ("pretrain_x.py", ["MODEL_ARGS", "MODEL_PARALLEL_ARGS", "EXTRA_ARGS"]))
        self.assertEqual(sm.bash_array(SCRIPT, "MODEL_ARGS", v),
                         ["--num-layers", "4", "--hidden-size", "512", "--moe-layer-freq", "([0]*1+[1]*3)*1",
                          "--seq-length", "4096"])
        self.assertEqual(sm.bash_array(SCRIPT, "MODEL_PARALLEL_ARGS", v, append=True),
                         ["--context-parallel-size", "4"])

    def test_unset_names_are_errors(self):
        with self.assertRaises(SystemExit):
            sm.expand("--x $NOT_SET", {})
        with self.assertRaises(SystemExit):
            sm.arith("A * 2", {})
        with self.assertRaises(SystemExit):
            sm.arith("__import__('os')", {})
        with self.assertRaises(SystemExit):
            sm.script_vars(SCRIPT, {"NUM_LAYER": "4"}, "medium")  # no such branch
        self.assertEqual(sm.arith("(A + 2) * B / 4", {"A": "6", "B": "3"}), 6)

    def test_case_shape(self):
        row = {"case": "llama3_70b_l12_tp2_cp4_pp1_dp1_seq32768_mbc4_cef", "mbc": 4, "layer_num": 12, "cp_size": 4}
        self.assertEqual(sm.case_shape(row), {"tp": 2, "ep": 1, "pp": 1, "cp": 4, "dp": 1, "seq": 32768})
        with self.assertRaises(SystemExit):  # TP x PP x CP x DP is not 8
            sm.case_shape(dict(row, case="llama3_70b_l12_tp2_cp4_pp1_dp2_seq32768_mbc4_cef"))
        with self.assertRaises(SystemExit):  # the name's micro-batch count is not the row's
            sm.case_shape(dict(row, mbc=8))


if __name__ == "__main__":
    unittest.main()
