// DeviceSpec methods; see spec.h.
#include "sim/config/spec.h"

namespace gpusim {

// Note [f32 matmul precision]: for f32 we return the non-tensor-core FP32 peak
// (flops.fp32). This is a deliberate choice, not the only plausible one: XLA's
// default precision for f32 dots on Ampere and later lets cuBLAS use TF32
// tensor cores (jax_default_matmul_precision unset; see XLA
// xla/service/gpu/matmul_utils.cc and the JAX "precision" docs), in which case
// flops.tf32 is the right rate. PyTorch defaults to full FP32 for matmuls
// (torch.backends.cuda.matmul.allow_tf32 = False since 1.12). Callers that
// model TF32 execution should use peak_tf32 explicitly.
double DeviceSpec::PeakFlops(DType dtype) const {
  switch (dtype) {
    case DType::kBF16:
      return peak_bf16;
    case DType::kF16:
      return peak_fp16;
    case DType::kF8:
      return peak_fp8;  // 0 without fp8 tensor cores (Note [fp8 peak], spec_parse.cc)
    case DType::kF32:
      return peak_fp32;
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
    case DType::kPred:
      return peak_fp32;  // integer ops run on the CUDA cores
  }
  return peak_fp32;
}

}  // namespace gpusim
