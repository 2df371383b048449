// Parsing of sizes, rates and durations as written in configs: "80GiB",
// "85e9B", "3350GB/s", "989TFLOP/s", "4.5us". Byte sizes and durations are
// computed exactly in integer arithmetic (the decimal mantissa and exponent
// are parsed by hand, never through a double); rates are doubles correctly
// rounded from the written decimal. Errors are InvalidArgument with a message
// saying what was expected and what was written; callers prefix the location.
#ifndef GPUSIM_SIM_CONFIG_UNITS_PARSE_H_
#define GPUSIM_SIM_CONFIG_UNITS_PARSE_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "sim/base/units.h"

namespace gpusim {

// A whole number of bytes. Accepts a plain integer ("1024"), a decimal or
// scientific number ("1.5", "85e9", "85.04e9") followed, with optional
// spaces, by a case-sensitive unit: B, KB/MB/GB/TB (powers of 1000) or
// KiB/MiB/GiB/TiB (powers of 1024). Errors when the value is not a whole
// number of bytes ("0.5B"), is negative, or overflows int64.
absl::StatusOr<Bytes> ParseBytes(std::string_view s);

// Bytes per second: "3350GB/s", "3.35TB/s", "2000 GiB/s", "1e9B/s", or a plain
// number of bytes/s. Units as ParseBytes with "/s". Must be >= 0 and finite.
absl::StatusOr<double> ParseRate(std::string_view s);

// FLOP per second: "989TFLOP/s", "19.5 TFLOP/s", "67e12", with prefixes
// (none), K, M, G, T, P before "FLOP/s" ("FLOPS" is accepted too), or a plain
// number of FLOP/s. Must be >= 0 and finite.
absl::StatusOr<double> ParseFlopRate(std::string_view s);

// A duration with a required unit: ns, us, ms or s ("5us", "4.5us", "0.5s",
// "300ns"). Rounded to the nearest nanosecond (SimTime's resolution). Plain
// numbers are an error naming the units.
absl::StatusOr<SimTime> ParseDuration(std::string_view s);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_UNITS_PARSE_H_
