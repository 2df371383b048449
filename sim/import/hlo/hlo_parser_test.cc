#include "sim/import/hlo/hlo_parser.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpusim::hlo_parser_test {
namespace {

using ::testing::HasSubstr;

// As XLA prints with operand shapes and % sigils, a signature on every
// computation, /*index=N*/ comments and nested attribute values.
constexpr char kPrinted[] = R"(HloModule jit_f, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (2, {}, must-alias) }, buffer_donor={ (1, {}) }, num_partitions=4, entry_computation_layout={(f32[8]{0}, f32[8]{0}, f32[8]{0})->(f32[8]{0}, f32[8]{0})}

%add.clone (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %x, f32[] %y), metadata={op_name="jit(f)/add" source_file="a, b.py" source_line=3}
}

ENTRY %main.9 (Arg_0.1: f32[8], Arg_1.2: f32[8], Arg_2.3: f32[8]) -> (f32[8], f32[8]) {
  %Arg_0.1 = f32[8]{0} parameter(0), sharding={replicated}
  %Arg_1.2 = f32[8]{0} parameter(1)
  %Arg_2.3 = f32[8]{0:T(128)S(5)} parameter(2)
  %mul = f32[8]{0} multiply(f32[8]{0} %Arg_0.1, f32[8]{0} %Arg_1.2)
  %zero = f32[] constant(0)
  %r = f32[] reduce(f32[8]{0} %mul, f32[] %zero), dimensions={0}, to_apply=%add.clone
  %ar = f32[8]{0} all-reduce(f32[8]{0} %mul), channel_id=1, replica_groups={{0,1},{2,3}}, to_apply=%add.clone
  ROOT %t = (f32[8]{0}, f32[8]{0}) tuple(f32[8]{0} %ar, /*index=1*/f32[8]{0} %Arg_2.3)
}
)";

TEST(HloParserTest, ReadsThePrintedFormat) {
  auto m = ParseHloModule(kPrinted, "f.hlo");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "jit_f");
  EXPECT_EQ(m->num_partitions, 4);
  ASSERT_EQ(m->aliases.size(), 2u);
  EXPECT_EQ(m->aliases[1].output_index, std::vector<int64_t>{1});
  EXPECT_EQ(m->aliases[1].parameter, 2);
  EXPECT_TRUE(m->aliases[1].must_alias);
  EXPECT_EQ(m->buffer_donors, std::vector<int64_t>{1});
  const HloComputation& e = m->entry_computation();
  EXPECT_EQ(e.name, "main.9");
  ASSERT_EQ(e.parameters.size(), 3u);
  EXPECT_EQ(e.instructions[static_cast<size_t>(e.parameters[2])].shape.memory_space, 5);
  const HloInstruction& root = e.instructions[static_cast<size_t>(e.root)];
  EXPECT_EQ(root.opcode, "tuple");
  ASSERT_EQ(root.operands.size(), 2u);
  EXPECT_EQ(e.instructions[static_cast<size_t>(root.operands[1])].name, "Arg_2.3");
  const HloInstruction* ar = nullptr;
  for (const HloInstruction& i : e.instructions) {
    if (i.name == "ar") ar = &i;
  }
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->attr("replica_groups"), "{{0,1},{2,3}}");
  EXPECT_EQ(ar->called.at("to_apply"), std::vector<std::string>{"add.clone"});
  EXPECT_EQ(m->computation("add.clone").instructions.back().attr("metadata"),
            "{op_name=\"jit(f)/add\" source_file=\"a, b.py\" source_line=3}");
}

TEST(HloParserTest, OrdersOperandsFirstAndDefaultsTheRoot) {
  // JAX's unoptimised text has no signatures and no sigils; here a use
  // precedes its definition and there is no ROOT.
  auto m = ParseHloModule(R"(HloModule m
ENTRY main {
  b = f32[2]{0} negate(a)
  a = f32[2]{0} parameter(0)
  c = f32[2]{0} add(b, a)
}
)",
                          "m.hlo");
  ASSERT_TRUE(m.ok()) << m.status();
  const HloComputation& e = m->entry_computation();
  EXPECT_EQ(e.instructions[0].name, "a");
  EXPECT_EQ(e.instructions[static_cast<size_t>(e.root)].name, "c");
}

TEST(HloParserTest, Shapes) {
  auto s = ParseHloShape("(s32[], bf16[4,8]{1,0}, (pred[2]))");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->elements.size(), 3u);
  EXPECT_EQ(s->elements[1].ArrayBytes(), 64);
  EXPECT_EQ(s->elements[2].elements[0].ArrayBytes(), 2);
  EXPECT_EQ(s->ToString(), "(s32[], bf16[4,8], (pred[2]))");
  EXPECT_EQ(ParseHloShape("f32[<=16,2]")->ArrayBytes(), 128);
  EXPECT_THAT(ParseHloShape("f32[?]").status().message(), HasSubstr("unbounded dynamic dimension"));
  EXPECT_THAT(ParseHloShape("q7[2]").status().message(), HasSubstr("unsupported element type 'q7'"));
}

struct BadCase {
  const char* text;
  const char* where;  // "LINE:COL"
  const char* what;
};

TEST(HloParserTest, ErrorsNameLineAndColumn) {
  const BadCase cases[] = {
      {"ENTRY main {\n}\n", "1:1", "expected 'HloModule NAME, ...'"},
      {"HloModule m\nENTRY main {\n  a = f32[2] parameter(0)\n", "2:1", "is not closed with '}'"},
      {"HloModule m\nENTRY main {\n  a f32[2] parameter(0)\n}\n", "3:5", "expected '='"},
      {"HloModule m\nENTRY main {\n  a = f32[2 parameter(0)\n}\n", "3:13", "expected ','"},
      {"HloModule m\nENTRY main {\n  a = f32[2] negate(b)\n}\n", "3:3", "operand 'b' is not defined"},
      {"HloModule m\nENTRY main {\n  a = f32[2] parameter(0)\n  b = f32[2] negate(a), to_apply=nope\n}\n",
       "4:3", "no computation named 'nope'"},
      {"HloModule m\nENTRY main {\n  a = f32[2] parameter(0)\n  a = f32[2] negate(a)\n}\n", "4:3",
       "defined twice"},
      {"HloModule m\nENTRY main {\n  a = f32[2] parameter(1)\n}\n", "2:1", "has no parameter(0)"},
      {"HloModule m\nc {\n  a = f32[2] parameter(0)\n}\n", "4:1", "no ENTRY computation"},
      {"HloModule m, input_output_alias={ {0} (0, {}) }\n", "1:13", "input_output_alias"},
      {"HloModule m\nENTRY main {\n  a = f32[2] parameter(0), metadata={op_name=\"x}\n}\n", "3:46",
       "unterminated string"},
  };
  for (const BadCase& c : cases) {
    auto m = ParseHloModule(c.text, "bad.hlo");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_THAT(m.status().message(), HasSubstr(std::string("bad.hlo:") + c.where)) << c.text;
    EXPECT_THAT(m.status().message(), HasSubstr(c.what)) << c.text;
  }
}

TEST(HloParserTest, MissingFileIsNotFound) {
  auto m = ReadHloModule("/nonexistent/step.hlo");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpusim::hlo_parser_test
