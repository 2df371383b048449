#include "sim/trace/frames.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace gpusim {
namespace {

// (This absl's string_view is its own type, so plain std::string_view.)
bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Note [memory_viz's frame filter]: MemoryViz.js frameFilter's two lists.
constexpr std::array<std::string_view, 8> kOmitFunctions = {
    "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
    "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"};
constexpr std::array<std::string_view, 10> kOmitFilenames = {
    "core/boxing",          "/Register",      "/Redispatch",  "pythonrun.c", "Modules/main.c",
    "Objects/call.c",       "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"};

// The part of `file` a Python import names it by: after the last
// site-packages/ or dist-packages/; a relative path whole; "" for an
// absolute path outside both.
std::string_view ImportPath(std::string_view file) {
  size_t cut = std::string_view::npos;
  for (std::string_view dir : {"site-packages/", "dist-packages/"}) {
    const size_t at = file.rfind(dir);
    if (at != std::string_view::npos && (cut == std::string_view::npos || at + dir.size() > cut)) {
      cut = at + dir.size();
    }
  }
  if (cut != std::string_view::npos) return file.substr(cut);
  if (!file.empty() && file[0] != '/') return file;
  return "";
}

// The last path component.
std::string_view BaseName(std::string_view file) {
  const size_t slash = file.rfind('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

bool InPyTorch(std::string_view file) { return ImportPath(file).starts_with("torch/"); }

// An absolute path in the standard library: .../lib/pythonX.Y/NAME, not
// in site-packages or dist-packages.
bool InStandardLibrary(std::string_view file) {
  if (file.empty() || file[0] != '/') return false;
  if (Contains(file, "site-packages/") || Contains(file, "dist-packages/")) return false;
  return Contains(file, "/lib/python");
}

}  // namespace

bool MemoryVizShowsFrame(const StackFrame& f) {
  for (std::string_view s : kOmitFunctions) {
    if (Contains(f.function, s)) return false;
  }
  for (std::string_view s : kOmitFilenames) {
    if (Contains(f.file, s)) return false;
  }
  return true;
}

std::vector<int32_t> ShownStack(const std::vector<StackFrame>& frames, const std::vector<int32_t>& stack) {
  std::vector<int32_t> out;
  out.reserve(stack.size());
  for (int32_t k : stack) {
    if (k < 0 || static_cast<size_t>(k) >= frames.size()) continue;
    if (MemoryVizShowsFrame(frames[static_cast<size_t>(k)])) out.push_back(k);
  }
  return out;
}

std::string FrameText(const StackFrame& f) {
  std::string where = f.file.empty() ? "?" : f.file;
  if (f.line > 0) absl::StrAppend(&where, ":", f.line);
  return absl::StrCat(f.function.empty() ? "?" : f.function, " (", where, ")");
}

std::vector<std::string> ShownFrameLines(const std::vector<StackFrame>& frames, const std::vector<int32_t>& stack,
                                         size_t max_lines) {
  std::vector<std::string> lines;
  for (int32_t k : ShownStack(frames, stack)) lines.push_back(FrameText(frames[static_cast<size_t>(k)]));
  // memory_viz's elideRepeats: a run of n >= 3 equal lines is the line and
  // "<repeats n-1 times>".
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size();) {
    size_t j = i + 1;
    while (j < lines.size() && lines[j] == lines[i]) ++j;
    out.push_back(lines[i]);
    if (j - i == 2) out.push_back(lines[i]);
    if (j - i > 2) out.push_back(absl::StrCat("<repeats ", j - i - 1, " times>"));
    i = j;
  }
  if (out.size() > max_lines) {
    const size_t more = out.size() - max_lines;
    out.resize(max_lines);
    out.push_back(absl::StrCat("... ", more, " more frames"));
  }
  return out;
}

bool IsPythonFrame(const StackFrame& f) { return f.file.ends_with(".py"); }

std::optional<int32_t> UserFrame(const std::vector<StackFrame>& frames, const std::vector<int32_t>& stack) {
  const std::vector<int32_t> shown = ShownStack(frames, stack);
  std::optional<int32_t> python;
  for (int32_t k : shown) {
    const StackFrame& f = frames[static_cast<size_t>(k)];
    if (!IsPythonFrame(f)) continue;
    if (!InPyTorch(f.file) && !InStandardLibrary(f.file)) return k;
    if (!python.has_value()) python = k;
  }
  if (python.has_value()) return python;
  if (!shown.empty()) return shown.front();
  return std::nullopt;
}

std::string PythonModule(std::string_view file) {
  if (!file.ends_with(".py")) return "";
  std::string_view path = ImportPath(file);
  if (path.empty()) {
    path = BaseName(file);  // a script: its stem
  }
  path.remove_suffix(3);
  if (path.ends_with("/__init__")) path.remove_suffix(9);
  std::string out(path);
  for (char& c : out) {
    if (c == '/') c = '.';
  }
  return out;
}

std::string FrameLabel(const StackFrame& f) {
  const std::string_view base = BaseName(f.file);
  std::string out(base.empty() ? "?" : base);
  if (f.line > 0) absl::StrAppend(&out, ":", f.line);
  absl::StrAppend(&out, " ", f.function.empty() ? "?" : f.function);
  return out;
}

}  // namespace gpusim
