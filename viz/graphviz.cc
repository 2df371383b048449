#include "viz/graphviz.h"

#include <gvc.h>

#include <cstring>
#include <deque>
#include <map>
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

// Note [Deterministic Graphviz IDs]
// cgraph's default ID discipline (lib/cgraph/id.c, idmap) makes a named
// object's ID the address of its interned name string (agstrdup), and an
// anonymous one's a process-wide static counter; a graph's subgraphs are
// kept ordered by ID (lib/cgraph/graph.c, Ag_subgraph_id_disc), and dot's
// layout walks them in that order (agfstsubg/agnxtsubg when it ranks and
// positions clusters). So the clusters' order, and with it the layout, went
// with the heap: `dataflow.svg` came out in 2-3 variants over 8 identical
// runs. This discipline numbers names in the order the parser first sees
// them (even IDs) and anonymous objects per graph (odd IDs), so the same DOT
// text always gives the same IDs, the same subgraph order and the same
// layout, in any process and on any call.
struct IdState {
  std::map<std::string, IDTYPE, std::less<>> ids;
  std::map<IDTYPE, char*> names;  // into `storage`
  std::deque<std::string> storage;
  IDTYPE next_named = 2, next_anonymous = 1;
};

void* IdOpen(Agraph_t*, Agdisc_t*) { return new IdState; }

long IdMap(void* state, int, char* str, IDTYPE* id, int createflag) {
  auto* s = static_cast<IdState*>(state);
  if (str == nullptr) {
    *id = s->next_anonymous;
    s->next_anonymous += 2;
    return 1;
  }
  auto it = s->ids.find(std::string_view(str));
  if (it != s->ids.end()) {
    *id = it->second;
    return 1;
  }
  if (!createflag) return 0;
  *id = s->next_named;
  s->next_named += 2;
  s->storage.emplace_back(str);
  s->ids.emplace(s->storage.back(), *id);
  s->names.emplace(*id, s->storage.back().data());
  return 1;
}

long IdAlloc(void*, int, IDTYPE) { return 0; }  // no caller-chosen IDs, as the default
void IdFree(void*, int, IDTYPE) {}                // names live until the graph closes
char* IdPrint(void* state, int, IDTYPE id) {
  auto* s = static_cast<IdState*>(state);
  auto it = s->names.find(id);
  return it == s->names.end() ? nullptr : it->second;
}
void IdClose(void* state) { delete static_cast<IdState*>(state); }
void IdRegister(void*, int, void*) {}

Agiddisc_t kSequentialIds = {IdOpen, IdMap, IdAlloc, IdFree, IdPrint, IdClose, IdRegister};

// Reads DOT text from memory a line at a time (what agmemread does).
struct MemReader {
  const char* data;
  size_t len, cur;
};

int MemRead(void* chan, char* buf, int bufsize) {
  auto* r = static_cast<MemReader*>(chan);
  if (bufsize <= 0 || r->cur >= r->len) return 0;
  int n = 0;
  char c;
  do {
    c = r->data[r->cur++];
    buf[n++] = c;
  } while (c != '\n' && n < bufsize && r->cur < r->len);
  return n;
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
  static Agiodisc_t io = {MemRead, AgIoDisc.putstr, AgIoDisc.flush};
  static Agdisc_t disc = {&AgMemDisc, &kSequentialIds, &io};
  MemReader reader{dot.data(), dot.size(), 0};
  Agraph_t* g = agread(&reader, &disc);
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
