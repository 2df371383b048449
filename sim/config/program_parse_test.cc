// The `program:` section of run configs (sim/config/spec.h ProgramSpec).
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"

namespace gpusim::program_parse_test {
namespace {

namespace fs = std::filesystem;

// examples/scan_carry.yaml, verbatim.
constexpr char kScanCarry[] = R"(framework: jax
device: a100-sxm-80gb
loop:
  mode: rolled
  trip_count: 4
program:
  name: scan_carry
  inputs:                      # argument order, as in jax.jit(f)(model, X)
    w1: {shape: [1, 1024], dtype: f32, donate: true}
    w2: {shape: [1024, 1048576], dtype: f32, donate: true}
    X: {shape: [trip_count, 1], dtype: f32}
  scan:
    carry: {w1: w1, w2: w2, loss: zero}
    xs: {x: X}
    body:
      - {op: matmul, out: h, in: [x, w1]}
      - {op: matmul, out: z, in: [h, w2]}
      - {op: sum, out: zval, in: [z]}
      - {op: scale, out: w1_next, in: [w1, zval]}
      - {op: scale, out: w2_next, in: [w2, zval]}
      - {op: add, out: loss_next, in: [loss, zval]}
    carry_out: {w1: w1_next, w2: w2_next, loss: loss_next}
  loss: loss
  grad: [w1, w2]
)";

using Pairs = std::vector<std::pair<std::string, std::string>>;

class ConfigProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("gpusim_program_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Writes `text` as DIR/run.yaml (the device name resolves from the source
  // tree's configs/devices) and returns its path.
  std::string Run(const std::string& text) {
    std::string path = (dir_ / "run.yaml").string();
    std::ofstream(path) << text;
    return path;
  }

  // kScanCarry with the first `from` replaced by `to`.
  static std::string Edit(const std::string& from, const std::string& to,
                          std::string text = kScanCarry) {
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  }

  // The error of loading `text` with `sets`, "FILE" standing for the path.
  std::string LoadError(const std::string& text,
                        const std::vector<std::string>& sets = {}) {
    std::string path = Run(text);
    absl::StatusOr<RunSpec> r = LoadRunSpec(path, sets);
    EXPECT_FALSE(r.ok());
    std::string msg(r.status().message());
    if (msg.rfind(path, 0) == 0) msg.replace(0, path.size(), "FILE");
    return msg;
  }

  fs::path dir_;
};

TEST_F(ConfigProgramTest, ParsesScanCarryExample) {
  absl::StatusOr<RunSpec> r = LoadRunSpec(Run(kScanCarry), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device.name, "a100-sxm-80gb");
  EXPECT_EQ(r->model.name, "");  // no model
  EXPECT_EQ(r->loop.mode, "rolled");
  EXPECT_EQ(r->loop.trip_count, 4);
  const ProgramSpec& p = r->program;
  EXPECT_TRUE(p.present);
  EXPECT_EQ(p.name, "scan_carry");
  ASSERT_EQ(p.inputs.size(), 3u);
  EXPECT_EQ(p.inputs[0].name, "w1");
  EXPECT_EQ(p.inputs[0].shape, (std::vector<int64_t>{1, 1024}));
  EXPECT_EQ(p.inputs[0].dtype, DType::kF32);
  EXPECT_TRUE(p.inputs[0].donate);
  EXPECT_EQ(p.inputs[1].name, "w2");
  EXPECT_EQ(p.inputs[1].shape, (std::vector<int64_t>{1024, 1048576}));
  EXPECT_EQ(p.inputs[1].dtype, DType::kF32);
  EXPECT_TRUE(p.inputs[1].donate);
  EXPECT_EQ(p.inputs[2].name, "X");
  EXPECT_EQ(p.inputs[2].shape, (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(p.inputs[2].dtype, DType::kF32);
  EXPECT_FALSE(p.inputs[2].donate);
  EXPECT_EQ(p.carry, (Pairs{{"w1", "w1"}, {"w2", "w2"}, {"loss", "zero"}}));
  EXPECT_EQ(p.xs, (Pairs{{"x", "X"}}));
  ASSERT_EQ(p.body.size(), 6u);
  const std::vector<std::vector<std::string>> want_body = {
      {"matmul", "h", "x", "w1"},       {"matmul", "z", "h", "w2"},
      {"sum", "zval", "z"},             {"scale", "w1_next", "w1", "zval"},
      {"scale", "w2_next", "w2", "zval"}, {"add", "loss_next", "loss", "zval"}};
  for (size_t i = 0; i < p.body.size(); ++i) {
    std::vector<std::string> got = {p.body[i].op, p.body[i].out};
    got.insert(got.end(), p.body[i].in.begin(), p.body[i].in.end());
    EXPECT_EQ(got, want_body[i]) << "body[" << i << "]";
  }
  EXPECT_EQ(p.carry_out, (Pairs{{"w1", "w1_next"},
                                {"w2", "w2_next"},
                                {"loss", "loss_next"}}));
  EXPECT_EQ(p.loss, "loss");
  EXPECT_EQ(p.grad, (std::vector<std::string>{"w1", "w2"}));
}

TEST_F(ConfigProgramTest, DefaultsAndOptionalKeys) {
  std::string text = Edit("  name: scan_carry\n", "");
  text = Edit("    X: {shape: [trip_count, 1], dtype: f32}",
              "    X: {shape: [trip_count, 1]}\n    b: {shape: [], dtype: bf16}",
              text);
  text = Edit("    xs: {x: X}\n", "", text);
  text = Edit("in: [x, w1]", "in: [w1, w1]", text);
  absl::StatusOr<RunSpec> r = LoadRunSpec(Run(text), {});
  ASSERT_TRUE(r.ok()) << r.status();
  const ProgramSpec& p = r->program;
  EXPECT_EQ(p.name, "");
  ASSERT_EQ(p.inputs.size(), 4u);
  EXPECT_EQ(p.inputs[2].dtype, DType::kF32);
  EXPECT_FALSE(p.inputs[2].donate);
  EXPECT_EQ(p.inputs[3].name, "b");
  EXPECT_TRUE(p.inputs[3].shape.empty());
  EXPECT_EQ(p.inputs[3].dtype, DType::kBF16);
  EXPECT_TRUE(p.xs.empty());
}

TEST_F(ConfigProgramTest, ExactlyOneOfModelOrProgram) {
  EXPECT_EQ(LoadError(std::string(kScanCarry) + "model: llama2-7b\n"),
            "FILE:1:1: expected exactly one of 'model', 'program', 'program_hlo' or 'megatron'");
  EXPECT_EQ(LoadError("device: a100-sxm-80gb\n"),
            "FILE:1:1: expected exactly one of 'model', 'program', 'program_hlo' or 'megatron'");
  // A model run still loads without a program.
  absl::StatusOr<RunSpec> r =
      LoadRunSpec(Run("device: a100-sxm-80gb\nmodel: llama2-7b\n"), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->program.present);
}

TEST_F(ConfigProgramTest, UnknownKeys) {
  EXPECT_EQ(LoadError(Edit("dtype: f32, donate: true}", "donte: true}")),
            "FILE:9:28: program.inputs.w1: unknown key 'donte' (did you mean "
            "'donate'?)");
  EXPECT_EQ(LoadError(Edit("  loss: loss\n", "  los: loss\n")),
            "FILE:23:3: program: unknown key 'los' (did you mean 'loss'?)");
  EXPECT_EQ(LoadError(Edit("    xs: {x: X}", "    xz: {x: X}")),
            "FILE:14:5: program.scan: unknown key 'xz' (did you mean 'xs'?)");
  EXPECT_EQ(LoadError(Edit("{op: sum, out: zval", "{ops: sum, out: zval")),
            "FILE:18:10: program.scan.body[2]: unknown key 'ops' (did you mean "
            "'op'?)");
}

TEST_F(ConfigProgramTest, TypeErrors) {
  EXPECT_EQ(LoadError(Edit("[1, 1024]", "[1, 0]")),
            "FILE:9:21: program.inputs.w1.shape: expected a dim (an integer >= "
            "1 or trip_count), got '0'");
  EXPECT_EQ(LoadError(Edit("[1, 1024]", "1024")),
            "FILE:9:17: program.inputs.w1.shape: expected a sequence of dims "
            "such as [trip_count, 1024], got '1024'");
  EXPECT_EQ(LoadError(Edit("    w1: {shape: [1, 1024], dtype: f32, donate: true}",
                           "    w1: {dtype: f32}")),
            "FILE:9:9: program.inputs.w1.shape: missing required key");
  EXPECT_EQ(LoadError(Edit("dtype: f32, donate: true}", "dtype: f64}")),
            "FILE:9:35: program.inputs.w1.dtype: expected a dtype (f32, bf16, "
            "f16, f8, i32, i64, u8, pred), got 'f64'");
  EXPECT_EQ(LoadError(Edit("{op: sum,", "{op: max,")),
            "FILE:18:14: program.scan.body[2].op: expected one of "
            "matmul|mul|add|sum|scale, got 'max'");
  EXPECT_EQ(LoadError(Edit("  grad: [w1, w2]\n", "")),
            "FILE:7:3: program.grad: missing required key");
  EXPECT_EQ(LoadError(Edit("  grad: [w1, w2]", "  grad: []")),
            "FILE:24:9: program.grad: expected at least one input name");
  EXPECT_EQ(LoadError(Edit("    carry_out: {w1: w1_next, w2: w2_next, loss: "
                           "loss_next}\n",
                           "")),
            "FILE:13:5: program.scan.carry_out: missing required key");
  EXPECT_EQ(LoadError(Edit("  trip_count: 4\n", "")),
            "FILE:4:3: loop.trip_count: missing required key");
}

TEST_F(ConfigProgramTest, SemanticErrors) {
  // carry init
  EXPECT_EQ(LoadError(Edit("loss: zero}", "loss: one}")),
            "FILE:13:35: program.scan.carry.loss: expected an input name (w1, "
            "w2, X) or zero, got 'one'");
  // xs
  EXPECT_EQ(LoadError(Edit("{x: X}", "{x: Y}")),
            "FILE:14:13: program.scan.xs.x: expected an input name (w1, w2, X), "
            "got 'Y'");
  EXPECT_EQ(LoadError(Edit("{x: X}", "{x: w1}")),
            "FILE:14:13: program.scan.xs.x: expected an input whose shape "
            "starts with trip_count, got 'w1' (shape [1, 1024])");
  EXPECT_EQ(LoadError(Edit("{x: X}", "{w1: X}")),
            "FILE:14:10: program.scan.xs.w1: 'w1' is already a carry name");
  // body in
  EXPECT_EQ(LoadError(Edit("in: [h, w2]", "in: [z, w2]")),
            "FILE:17:35: program.scan.body[1].in: expected a carry, xs, const or "
            "earlier out name (w1, w2, loss, x, h), got 'z'");
  EXPECT_EQ(LoadError(Edit("in: [x, w1]", "in: [X, w1]")),
            "FILE:16:35: program.scan.body[0].in: expected a carry, xs, const or "
            "earlier out name (w1, w2, loss, x), got 'X'");
  // out
  EXPECT_EQ(LoadError(Edit("out: z,", "out: h,")),
            "FILE:17:27: program.scan.body[1].out: 'h' is already the out of "
            "body[0]");
  EXPECT_EQ(LoadError(Edit("out: z,", "out: w2,")),
            "FILE:17:27: program.scan.body[1].out: 'w2' shadows a carry name");
  EXPECT_EQ(LoadError(Edit("out: z,", "out: x,")),
            "FILE:17:27: program.scan.body[1].out: 'x' shadows an xs name");
  // arity
  EXPECT_EQ(LoadError(Edit("in: [h, w2]", "in: [h]")),
            "FILE:17:34: program.scan.body[1].in: matmul takes 2 inputs, got 1");
  EXPECT_EQ(LoadError(Edit("in: [z]", "in: [z, h]")),
            "FILE:18:34: program.scan.body[2].in: sum takes 1 input, got 2");
  // carry_out
  EXPECT_EQ(LoadError(Edit("loss: loss_next}", "los: loss_next}")),
            "FILE:22:43: program.scan.carry_out: expected the carry names (w1, "
            "w2, loss) as keys, got 'los'");
  EXPECT_EQ(LoadError(Edit(", loss: loss_next}", "}")),
            "FILE:22:16: program.scan.carry_out: missing carry 'loss'");
  EXPECT_EQ(LoadError(Edit("w2: w2_next", "w2: X")),
            "FILE:22:34: program.scan.carry_out.w2: expected a body out or "
            "carry name (h, z, zval, w1_next, w2_next, loss_next, w1, w2, "
            "loss), got 'X'");
  // loss, grad
  EXPECT_EQ(LoadError(Edit("  loss: loss", "  loss: zval")),
            "FILE:23:9: program.loss: expected a carry name (w1, w2, loss), "
            "got 'zval'");
  EXPECT_EQ(LoadError(Edit("grad: [w1, w2]", "grad: [w1, x]")),
            "FILE:24:14: program.grad: expected an input name (w1, w2, X), got "
            "'x'");
  EXPECT_EQ(LoadError(Edit("grad: [w1, w2]", "grad: [w1, w1]")),
            "FILE:24:14: program.grad: 'w1' is listed twice");
  // reserved input name
  EXPECT_EQ(LoadError(Edit("    X: {", "    zero: {")),
            "FILE:11:5: program.inputs.zero: 'zero' is reserved (a scalar 0 in "
            "scan.carry); choose another input name");
}

TEST_F(ConfigProgramTest, SetOverrides) {
  absl::StatusOr<RunSpec> r = LoadRunSpec(
      Run(kScanCarry), {"program.inputs.w1.donate=false", "loop.trip_count=2",
                        "program.inputs.X.dtype=bf16"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->program.inputs[0].donate);
  EXPECT_TRUE(r->program.inputs[1].donate);
  EXPECT_EQ(r->program.inputs[2].dtype, DType::kBF16);
  EXPECT_EQ(r->loop.trip_count, 2);

  EXPECT_EQ(LoadError(kScanCarry, {"program.nosuch=1"}),
            "--set program.nosuch=1: program: unknown key 'nosuch'");
  EXPECT_EQ(LoadError(kScanCarry, {"program.grd=[w1]"}),
            "--set program.grd=[w1]: program: unknown key 'grd' (did you mean "
            "'grad'?)");
  EXPECT_EQ(LoadError(kScanCarry, {"program.inputs.w1.donte=false"}),
            "--set program.inputs.w1.donte=false: program.inputs.w1: unknown "
            "key 'donte' (did you mean 'donate'?)");
  EXPECT_EQ(LoadError(kScanCarry, {"program.scan.body.0.op=add"}),
            "--set program.scan.body.0.op=add: program.scan.body: is a "
            "sequence (set it whole); it has no key '0'");
  EXPECT_EQ(LoadError(kScanCarry, {"loop.trip_count=-1"}),
            "--set loop.trip_count=-1: loop.trip_count: expected an integer >= "
            "0, got '-1'");
}

}  // namespace
}  // namespace gpusim::program_parse_test
