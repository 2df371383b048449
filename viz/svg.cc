#include "viz/svg.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpusim {
namespace viz_internal {

std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // XML 1.0 forbids most control characters.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string Num(double v) {
  if (v > -0.05 && v < 0.05) return "0";
  return absl::StrFormat("%.1f", v);
}

Svg::Svg(double width, double height) : width_(width), height_(height) {
  Rect(0, 0, width, height, "#ffffff");
}

void Svg::Rect(double x, double y, double w, double h, std::string_view fill, std::string_view attrs) {
  absl::StrAppend(&body_, "<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"", Num(w), "\" height=\"",
                  Num(h), "\" fill=\"", std::string(fill), "\"", attrs.empty() ? "" : " ", std::string(attrs),
                  "/>\n");
}

void Svg::RectWithTitle(double x, double y, double w, double h, std::string_view fill, std::string_view title,
                        std::string_view attrs) {
  absl::StrAppend(&body_, "<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"", Num(w), "\" height=\"",
                  Num(h), "\" fill=\"", std::string(fill), "\"", attrs.empty() ? "" : " ", std::string(attrs),
                  "><title>", XmlEscape(title), "</title></rect>\n");
}

void Svg::Line(double x1, double y1, double x2, double y2, std::string_view stroke, std::string_view attrs) {
  absl::StrAppend(&body_, "<line x1=\"", Num(x1), "\" y1=\"", Num(y1), "\" x2=\"", Num(x2), "\" y2=\"", Num(y2),
                  "\" stroke=\"", std::string(stroke), "\"", attrs.empty() ? "" : " ", std::string(attrs), "/>\n");
}

void Svg::Text(double x, double y, std::string_view text, std::string_view attrs) {
  absl::StrAppend(&body_, "<text x=\"", Num(x), "\" y=\"", Num(y), "\"", attrs.empty() ? "" : " ",
                  std::string(attrs), ">", XmlEscape(text), "</text>\n");
}

void Svg::Raw(std::string_view markup) { body_.append(markup); }

std::string Svg::Finish() const {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", Num(width_), "\" height=\"",
                      Num(height_), "\" viewBox=\"0 0 ", Num(width_), " ", Num(height_),
                      "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\">\n", body_,
                      "</svg>\n");
}

std::string FitText(std::string_view s, double px, double font_px) {
  const double char_px = font_px * 0.6;
  const int max_chars = static_cast<int>(px / char_px);
  if (max_chars <= 0) return "";
  // Count UTF-8 code points, not bytes.
  int chars = 0;
  size_t cut = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (chars == max_chars - 1 && cut == s.size()) cut = i;
    ++chars;
  }
  if (chars <= max_chars) return std::string(s);
  if (max_chars < 2) return "";
  return std::string(s.substr(0, cut)) + "…";
}

double NiceStep(double range, int ticks) {
  if (range <= 0 || ticks <= 0) return 1;
  const double raw = range / ticks;
  double mag = 1;
  while (mag * 10 <= raw) mag *= 10;
  while (mag > raw) mag /= 10;
  const double f = raw / mag;
  return mag * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

std::string_view TextColorOn(std::string_view fill) {
  if (fill.size() != 7 || fill[0] != '#') return "#000000";
  auto hex = [&](size_t i) { return std::stoi(std::string(fill.substr(i, 2)), nullptr, 16); };
  const double lum = 0.299 * hex(1) + 0.587 * hex(3) + 0.114 * hex(5);
  return lum < 140 ? "#ffffff" : "#1a1a1a";
}

}  // namespace viz_internal
}  // namespace gpusim
