// What one HLO kernel costs on the device model: its OpKind, FLOPs, matmul
// shape and collective group, read from the instruction's shapes and
// attributes (dot dimension numbers, convolution dim_labels, custom-call
// targets, replica groups). Used by the HLO importer (hlo_to_program.h).
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_OP_COST_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_OP_COST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/import/hlo/hlo_module.h"
#include "sim/ir/dtype.h"
#include "sim/ir/program.h"

namespace gpusim {

struct HloKernelCost {
  OpKind kind = OpKind::kElementwise;
  double flops = 0;
  DType dtype = DType::kF32;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t group = 1;
  // custom-call targets that are annotations, not kernels (Sharding,
  // SPMD shape changes, memory-kind placement): the result is the operand.
  bool pass_through = false;
};

// The gpusim DType of an HLO element type, by size (s32/u32 as i32,
// s64/u64/f64/c64 as i64, s16/u16 as f16, s8/u8 as u8, f8* as f8); an
// error for types gpusim cannot size (c128 and sub-byte types).
absl::StatusOr<DType> HloElementDType(const std::string& element);

// REQUIRES: `ins` is a kernel (HloOpClass kKernel or kFusion) or a
// reduction; `operands` are its operands' shapes; `m` resolves fusion
// computations. Unknown custom-call targets are an error naming the target.
absl::StatusOr<HloKernelCost> KernelCost(const HloModule& m, const HloInstruction& ins,
                                         const std::vector<const HloShape*>& operands);

// A dot's [batch] x (m x k) @ (k x n) shape and FLOPs from its dimension
// numbers.
// Note [Fusion traffic]
// The bytes a compiled module's fusion moves (xla/service/gpu/model/
// gpu_hlo_cost_analysis.cc counts what the fused computation reads of each
// operand): a fusion parameter read only through dynamic-slice, slice or
// gather is read only where they read it (a scanned layer's weight slice of
// the stacked parameter); one updated in place by the fused root's
// dynamic-update-slice is not read, and the fusion writes the update, not the
// whole buffer (xla/service/gpu/ir_emission_utils.cc
// CanEmitFusedDynamicUpdateSliceInPlaceForGpu). Per operand in order, then
// the bytes written.
struct HloFusionTraffic {
  std::vector<int64_t> read;  // per operand
  int64_t written = 0;
  int64_t in_place_operand = -1;  // the operand the root dynamic-update-slice writes, or -1
};
HloFusionTraffic FusionTraffic(const HloModule& m, const HloInstruction& fusion,
                               const std::vector<int64_t>& operand_bytes, int64_t result_bytes);

HloKernelCost DotKernelCost(const HloInstruction& ins, const HloShape& lhs, const HloShape& rhs);

// Elements an elementwise instruction computes (its FLOPs in a fusion):
// the output's, 0 for data movement (broadcast, slices, transposes, ...).
double ElementwiseFlops(const HloInstruction& ins);

// The devices in one replica group of a collective: `replica_groups={{0,1},
// {2,3}}`, the iota form `[2,2]<=[4]`, or all of them when empty.
int64_t CollectiveGroupSize(const HloInstruction& ins, int64_t devices);

// known_trip_count in the instruction's backend_config ({"known_trip_count":
// {"n":"4"}}, xla/service/gpu/backend_configs.proto WhileLoopBackendConfig);
// -1 when absent.
int64_t KnownTripCount(const HloInstruction& ins);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_OP_COST_H_
