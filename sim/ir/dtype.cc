#include "sim/ir/dtype.h"

namespace gpusim {

int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kBF16: case DType::kF16: return 2;
    case DType::kF8: case DType::kU8: case DType::kPred: return 1;
    case DType::kI64: return 8;
  }
  return 0;
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF8: return "f8";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kPred: return "pred";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view s) {
  if (s == "f32" || s == "float32") return DType::kF32;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "f16" || s == "float16") return DType::kF16;
  if (s == "f8" || s == "float8") return DType::kF8;
  if (s == "i32" || s == "int32") return DType::kI32;
  if (s == "i64" || s == "int64") return DType::kI64;
  if (s == "u8" || s == "uint8") return DType::kU8;
  if (s == "pred" || s == "bool") return DType::kPred;
  return std::nullopt;
}

}  // namespace gpusim
