#include "viz/graphviz.h"

#include <gvc.h>

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace gpusim {
namespace {

std::mutex& GraphvizMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

// Graphviz errors and warnings, collected while the lock is held.
std::string& ErrorText() {
  static std::string* text = new std::string;
  return *text;
}

int CollectError(char* msg) {
  ErrorText() += msg;
  return 0;
}

// The one context, created on first use: gvContext() loads the plugins
// listed in Graphviz's config6a (layout engines, cairo/png, rsvg).
GVC_t* Context() {
  static GVC_t* gvc = gvContext();
  return gvc;
}

struct GraphCloser {
  void operator()(Agraph_t* g) const { agclose(g); }
};
using GraphPtr = std::unique_ptr<Agraph_t, GraphCloser>;

// REQUIRES: GraphvizMutex() held.
absl::StatusOr<GraphPtr> Parse(std::string_view dot) {
  ErrorText().clear();
  agseterrf(&CollectError);
  agseterr(AGWARN);  // collect warnings too (kept off stderr); only a null graph fails
  const std::string text(dot);
  Agraph_t* g = agmemread(text.c_str());
  if (g == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("DOT does not parse: ", ErrorText()));
  }
  return GraphPtr(g);
}

// REQUIRES: GraphvizMutex() held.
absl::StatusOr<std::string> RenderLocked(std::string_view dot, std::string_view format) {
  GVC_t* gvc = Context();
  if (gvc == nullptr) return absl::InternalError("Graphviz: cannot create a context");
  auto g = Parse(dot);
  if (!g.ok()) return g.status();
  if (gvLayout(gvc, g->get(), "dot") != 0) {
    const std::string why = ErrorText();
    gvFreeLayout(gvc, g->get());  // a failed layout may have attached partial state
    return absl::InternalError(absl::StrCat("Graphviz layout failed: ", why));
  }
  char* data = nullptr;
  unsigned int length = 0;
  const std::string fmt(format);
  const int rc = gvRenderData(gvc, g->get(), fmt.c_str(), &data, &length);
  std::string out;
  if (rc == 0 && data != nullptr) out.assign(data, length);
  if (data != nullptr) gvFreeRenderData(data);
  gvFreeLayout(gvc, g->get());
  if (rc != 0 || out.empty()) {
    return absl::InternalError(absl::StrCat("Graphviz cannot render format '", fmt, "': ", ErrorText()));
  }
  return out;
}

}  // namespace

absl::Status CheckDot(std::string_view dot) {
  std::lock_guard<std::mutex> lock(GraphvizMutex());
  auto g = Parse(dot);
  return g.status();
}

absl::StatusOr<std::string> RenderDot(std::string_view dot, std::string_view format) {
  std::lock_guard<std::mutex> lock(GraphvizMutex());
  return RenderLocked(dot, format);
}

absl::StatusOr<std::string> RasterizeSvgFile(const std::string& svg_path) {
  if (svg_path.find('"') != std::string::npos || svg_path.find('\\') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(svg_path, ": cannot rasterise a path with quotes"));
  }
  // dpi 72: Graphviz sizes an image node in points from the SVG's px size,
  // so 72 dpi keeps one SVG px per PNG px.
  const std::string dot = absl::StrCat(
      "digraph raster { graph [pad=0, margin=0, dpi=72];\n"
      "  node [shape=plaintext, label=\"\", margin=0, width=0, height=0, image=\"",
      svg_path, "\"];\n  svg;\n}\n");
  std::lock_guard<std::mutex> lock(GraphvizMutex());
  auto png = RenderLocked(dot, "png");
  if (!png.ok()) return png.status();
  if (ErrorText().find("No or improper image") != std::string::npos) {
    return absl::InternalError(absl::StrCat(svg_path, ": Graphviz could not load the SVG: ", ErrorText()));
  }
  return png;
}

}  // namespace gpusim
