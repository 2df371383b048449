// A tiny SVG writer for the hand-drawn plots (memory map, lifetimes,
// timeline): shapes appended as text, numbers printed with fixed precision
// so output is deterministic, text XML-escaped.
#ifndef GPUSIM_VIZ_SVG_H_
#define GPUSIM_VIZ_SVG_H_

#include <string>
#include <string_view>

namespace gpusim {
namespace viz_internal {

std::string XmlEscape(std::string_view s);
// Fixed one-decimal coordinate ("12.5").
std::string Num(double v);

class Svg {
 public:
  // Width and height in px; a white background is drawn.
  Svg(double width, double height);

  void Rect(double x, double y, double w, double h, std::string_view fill,
            std::string_view attrs = "");
  void Line(double x1, double y1, double x2, double y2, std::string_view stroke,
            std::string_view attrs = "");
  // `attrs` e.g. "font-size=\"11\" text-anchor=\"end\"". Text is escaped.
  void Text(double x, double y, std::string_view text, std::string_view attrs = "");
  // Rect with a hover tooltip (<title>).
  void RectWithTitle(double x, double y, double w, double h, std::string_view fill,
                     std::string_view title, std::string_view attrs = "");
  // Verbatim markup (paths, groups). The caller escapes.
  void Raw(std::string_view markup);

  // The document, starting with an XML declaration (Graphviz's rsvg loader
  // needs it to recognise the file).
  std::string Finish() const;

 private:
  double width_, height_;
  std::string body_;
};

// Truncates `s` with "…" to about `px` pixels of `font_px` sans-serif text.
std::string FitText(std::string_view s, double px, double font_px);

// A round tick spacing (1, 2 or 5 × 10^k) giving about `ticks` ticks over
// [0, range].
double NiceStep(double range, int ticks);

// Dark or white text, whichever reads on `fill` ("#rrggbb").
std::string_view TextColorOn(std::string_view fill);

}  // namespace viz_internal
}  // namespace gpusim

#endif  // GPUSIM_VIZ_SVG_H_
