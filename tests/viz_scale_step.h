// The synthetic step viz/ is checked and timed at scale on
// (tests/viz_scale_test.cc: bounded, well-formed output;
// bench/viz_benchmark.cc: the time it takes): 100,000 buffers from 100,000
// ops in 1,000 loop iterations of 100 ops, lifetimes from one op to the
// whole step.
#ifndef GPUSIM_TESTS_VIZ_SCALE_STEP_H_
#define GPUSIM_TESTS_VIZ_SCALE_STEP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/config/loader.h"
#include "sim/engine/engine.h"
#include "sim/ir/builder.h"
#include "sim/lower/lower.h"
#include "sim/step/step.h"

namespace gpusim {

constexpr int kVizScaleBuffers = 100000;

// Eager (`xla` false): through the caching allocator, so the timeline also
// draws its allocated / reserved curves (one sample per memory event). XLA:
// temp offsets that need only be plausible, a round-robin of 64 slots.
inline absl::StatusOr<StepReport> VizScaleStep(bool xla) {
  ProgramBuilder b("synthetic_100k");
  std::vector<TensorId> t;
  t.reserve(kVizScaleBuffers);
  const Role roles[] = {Role::kActivation, Role::kTemporary, Role::kResidual, Role::kGradient};
  for (int i = 0; i < kVizScaleBuffers; ++i) {
    b.set_layer(i / 100);
    b.set_phase(i < kVizScaleBuffers / 2 ? Phase::kForward : Phase::kBackward);
    // Sizes from 4 KiB to ~64 MiB; every op reads its predecessor and one
    // value up to 2,000 ops back, so lifetimes vary widely.
    const int64_t elems = int64_t{1024} << ((i * 2654435761u) % 15);
    std::vector<TensorId> in;
    if (i > 0) in.push_back(t[static_cast<size_t>(i - 1)]);
    if (i > 2000) in.push_back(t[static_cast<size_t>(i - 1 - (i * 7919) % 2000)]);
    const TensorId out = b.AddTensor("v" + std::to_string(i), {elems}, DType::kF32, roles[i % 4]);
    b.AddOp("op" + std::to_string(i), OpKind::kElementwise, in, {out}, 1e6);
    t.push_back(out);
  }
  StepReport r;
  r.program = b.Finish();
  r.spec.framework = xla ? "jax" : "pytorch";
  r.semantics = LoweringSemanticsOf(r.spec);
  auto device = LoadDeviceSpec("h100-sxm-80gb");
  if (!device.ok()) return device.status();
  r.spec.device = *device;
  auto lowered = LowerEager(r.program);
  if (!lowered.ok()) return lowered.status();
  r.lowered = std::move(*lowered);
  std::unique_ptr<Allocator> alloc;
  if (!xla) {
    auto a = MakeAllocator({"pytorch_caching", {}}, r.spec.device.usable());
    if (!a.ok()) return a.status();
    alloc = std::move(*a);
  }
  auto sim = Simulate(r.lowered.trace, r.spec.device, alloc.get());
  if (!sim.ok()) return sim.status();
  r.sim = std::move(*sim);
  r.capacity = r.spec.device.usable();
  r.peak = r.sim.peak_live;
  if (xla) {
    r.temp_offsets.assign(r.lowered.buffers.size(), Bytes(-1));
    const int64_t slot = int64_t{64} << 20;
    for (const BufferInfo& buf : r.lowered.buffers) {
      r.temp_offsets[static_cast<size_t>(buf.id)] = Bytes((buf.id % 64) * slot * 4);
    }
    r.temp = Bytes(64 * slot * 4);
    r.peak = r.temp;
    r.temp_peak_event = r.sim.peak_event;
  }
  return r;
}

}  // namespace gpusim

#endif  // GPUSIM_TESTS_VIZ_SCALE_STEP_H_
