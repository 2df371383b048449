// Writing the charts and the HTML report: file names, PNG rendering (all
// through Graphviz: DOT rendered directly, the hand-written SVGs through
// Graphviz's rsvg image loader, see viz/graphviz.h), and the report page.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/file_util.h"
#include "sim/base/status.h"
#include "sim/report/explain.h"
#include "viz/alloc_source.h"
#include "viz/graphviz.h"
#include "viz/report_script.h"
#include "viz/step_view.h"
#include "viz/svg.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

using viz_internal::HumanBytes;
using viz_internal::HumanTime;
using viz_internal::XmlEscape;

absl::Status EnsureDir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(dir, ": exists and is not a directory"));
  }
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot create directory: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Writes NAME.svg and, if asked, NAME.png rasterised from it.
absl::Status WritePlot(const std::string& dir, const std::string& name, const std::string& svg, bool png) {
  const std::string svg_path = absl::StrCat(dir, "/", name, ".svg");
  RETURN_IF_ERROR(WriteFileAtomically(svg_path, svg));
  if (!png) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string data, RasterizeSvgFile(svg_path));
  return WriteFileAtomically(absl::StrCat(dir, "/", name, ".png"), data);
}

// The <svg> element of an SVG document (XML declaration, DOCTYPE and
// comments before it dropped), for inlining in HTML.
std::string InlineSvg(const std::string& svg) {
  const size_t at = svg.find("<svg");
  return at == std::string::npos ? svg : svg.substr(at);
}

std::string Row(std::string_view key, std::string_view value, std::string_view exact = "") {
  return absl::StrCat("<tr><th>", XmlEscape(key), "</th><td>", XmlEscape(value), "</td><td class=\"exact\">",
                      XmlEscape(exact), "</td></tr>\n");
}

// Graphviz draws PNGs at 96 dpi; a large graph (a decoder layer's ~120 ops)
// would be ~10,000 px wide and take seconds to rasterise, so the PNG is
// scaled down to fit this many inches (≤ 2,880 px); two lowerings side by
// side get a wider box (≤ 4,608 px). The SVG keeps full size.
constexpr int kMaxPngInches = 30;
constexpr int kMaxPngInchesWide = 48;

// `dot` with a graph-level size limit added after its opening line.
std::string CapSize(const std::string& dot, int width_inches, int height_inches) {
  const size_t eol = dot.find('\n');
  if (eol == std::string::npos) return dot;
  return absl::StrCat(dot.substr(0, eol + 1), "  graph [size=\"", width_inches, ",", height_inches, "\"];\n",
                      dot.substr(eol + 1));
}

// The call stack the buffer's alloc recorded, innermost first, as a small
// list under its origin; "" when none.
std::string StackHtml(const StepReport& r, BufferId id) {
  const std::vector<std::string> frames = viz_internal::AllocFrames(r, id, 6);
  if (frames.empty()) return "";
  std::string out = "<div class=\"note\">";
  for (size_t k = 0; k < frames.size(); ++k) absl::StrAppend(&out, k ? "<br>" : "", XmlEscape(frames[k]));
  return out + "</div>";
}

// The buffer's source (the user's frame or the recorder's op, its module,
// the op's facts, what is unknown) as a line under its origin; "" when the
// trace names none.
std::string SourceHtml(const std::vector<viz_internal::AllocSource>& sources, BufferId id) {
  if (id < 0 || static_cast<size_t>(id) >= sources.size() || sources[static_cast<size_t>(id)].label.empty()) return "";
  return absl::StrCat("<div class=\"source\">",
                      XmlEscape(absl::StrJoin(viz_internal::SourceLines(sources[static_cast<size_t>(id)]), "; ")),
                      "</div>");
}

