// Which recorded stack frames a reader is shown, and whose code an
// allocation came from: the frame filter of PyTorch's memory_viz, the
// user's innermost Python frame, and that frame's Python module.
//
// Every view of a recorded stack goes through here (explain, report.html's
// peak table, the memory map's labels and tooltips, timeline.json), so a
// block reads the same everywhere: the C++ unwinder and interpreter frames
// a snapshot recorded with stacks="all" carries (torch::unwind::unwind,
// CapturedTraceback::gather, _PyEval_EvalFrameDefault, ...) are dropped as
// memory_viz drops them, and the block is named by the model code that
// asked for it.
#ifndef GPUSIM_SIM_TRACE_FRAMES_H_
#define GPUSIM_SIM_TRACE_FRAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/trace.h"

namespace gpusim {

// Note [memory_viz's frame filter]
// PyTorch torch/utils/viz/MemoryViz.js, function frameFilter (the same
// lists in torch/cuda/_memory_viz.py, _frame_filter): a frame is omitted
// when its function name contains any of
//   unwind::unwind  CapturedTraceback::gather  gather_with_cpp  _start
//   __libc_start_main  PyEval_  PyObject_  PyFunction_
// or its file name contains any of
//   core/boxing  /Register  /Redispatch  pythonrun.c  Modules/main.c
//   Objects/call.c  Objects/methodobject.c  pycore_ceval.h  ceval.c
//   cpython/abstract.h
// (substring tests, case-sensitive, as String.includes). Everything else,
// C++ frames of the allocator and ATen included, is shown.
bool MemoryVizShowsFrame(const StackFrame& f);

// `stack` (innermost first, indices into `frames`) without the frames
// memory_viz omits; indices outside `frames` are dropped too.
std::vector<int32_t> ShownStack(const std::vector<StackFrame>& frames, const std::vector<int32_t>& stack);

// One line per shown frame, innermost first, "function (file:line)", with
// a run of three or more equal lines elided to the line and "<repeats N
// times>" as memory_viz's elideRepeats does; at most `max_lines` lines
// (then "... N more frames").
std::vector<std::string> ShownFrameLines(const std::vector<StackFrame>& frames, const std::vector<int32_t>& stack,
                                         size_t max_lines);

// "function (file:line)"; "?" for an unknown function or file, no ":line"
// when the line is unknown (0).
std::string FrameText(const StackFrame& f);

// A Python source frame: its file ends in ".py" (snapshots give absolute
// paths; Kineto's python tracer gives them relative to sys.path).
bool IsPythonFrame(const StackFrame& f);

// Note [The user's frame]
// The frame an allocation is named by: of the shown frames (Note
// [memory_viz's frame filter]), innermost first, the first Python frame
// outside PyTorch itself (a path whose part after the last site-packages/
// or dist-packages/, or the whole relative path, starts with "torch/") and
// outside the Python standard library (an absolute path under
// .../lib/pythonX.Y/ but not in its site-packages) — the model's code, the
// user's own or a model library's (transformers, timm, torchvision). So a
// dropout's activation is "modeling_bert.py:107 forward", not
// torch/nn/functional.py's dropout, and an optimizer state is the user's
// `opt.step()` line. When every Python frame is PyTorch's or the standard
// library's, the innermost Python frame; with no Python frame, the
// innermost shown frame; nullopt for an empty stack.
std::optional<int32_t> UserFrame(const std::vector<StackFrame>& frames, const std::vector<int32_t>& stack);

// The Python module of a source file: the dotted path after the last
// site-packages/ or dist-packages/ ("transformers.models.bert.modeling_bert"),
// a relative path dotted whole ("torch/nn/functional.py" -> "torch.nn.
// functional"), else (a script by absolute path) the file's stem ("train").
// "" for a file that is not Python source.
std::string PythonModule(std::string_view file);

// "modeling_bert.py:107 forward": the file's base name, line and function,
// as memory_viz's _frame_fmt shortens them (file:line, then the function).
std::string FrameLabel(const StackFrame& f);

}  // namespace gpusim

#endif  // GPUSIM_SIM_TRACE_FRAMES_H_
