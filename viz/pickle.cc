#include "viz/pickle.h"

#include <cstring>

#include "sim/base/status.h"

namespace gpusim {

// Containers are written as EMPTY_DICT / EMPTY_LIST then MARK, their items,
// and one SETITEMS / APPENDS (a tuple: MARK, items, TUPLE), which CPython
// reads for any item count.
PickleWriter::PickleWriter() { out_ = "\x80\x02"; }  // PROTO 2

void PickleWriter::Mark() { out_ += '('; }

void PickleWriter::BeginDict() {
  out_ += '}';
  Mark();
  open_.push_back(Open::kDict);
}

void PickleWriter::EndDict() {
  GPUSIM_CHECK(!open_.empty() && open_.back() == Open::kDict);
  open_.pop_back();
  out_ += 'u';  // SETITEMS
}

void PickleWriter::BeginList() {
  out_ += ']';
  Mark();
  open_.push_back(Open::kList);
}

void PickleWriter::EndList() {
  GPUSIM_CHECK(!open_.empty() && open_.back() == Open::kList);
  open_.pop_back();
  out_ += 'e';  // APPENDS
}

void PickleWriter::BeginTuple() {
  Mark();
  open_.push_back(Open::kTuple);
}

void PickleWriter::EndTuple() {
  GPUSIM_CHECK(!open_.empty() && open_.back() == Open::kTuple);
  open_.pop_back();
  out_ += 't';  // TUPLE
}

void PickleWriter::Str(std::string_view s) {
  out_ += 'X';  // BINUNICODE: 4-byte little-endian length, UTF-8
  const uint32_t n = static_cast<uint32_t>(s.size());
  for (int k = 0; k < 4; ++k) out_ += static_cast<char>((n >> (8 * k)) & 0xff);
  out_.append(s);
}

void PickleWriter::Int(int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out_ += 'J';  // BININT: 4-byte signed little-endian
    const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(v));
    for (int k = 0; k < 4; ++k) out_ += static_cast<char>((u >> (8 * k)) & 0xff);
    return;
  }
  out_ += '\x8a';  // LONG1: n bytes, little-endian two's complement
  out_ += '\x08';
  const uint64_t u = static_cast<uint64_t>(v);
  for (int k = 0; k < 8; ++k) out_ += static_cast<char>((u >> (8 * k)) & 0xff);
}

void PickleWriter::Float(double v) {
  out_ += 'G';  // BINFLOAT: 8-byte big-endian IEEE 754
  uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  for (int k = 7; k >= 0; --k) out_ += static_cast<char>((u >> (8 * k)) & 0xff);
}

void PickleWriter::Bool(bool v) { out_ += v ? '\x88' : '\x89'; }  // NEWTRUE / NEWFALSE

void PickleWriter::None() { out_ += 'N'; }

std::string PickleWriter::Finish() {
  GPUSIM_CHECK(open_.empty());  // every container closed
  out_ += '.';  // STOP
  return std::move(out_);
}

}  // namespace gpusim
