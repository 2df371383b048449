// Small helpers over simdjson On-Demand for the importers: exact integers
// and microsecond timestamps from number tokens, and error texts with byte
// offsets. simdjson stays behind this folder: only importer .cc files include
// this header, nothing public exposes simdjson types.
//
// Internal to the importers.
#ifndef GPUSIM_SIM_IMPORT_SIMDJSON_UTIL_H_
#define GPUSIM_SIM_IMPORT_SIMDJSON_UTIL_H_

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/import/json_stream.h"

namespace gpusim::import_internal {

static_assert(simdjson::SIMDJSON_PADDING <= kJsonPadding);

// The number token of `v` with trailing blanks removed; fails (returns
// false) if `v` is not a number.
bool NumberToken(simdjson::ondemand::value& v, std::string_view* token);

// An integer (also accepts an integral decimal such as 12.0 or 1e3, as some
// writers emit); false on anything else or overflow.
bool ParseInteger(std::string_view token, int64_t* out);

// A decimal count of microseconds to exact nanoseconds: "1419247333400.919"
// -> 1419247333400919. Digits below 1 ns are rounded to nearest. Exponent
// forms go through double. False when not a number or out of range.
bool ParseMicrosToNanos(std::string_view token, int64_t* ns);

// Offset of `p` inside `text`, or 0 when it is not inside.
int64_t OffsetIn(const std::string& text, const char* p);

}  // namespace gpusim::import_internal

#endif  // GPUSIM_SIM_IMPORT_SIMDJSON_UTIL_H_
