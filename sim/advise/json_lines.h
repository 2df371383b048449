// A reader for the one-line JSON objects gpusim writes (advisor shards):
// flat objects whose values are numbers, strings, booleans, null or arrays of
// strings. Not a general JSON parser.
#ifndef GPUSIM_SIM_ADVISE_JSON_LINES_H_
#define GPUSIM_SIM_ADVISE_JSON_LINES_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusim {

struct JsonLineValue {
  double number = 0;
  std::string text;
  bool boolean = false;
  std::vector<std::string> strings;
};

// Errors name the byte offset: "offset 17: expected ',' or '}'".
absl::StatusOr<std::map<std::string, JsonLineValue>> ParseFlatJsonObject(const std::string& line);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ADVISE_JSON_LINES_H_
