// Labels never overprint (issue 18): in the memory map and the lifetimes
// chart of a config and of a replayed snapshot, no two <text> boxes overlap
// (box = FitText's estimate, 0.6 em per code point, one line high). Also:
// a snapshot's lifetimes are drawn over its memory events, not "0 ops".
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/import/import.h"
#include "sim/step/step.h"
#include "viz/viz.h"

namespace gpusim::viz_labels_test {
namespace {

struct TextBox {
  double x0, y0, x1, y1;
  std::string text;
};

std::string Unescape(std::string s) {
  for (auto [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"},
                          {"&quot;", "\""}, {"&#39;", "'"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  }
  return s;
}

std::vector<TextBox> Texts(const std::string& svg) {
  static const std::regex re("<text x=\"([-0-9.]+)\" y=\"([-0-9.]+)\"([^>]*)>([^<]*)</text>");
  static const std::regex size_re("font-size=\"([0-9.]+)\"");
  std::vector<TextBox> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    const std::string attrs = (*it)[3];
    const std::string text = Unescape((*it)[4]);
    if (text.empty() || attrs.find("transform=") != std::string::npos) continue;  // rotated axis titles: beside the ticks
    double font = 11;
    std::smatch m;
    if (std::regex_search(attrs, m, size_re)) font = std::stod(m[1]);
    double chars = 0;
    for (unsigned char c : text) chars += (c & 0xC0) != 0x80 ? 1 : 0;
    const double w = chars * font * 0.6, x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    double left = x;
    if (attrs.find("text-anchor=\"end\"") != std::string::npos) left = x - w;
    if (attrs.find("text-anchor=\"middle\"") != std::string::npos) left = x - w / 2;
    out.push_back({left, y - font * 0.8, left + w, y + font * 0.2, text});
  }
  return out;
}

void ExpectNoOverlap(const std::string& chart, const std::string& svg) {
  const std::vector<TextBox> t = Texts(svg);
  ASSERT_GT(t.size(), 5u) << chart;
  int overlaps = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    for (size_t j = i + 1; j < t.size(); ++j) {
      const TextBox &a = t[i], &b = t[j];
      if (a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 && ++overlaps <= 5) {
        ADD_FAILURE() << chart << ": \"" << a.text << "\" overprints \"" << b.text << "\"";
      }
    }
  }
  EXPECT_EQ(overlaps, 0) << chart;
}

TEST(VizLabels, NoTextOverprintsAnother) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto llama = SimulateStep(*spec);
  ASSERT_TRUE(llama.ok()) << llama.status();
  ExpectNoOverlap("llama7b memory map", MemoryMapSvg(*llama));
  ExpectNoOverlap("llama7b lifetimes", LifetimesSvg(*llama));

  auto recorded = ImportRecordedTrace(GPUSIM_SOURCE_DIR "/traces/recorded/cs336_gpt_training_snapshot.pickle");
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  auto trace = ToNativeTrace(*recorded, {});
  ASSERT_TRUE(trace.ok()) << trace.status();
  RunSpec s;
  auto dev = LoadDeviceSpec("h100-sxm-80gb", "");
  ASSERT_TRUE(dev.ok());
  s.device = *dev;
  s.allocator.impl = "pytorch_caching";
  auto snap = ReportFromTrace(*trace, s);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ExpectNoOverlap("snapshot memory map", MemoryMapSvg(*snap));
  const std::string life = LifetimesSvg(*snap);
  ExpectNoOverlap("snapshot lifetimes", life);
  EXPECT_NE(life.find(" memory events)"), std::string::npos);
  EXPECT_EQ(life.find(" 0 ops)"), std::string::npos);
  EXPECT_NE(life.find("memory event (trace order)"), std::string::npos);
}

}  // namespace
}  // namespace gpusim::viz_labels_test
