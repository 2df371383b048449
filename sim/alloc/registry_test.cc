// The allocator registry: options read once into typed structs, typed
// parameter docs for every entry, one unknown-name message.
#include <string>

#include "gtest/gtest.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/bfc_options.h"

namespace gpusim::registry_test {
namespace {

TEST(AllocatorRegistryTest, OptionsAreParsedOnceIntoTypedStructs) {
  absl::StatusOr<AllocatorConfig> c =
      ParseAllocator({"bfc", {{"mem_fraction", "0.9"}, {"preallocate", "false"}}});
  ASSERT_TRUE(c.ok()) << c.status();
  const BfcOptions* o = c->options_as<BfcOptions>();
  ASSERT_NE(o, nullptr);
  EXPECT_DOUBLE_EQ(o->mem_fraction, 0.9);
  EXPECT_FALSE(o->preallocate);
  EXPECT_EQ(c->options_as<int64_t>(), nullptr);
  auto a = BuildAllocator(*c, Bytes(1LL << 30));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->name(), "bfc");
  // Members of a composite are parsed with it: a bad member option is an
  // error before any allocator is built.
  absl::StatusOr<AllocatorConfig> bad = ParseAllocator({"best_of", {{"members", "bfc{mem_fraction=2},ideal"}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "allocator.members[0] (bfc): allocator.mem_fraction: must be in (0, 1]");
}

TEST(AllocatorRegistryTest, EveryEntryDeclaresTypedParameters) {
  for (const AllocatorInfo& a : ListAllocators()) {
    EXPECT_FALSE(a.doc.empty()) << a.name;
    for (const ParamDoc& p : a.params) {
      EXPECT_EQ(p.name.rfind("allocator.", 0), 0u) << a.name << " " << p.name;
      EXPECT_FALSE(p.type.empty()) << p.name;
      EXPECT_FALSE(p.doc.empty()) << p.name;
    }
  }
  absl::StatusOr<AllocatorConfig> c = ParseAllocator({"best_fitt", {}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(std::string(c.status().message()).rfind(
                "allocator.impl: unknown allocator 'best_fitt' (did you mean 'best_fit'?); available: best_fit", 0),
            0u)
      << c.status();
}

// Issue 11: each entry's parameter docs are the one list of its keys:
// every documented key is accepted (its value may still be refused), and
// any other is refused naming the documented ones.
TEST(AllocatorRegistryTest, ParameterDocsAreTheKeysEachEntryTakes) {
  for (const AllocatorInfo& a : ListAllocators()) {
    std::vector<std::string> keys;
    for (const ParamDoc& p : a.params) {
      const std::string key = p.name.substr(10);
      keys.push_back(key);
      absl::StatusOr<AllocatorConfig> c = ParseAllocator({a.name, {{key, p.default_value}}});
      if (!c.ok()) {
        EXPECT_EQ(c.status().message().find("unknown option"), std::string::npos) << c.status();
      }
    }
    absl::StatusOr<AllocatorConfig> c = ParseAllocator({a.name, {{"no_such_key", "1"}}});
    ASSERT_FALSE(c.ok()) << a.name;
    EXPECT_NE(c.status().message().find("allocator.no_such_key:"), std::string::npos) << c.status();
    for (const std::string& k : keys) EXPECT_NE(c.status().message().find(k), std::string::npos) << c.status();
  }
}

// A spec parsed once (ParseAllocatorOptions) carries its typed options;
// the error of a bad one names where it was written.
TEST(AllocatorRegistryTest, RunSpecHoldsTheParsedOptions) {
  RunSpec run;
  run.allocator = AllocatorSpec("bfc", {{"mem_fraction", "0.5"}});
  ASSERT_TRUE(ParseAllocatorOptions(&run).ok());
  ASSERT_NE(run.allocator.typed, nullptr);
  absl::StatusOr<AllocatorConfig> c = ParseAllocator(run.allocator);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->options_as<BfcOptions>()->mem_fraction, 0.5);
  run.allocator.options["mem_fraction"] = "2";  // no longer what was parsed: parsed again
  run.written["allocator.mem_fraction"] = "run.yaml:7:17";
  EXPECT_FALSE(ParseAllocator(run.allocator).ok());
  absl::Status st = ParseAllocatorOptions(&run);
  EXPECT_EQ(st.message(), "run.yaml:7:17: allocator.mem_fraction: must be in (0, 1]");
}

}  // namespace
}  // namespace gpusim::registry_test
