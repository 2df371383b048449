// A minimal, deterministic JSON writer: keys in insertion order, integers
// exact, doubles with %.17g (round-trippable), strings escaped per RFC 8259.
#ifndef GPUSIM_SIM_BASE_JSON_WRITER_H_
#define GPUSIM_SIM_BASE_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpusim {

class JsonWriter {
 public:
  JsonWriter& BeginObject(std::string_view key = {});
  JsonWriter& EndObject();
  JsonWriter& BeginArray(std::string_view key = {});
  JsonWriter& EndArray();
  JsonWriter& Int(std::string_view key, int64_t v);
  JsonWriter& Double(std::string_view key, double v);
  JsonWriter& Bool(std::string_view key, bool v);
  JsonWriter& String(std::string_view key, std::string_view v);
  JsonWriter& Null(std::string_view key);
  // Finishes and returns the document (with a trailing newline).
  std::string Finish();

 private:
  void Key(std::string_view key);
  void Open(std::string_view key, char bracket);
  void Close(char bracket);
  void Indent();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  std::vector<bool> is_array_;
};

std::string JsonEscape(std::string_view s);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_JSON_WRITER_H_
