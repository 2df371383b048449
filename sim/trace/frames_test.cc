// memory_viz's frame filter, the user's frame and its module
// (sim/trace/frames.h).
#include "sim/trace/frames.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim::frames_test {
namespace {

StackFrame F(std::string function, std::string file, int64_t line = 1) { return {std::move(function), std::move(file), line}; }

TEST(MemoryVizFrameFilter, DropsEveryListedFunctionAndFile) {
  // MemoryViz.js frameFilter's lists, each as a frame of a stacks="all" snapshot.
  for (const StackFrame& f : {F("torch::unwind::unwind()", "??"), F("torch::CapturedTraceback::gather(bool)", "x.cpp"),
                              F("gather_with_cpp", "memory_snapshot.cpp"), F("_start", "??"),
                              F("__libc_start_main", "??"), F("_PyEval_EvalFrameDefault", "x.c"),
                              F("_PyObject_MakeTpCall", "x.c"), F("_PyFunction_Vectorcall", "x.c"),
                              F("call", "/pytorch/aten/src/ATen/core/boxing/impl/boxing.h"),
                              F("f", "/build/aten/src/ATen/RegisterCUDA.cpp"),
                              F("f", "/build/aten/src/ATen/RedispatchFunctions.h"), F("f", "Python/pythonrun.c"),
                              F("Py_RunMain", "Modules/main.c"), F("f", "Objects/call.c"),
                              F("f", "Objects/methodobject.c"), F("f", "Include/internal/pycore_ceval.h"),
                              F("f", "Python/ceval.c"), F("f", "Include/cpython/abstract.h")}) {
    EXPECT_FALSE(MemoryVizShowsFrame(f)) << f.function << " " << f.file;
  }
  // Everything else is shown, C++ frames of the allocator and ATen included.
  for (const StackFrame& f : {F("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
                                "/pytorch/c10/cuda/CUDACachingAllocator.cpp"),
                              F("at::native::empty_cuda", "/pytorch/aten/src/ATen/native/cuda/EmptyTensor.cpp"),
                              F("forward", "/home/me/model.py"), F("start", "train.py")}) {
    EXPECT_TRUE(MemoryVizShowsFrame(f)) << f.function << " " << f.file;
  }
}

TEST(MemoryVizFrameFilter, ShownLinesDropFramesAndElideRepeatsAsMemoryViz) {
  const std::vector<StackFrame> frames = {F("torch::unwind::unwind()", "??", 0), F("recurse", "/a/m.py", 3),
                                          F("main", "/a/m.py", 9), F("_start", "??", 0)};
  // recurse x4 → the frame, then "<repeats 3 times>"; x2 stays as two lines.
  EXPECT_EQ(ShownFrameLines(frames, {0, 1, 1, 1, 1, 2, 3}, 10),
            (std::vector<std::string>{"recurse (/a/m.py:3)", "<repeats 3 times>", "main (/a/m.py:9)"}));
  EXPECT_EQ(ShownFrameLines(frames, {1, 1, 2}, 10),
            (std::vector<std::string>{"recurse (/a/m.py:3)", "recurse (/a/m.py:3)", "main (/a/m.py:9)"}));
  EXPECT_EQ(ShownFrameLines(frames, {0, 1, 2, 3}, 1),
            (std::vector<std::string>{"recurse (/a/m.py:3)", "... 1 more frames"}));
  EXPECT_EQ(ShownStack(frames, {0, 1, 7, 2, 3}), (std::vector<int32_t>{1, 2}));  // 7: outside the frames
}

TEST(UserFrame, TheModelsCodeNotPyTorchsNorTheStandardLibrarys) {
  const std::string site = "/opt/venv/lib/python3.12/site-packages/";
  const std::vector<StackFrame> frames = {
      F("torch::unwind::unwind()", "??", 0),                                     // 0
      F("at::native::empty_cuda", "/pytorch/aten/EmptyTensor.cpp", 25),         // 1: C++
      F("dropout", site + "torch/nn/functional.py", 1443),                      // 2: PyTorch
      F("__exit__", "/usr/lib/python3.12/contextlib.py", 144),                  // 3: standard library
      F("forward", site + "transformers/models/bert/modeling_bert.py", 107),   // 4: a model library
      F("hf_loss", "/work/examples/torch/_zoo.py", 52),                         // 5: the user's script
      F("_call_impl", "torch/nn/modules/module.py", 1501),                      // 6: Kineto's relative path
      F("step", "/home/me/train.py", 8)};                                       // 7
  EXPECT_EQ(UserFrame(frames, {0, 1, 2, 3, 4, 5}), 4);
  EXPECT_EQ(UserFrame(frames, {0, 1, 2, 6, 5}), 5);
  EXPECT_EQ(UserFrame(frames, {2, 6, 7}), 7);
  // Only PyTorch's and the standard library's Python: the innermost of them.
  EXPECT_EQ(UserFrame(frames, {1, 3, 2}), 3);
  // No Python frame: the innermost shown one; nothing shown: none.
  EXPECT_EQ(UserFrame(frames, {0, 1}), 1);
  EXPECT_EQ(UserFrame(frames, {0}), std::nullopt);
  EXPECT_EQ(UserFrame(frames, {}), std::nullopt);
}

TEST(UserFrame, ModuleAndLabel) {
  EXPECT_EQ(PythonModule("/opt/venv/lib/python3.12/site-packages/transformers/models/bert/modeling_bert.py"),
            "transformers.models.bert.modeling_bert");
  EXPECT_EQ(PythonModule("/usr/lib/python3/dist-packages/timm/layers/__init__.py"), "timm.layers");
  EXPECT_EQ(PythonModule("torch/nn/functional.py"), "torch.nn.functional");  // Kineto: relative to sys.path
  EXPECT_EQ(PythonModule("/home/me/train.py"), "train");
  EXPECT_EQ(PythonModule("/pytorch/c10/cuda/CUDACachingAllocator.cpp"), "");
  EXPECT_EQ(FrameLabel(F("forward", "/a/b/modeling_bert.py", 107)), "modeling_bert.py:107 forward");
  EXPECT_EQ(FrameLabel(F("<built-in method mm>", "", 0)), "? <built-in method mm>");
  EXPECT_EQ(FrameText(F("f", "", 0)), "f (?)");
}

}  // namespace
}  // namespace gpusim::frames_test
