// Graphviz behind a narrow wrapper: parse, lay out and render DOT text
// in-process through libcgraph/libgvc (Debian graphviz 2.42), so no other
// file includes a Graphviz header and the renderer can be swapped (e.g. for
// the `dot` binary as a subprocess) here alone.
//
// Graphviz keeps global state (one GVC_t context with its plugins, a global
// error callback), so every call takes one process-wide lock.
#ifndef GPUSIM_VIZ_GRAPHVIZ_H_
#define GPUSIM_VIZ_GRAPHVIZ_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpusim {

// Parses `dot` with Graphviz's own parser (agread, with the
// deterministic ID discipline of Note [Deterministic Graphviz IDs] in graphviz.cc). InvalidArgument with
// Graphviz's message when it does not parse.
absl::Status CheckDot(std::string_view dot);

// Lays `dot` out with the `dot` engine and renders it: `format` is a Graphviz
// output format such as "svg" or "png" (cairo).
absl::StatusOr<std::string> RenderDot(std::string_view dot, std::string_view format);

// A PNG of the SVG file at `svg_path`, drawn by Graphviz's rsvg image loader
// (a one-node graph whose image is the file). REQUIRES: the file starts with
// an XML declaration (the loader sniffs it). 1 SVG px = 1 PNG px.
absl::StatusOr<std::string> RasterizeSvgFile(const std::string& svg_path);

}  // namespace gpusim

#endif  // GPUSIM_VIZ_GRAPHVIZ_H_