constexpr char kStyle[] = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px; color: #1a1a1a; max-width: 1460px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num, td.exact { text-align: right; font-variant-numeric: tabular-nums; color: #555; }
.fits { color: #2a7d2a; font-weight: bold; } .oom { color: #c00000; font-weight: bold; }
figure { margin: 0; overflow-x: auto; } figure svg { max-width: 100%; height: auto; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
.note { color: #555; font-size: 13px; }
.source { font-size: 13px; }
)";


}  // namespace

absl::Status WriteCharts(const StepReport& r, const std::string& dir, const VizOptions& o) {
  RETURN_IF_ERROR(EnsureDir(dir));
  RETURN_IF_ERROR(WritePlot(dir, "memory_map", MemoryMapSvg(r, o), o.png));
  RETURN_IF_ERROR(WritePlot(dir, "lifetimes", LifetimesSvg(r, o), o.png));
  RETURN_IF_ERROR(WritePlot(dir, "timeline", TimelineSvg(r, o), o.png));
  RETURN_IF_ERROR(WritePlot(dir, "active_memory", ActiveMemorySvg(r, o), o.png));
  const std::string dot = DataflowDot(r, o);
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/dataflow.dot", dot));
  ASSIGN_OR_RETURN(std::string svg, RenderDot(dot, "svg"));
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/dataflow.svg", svg));
  if (o.png) {
    ASSIGN_OR_RETURN(std::string png, RenderDot(
        CapSize(dot, o.other_loop_mode != nullptr ? kMaxPngInchesWide : kMaxPngInches, kMaxPngInches), "png"));
    RETURN_IF_ERROR(WriteFileAtomically(dir + "/dataflow.png", png));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> HtmlReport(const StepReport& r, const VizOptions& o) {
  const bool xla = r.semantics.accounting == Accounting::kXlaMemoryAnalysis;
  const double s = r.sim.step_time.seconds();
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  absl::StrAppend(&h, "<title>gpusim — ", XmlEscape(r.program.name), "</title>\n<style>", kStyle,
                  viz_internal::kReportStyle, "</style>\n</head>\n<body>\n");
  absl::StrAppend(&h, "<h1>", XmlEscape(r.program.name), " on ", XmlEscape(r.spec.device.name), "</h1>\n",
                  "<p class=\"note\">", XmlEscape(r.spec.device.description), "; ",
                  xla ? "XLA (jax) static buffer assignment" : "eager (PyTorch-like) semantics", "; ",
                  r.param_count > 0 ? absl::StrCat(WithCommas(r.param_count), " parameters; ") : "",
                  "allocator ", XmlEscape(r.sim.allocator_name), ". Sizes: GiB = 2<sup>30</sup> B.</p>\n");

  h += "<h2>Summary</h2>\n<table>\n";
  auto bytes_row = [&](std::string_view k, Bytes b) { h += Row(k, HumanBytes(b), absl::StrCat(WithCommas(b.value()), " B")); };
  if (xla) {
    bytes_row("argument", r.argument);
    bytes_row("output", r.output);
    bytes_row("alias", r.alias);
    h += Row("temp", absl::StrCat(HumanBytes(r.temp), " (packed ", r.heap_algorithm, ")"),
             absl::StrCat(WithCommas(r.temp.value()), " B"));
    bytes_row("temp live peak (no fragmentation)", r.temp_live_peak);
  }
  bytes_row(xla ? "peak = argument + output − alias + temp" : "peak (live)", r.peak);
  bytes_row("capacity", r.capacity);
  // Note [Verdict] (sim/base/verdict.h): the line `gpusim run` prints first.
  const Verdict& v = r.verdict;
  const char* cls = v.kind == Verdict::Kind::kFits ? "fits" : v.fits() ? "warn" : "oom";
  absl::StrAppend(&h, "<tr><th>verdict</th><td class=\"", cls, "\">", XmlEscape(v.Line()),
                  "</td><td class=\"exact\">", XmlEscape(absl::StrCat(WithCommas(v.need.value()), " B")),
                  "</td></tr>\n");
  const StepReport::JaxArena& arena = r.jax_arena;
  if (arena.checked) {
    absl::StrAppend(
        &h, "<tr><th>JAX arena</th><td class=\"", arena.fits ? "fits" : "oom", "\">",
        XmlEscape(absl::StrFormat("%s: %s, %s mem_fraction %.2f of the device's total = %s%s",
                                  arena.fits ? "the step fits" : "the step does NOT fit", arena.allocator,
                                  arena.preallocate ? "preallocated," : "growing to", arena.mem_fraction,
                                  HumanBytes(arena.arena),
                                  arena.fits || arena.fitting_fraction == 0
                                      ? std::string()
                                      : absl::StrFormat("; fits at XLA_PYTHON_CLIENT_MEM_FRACTION=%.2f",
                                                        arena.fitting_fraction))),
        "</td><td class=\"exact\">", XmlEscape(absl::StrCat(WithCommas(arena.arena.value()), " B")), "</td></tr>\n");
  }
  if (r.sim.oom.happened) {
    // Why it failed: the request against what the allocator still had.
    const OomInfo& oom = r.sim.oom;
    const Bytes room = oom.capacity - oom.reserved;
    std::string why = absl::StrCat("allocating ", oom.buffer, " (", HumanBytes(oom.requested), ") at ",
                                   HumanTime(oom.time), " with ", HumanBytes(oom.live), " live and ",
                                   HumanBytes(oom.reserved), " reserved of ", HumanBytes(oom.capacity), ": ");
    if (oom.live + oom.requested > oom.capacity) {
      absl::StrAppend(&why, "the live bytes alone would exceed the capacity by ",
                      HumanBytes(oom.live + oom.requested - oom.capacity));
    } else {
      absl::StrAppend(&why, "no cached block holds it and a new segment does not fit in the ", HumanBytes(room),
                      " not yet reserved (", HumanBytes(oom.reserved - oom.live),
                      " reserved but not live: fragmentation)");
    }
    absl::StrAppend(&h, "<tr><th>out of memory</th><td class=\"oom\">", XmlEscape(why), "</td><td class=\"exact\">",
                    XmlEscape(absl::StrCat(WithCommas(oom.requested.value()), " B requested")), "</td></tr>\n");
  }
  h += Row("allocator peak allocated / reserved",
           absl::StrCat(HumanBytes(r.sim.allocator.peak_allocated), " / ", HumanBytes(r.sim.allocator.peak_reserved)));
  h += Row("step time", HumanTime(r.sim.step_time), absl::StrCat(WithCommas(r.sim.step_time.ns()), " ns"));
  h += Row("compute (of which recompute)",
           absl::StrCat(HumanTime(r.sim.compute_busy), " (", HumanTime(r.sim.recompute_busy), ")"));
  h += Row("communication (exposed)",
           absl::StrCat(HumanTime(r.sim.collective_busy), " (", HumanTime(r.sim.exposed_communication), ")"));
  h += Row("host transfers", HumanTime(r.sim.copy_busy));
  if (s > 0) {
    h += Row("model TFLOP/s per device", absl::StrFormat("%.1f", r.sim.model_flops / s / 1e12));
    if (r.tokens_per_step > 0) h += Row("tokens/s per device", absl::StrFormat("%.0f", r.tokens_per_step / s));
  }
  h += "</table>\n";

  h += "<p id=\"hover-info\">hover a buffer to find it in every chart</p>\n";
  h += "<h2>Memory timeline</h2>\n<p class=\"note\">Wheel to zoom, drag to pan, double-click to reset.</p>\n"
       "<figure class=\"zoomable\" id=\"timeline\">" + InlineSvg(TimelineSvg(r, o)) + "</figure>\n";
  h += "<h2>Active memory timeline</h2>\n<p class=\"note\">The bytes live over time, stacked by role, or by "
       "allocation in allocation order as memory_viz's Active Memory Timeline draws them (a freed block's band "
       "ends and the ones above drop), coloured as the memory map. Hover a band to find its buffer.</p>\n"
       "<figure class=\"zoomable\" id=\"active-memory\">" + InlineSvg(ActiveMemorySvg(r, o)) + "</figure>\n";
  h += "<h2>Memory map</h2>\n<p class=\"note\">Each buffer is a rectangle over its lifetime (x) and address (y)";
  h += xla ? "; temps at their packed heap offsets above the arguments and outputs."
           : "; addresses as the replayed allocator placed them (first fit, for display, with the ideal one).";
  h += " Hover a block to find its buffer in the other charts and the table; wheel to zoom, drag to pan, "
       "double-click to reset.</p>\n<figure class=\"zoomable\" id=\"memory-map\">" + InlineSvg(MemoryMapSvg(r, o)) +
       "</figure>\n";
  h += "<h2>Buffer lifetimes</h2>\n<figure id=\"lifetimes\">" + InlineSvg(LifetimesSvg(r, o)) + "</figure>\n";
  h += o.other_loop_mode != nullptr ? "<h2>Dataflow of one loop iteration, rolled and unrolled</h2>\n"
                                    : "<h2>Dataflow of one loop iteration</h2>\n";
  auto dataflow = RenderDot(DataflowDot(r, o), "svg");
  if (dataflow.ok()) {
    h += "<figure>" + InlineSvg(*dataflow) + "</figure>\n";
  } else {
    absl::StrAppend(&h, "<p class=\"oom\">Graphviz could not render the dataflow graph: ",
                    XmlEscape(std::string(dataflow.status().message())), "</p>\n");
  }

  // Buffers at the peak, each with its source (viz/alloc_source.h) and
  // swatch as the memory map colours it.
  const std::vector<PeakBuffer> top = BuffersAtPeak(r);
  const std::vector<viz_internal::AllocSource> sources = viz_internal::AllocSources(r);
  const VizColorBy by = viz_internal::ResolveColorBy(r, sources, o.color_by);
  absl::StrAppend(&h, "<h2>Buffers live at the ", xla ? "temp peak" : "peak", "</h2>\n<table>\n",
                  "<tr><th>#</th><th>size</th><th>role</th><th>buffer</th><th>why it exists</th>"
                  "<th>live from → to</th></tr>\n");
  constexpr size_t kTop = 30;
  Bytes rest(0);
  for (size_t i = 0; i < top.size(); ++i) {
    const PeakBuffer& b = top[i];
    if (i >= kTop) {
      rest += b.bytes;
      continue;
    }
    absl::StrAppend(&h, "<tr data-b=\"", b.buffer, "\"><td class=\"num\">", i + 1, "</td><td class=\"num\" title=\"", WithCommas(b.bytes.value()),
                    " B\">", XmlEscape(HumanBytes(b.bytes)), "</td><td><span class=\"swatch\" style=\"background:",
                    viz_internal::BufferColor(r, sources, by, b.buffer), "\"></span>", XmlEscape(RoleName(b.role)),
                    "</td><td>", XmlEscape(b.name), "</td><td>", XmlEscape(b.origin), SourceHtml(sources, b.buffer),
                    StackHtml(r, b.buffer), "</td><td>",
                    XmlEscape(b.from), " → ",
                    XmlEscape(b.to), "</td></tr>\n");
  }
  if (top.size() > kTop) {
    absl::StrAppend(&h, "<tr><td></td><td class=\"num\">", XmlEscape(HumanBytes(rest)), "</td><td colspan=\"4\">… and ",
                    WithCommas(static_cast<int64_t>(top.size() - kTop)), " smaller buffers</td></tr>\n");
  }
  absl::StrAppend(&h, "</table>\n<p class=\"note\">Generated by gpusim. Self-contained: no network; the one script "
                  "below adds zoom, pan and hover.</p>\n"
                  "<script>", viz_internal::kReportScript, "</script>\n</body>\n</html>\n");
  return h;
}

absl::Status WriteHtmlReport(const StepReport& r, const std::string& dir, const VizOptions& o) {
  RETURN_IF_ERROR(EnsureDir(dir));
  ASSIGN_OR_RETURN(std::string html, HtmlReport(r, o));
  return WriteFileAtomically(dir + "/report.html", html);
}

}  // namespace gpusim
