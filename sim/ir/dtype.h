// Element types of tensors and their sizes.
#ifndef GPUSIM_SIM_IR_DTYPE_H_
#define GPUSIM_SIM_IR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpusim {

enum class DType { kF32, kBF16, kF16, kF8, kI32, kI64, kU8, kPred };

int64_t DTypeSize(DType t);
std::string_view DTypeName(DType t);
// Accepts "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16", "f8",
// "i32"/"int32", "i64"/"int64", "u8"/"uint8", "pred"/"bool".
std::optional<DType> ParseDType(std::string_view s);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_DTYPE_H_
