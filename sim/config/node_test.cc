#include "sim/config/node.h"

#include "gtest/gtest.h"
#include "sim/config/schema.h"

namespace gpusim::node_test {
namespace {

TEST(ConfigNodeTest, KeepsOrderAndLocations) {
  absl::StatusOr<ConfigNode> n =
      ParseYamlString("b: 1\na:\n  x: [p, q]\nc:\n", "f.yaml");
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_TRUE(n->is_map());
  ASSERT_EQ(n->entries().size(), 3u);
  EXPECT_EQ(n->entries()[0].key, "b");
  EXPECT_EQ(n->entries()[1].key, "a");
  EXPECT_EQ(n->entries()[1].key_location.ToString(), "f.yaml:2:1");
  const ConfigNode* x = n->Find("a")->Find("x");
  ASSERT_NE(x, nullptr);
  ASSERT_TRUE(x->is_sequence());
  EXPECT_EQ(x->items()[1].scalar(), "q");
  EXPECT_EQ(x->items()[1].location().ToString(), "f.yaml:3:10");
  EXPECT_TRUE(n->Find("c")->is_null());
  EXPECT_EQ(n->Find("c")->location().ToString(), "f.yaml:4:1");
}

TEST(ConfigNodeTest, SyntaxErrorHasFileLineCol) {
  absl::StatusOr<ConfigNode> n = ParseYamlString("a: 1\nb: [1, 2\n", "f.yaml");
  ASSERT_FALSE(n.ok());
  std::string msg(n.status().message());
  EXPECT_EQ(msg.rfind("f.yaml:", 0), 0u) << msg;
  EXPECT_NE(msg.find("end of sequence"), std::string::npos) << msg;
}

TEST(ConfigNodeTest, DuplicateKeyIsAnError) {
  absl::StatusOr<ConfigNode> n = ParseYamlString("a: 1\nb: 2\na: 3\n", "f.yaml");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(),
            "f.yaml:3:1: duplicate key 'a' (first written at 1:1)");
}

TEST(ConfigNodeTest, LabelReplacesPositions) {
  absl::StatusOr<ConfigNode> n = ParseYamlString("[a, b]", "", "--set x=[a, b]");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->items()[0].location().ToString(), "--set x=[a, b]");
}

TEST(ConfigNodeTest, MissingFileIsNotFound) {
  absl::StatusOr<ConfigNode> n = ParseYamlFile("/nonexistent/x.yaml");
  EXPECT_EQ(n.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(n.status().message(), "/nonexistent/x.yaml: cannot open file: No such file or directory");
}

TEST(ConfigNodeTest, DeepMergeMergesMapsAndReplacesLeaves) {
  ConfigNode base = *ParseYamlString("a: {x: 1, y: 2}\nb: [1]\n", "base");
  ConfigNode over = *ParseYamlString("a: {y: 3, z: 4}\nb: [2, 3]\n", "over");
  DeepMerge(base, over);
  const ConfigNode* a = base.Find("a");
  EXPECT_EQ(a->Find("x")->scalar(), "1");
  EXPECT_EQ(a->Find("y")->scalar(), "3");
  EXPECT_EQ(a->Find("y")->location().file, "over");
  EXPECT_EQ(a->Find("z")->scalar(), "4");
  EXPECT_EQ(a->location().file, "base");
  EXPECT_EQ(base.Find("b")->items().size(), 2u);
}

TEST(ConfigSchemaTest, NearestKey) {
  EXPECT_EQ(internal::EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(internal::NearestKey("mdoe", {"mode", "trip_count"}), "mode");
  EXPECT_EQ(internal::NearestKey("cuda_totl", {"cuda_total", "context_reserve"}),
            "cuda_total");
  EXPECT_EQ(internal::NearestKey("zzzzzzzz", RunSchema().Keys()), "");
  EXPECT_EQ(internal::NearestKey("ab", {"xy"}), "xy");  // 2 edits: limit is 2
  EXPECT_EQ(internal::NearestKey("ab", {"xyz"}), "");
}

}  // namespace
}  // namespace gpusim::node_test
