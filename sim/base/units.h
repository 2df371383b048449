// Strong unit types: Bytes (exact 64-bit sizes) and SimTime (integer
// nanoseconds), in the manner of std::chrono. Sizes and times cross every API
// as these types, never as bare integers or double seconds.
#ifndef GPUSIM_SIM_BASE_UNITS_H_
#define GPUSIM_SIM_BASE_UNITS_H_

#include <compare>
#include <cstdint>
#include <string>

namespace gpusim {

class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(int64_t v) : v_(v) {}
  constexpr int64_t value() const { return v_; }
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes o) const { return Bytes(v_ + o.v_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(v_ - o.v_); }
  constexpr Bytes operator*(int64_t k) const { return Bytes(v_ * k); }
  constexpr Bytes& operator+=(Bytes o) { v_ += o.v_; return *this; }
  constexpr Bytes& operator-=(Bytes o) { v_ -= o.v_; return *this; }
  double GiB() const { return static_cast<double>(v_) / (1LL << 30); }
  double GB() const { return static_cast<double>(v_) / 1e9; }

 private:
  int64_t v_ = 0;
};

constexpr Bytes operator""_B(unsigned long long v) { return Bytes(static_cast<int64_t>(v)); }
constexpr Bytes operator""_KiB(unsigned long long v) { return Bytes(static_cast<int64_t>(v) << 10); }
constexpr Bytes operator""_MiB(unsigned long long v) { return Bytes(static_cast<int64_t>(v) << 20); }
constexpr Bytes operator""_GiB(unsigned long long v) { return Bytes(static_cast<int64_t>(v) << 30); }

inline Bytes Max(Bytes a, Bytes b) { return a < b ? b : a; }
inline Bytes Min(Bytes a, Bytes b) { return a < b ? a : b; }

// "12,345,678 B (11.77 GiB)": exact bytes and binary units (GiB = 2^30).
std::string FormatBytes(Bytes b);
// Exact integer with thousands separators.
std::string WithCommas(int64_t v);

// Simulated time in integer nanoseconds.
//
// Note [Checked time]
// Every duration and timestamp is a SimTime, and SimTime arithmetic is
// checked: a time's magnitude is at most kMaxNs = 2^62 - 1 ns (about 146
// years). Recorded traces carry epoch timestamps (about 1.8e18 ns in 2026),
// so the bound must hold those; and twice it fits int64, so the sum or
// difference of two in-range times never overflows before it is checked.
// A constructor, FromSeconds() or an operator whose exact result would be
// beyond the bound (or NaN) yields the out-of-range time (ok() false, the
// value INT64_MAX, so it compares after every time), and every operation
// with an out-of-range operand stays out of range: a wrapped time (negative
// compute time, TFLOP/s above peak, a negative timestamp; issue 27) cannot
// arise. The engine (Simulate, sim/engine/engine.cc) refuses an
// out-of-range duration, finish or total as an input error naming the event
// and what its duration is made of; readers refuse a recorded time beyond
// the bound by file and line.
class SimTime {
 public:
  static constexpr int64_t kMaxNs = (int64_t{1} << 62) - 1;
  constexpr SimTime() = default;
  constexpr explicit SimTime(int64_t ns) : ns_(InRange(ns) ? ns : kOutOfRangeNs) {}
  static constexpr SimTime Nanos(int64_t ns) { return SimTime(ns); }
  static constexpr SimTime OutOfRange() { return SimTime(kOutOfRangeNs); }
  // Converts seconds to the nearest nanosecond (used at the edge only); NaN
  // or a magnitude beyond kMaxNs gives the out-of-range time.
  static SimTime FromSeconds(double s);
  // The nearest nanosecond to `ns`, range-checked as FromSeconds.
  static SimTime FromNanos(double ns);
  // true unless out of range (Note [Checked time]).
  constexpr bool ok() const { return ns_ != kOutOfRangeNs; }
  constexpr int64_t ns() const { return ns_; }
  double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr auto operator<=>(const SimTime&) const = default;
  constexpr SimTime operator+(SimTime o) const {
    return ok() && o.ok() ? SimTime(ns_ + o.ns_) : OutOfRange();
  }
  constexpr SimTime operator-(SimTime o) const {
    return ok() && o.ok() ? SimTime(ns_ - o.ns_) : OutOfRange();
  }
  constexpr SimTime operator*(int64_t k) const {
    int64_t p = 0;
    return ok() && !__builtin_mul_overflow(ns_, k, &p) ? SimTime(p) : OutOfRange();
  }
  constexpr SimTime& operator+=(SimTime o) { return *this = *this + o; }
  constexpr SimTime& operator-=(SimTime o) { return *this = *this - o; }

 private:
  static constexpr int64_t kOutOfRangeNs = INT64_MAX;
  static constexpr bool InRange(int64_t ns) { return ns == kOutOfRangeNs || (ns >= -kMaxNs && ns <= kMaxNs); }
  int64_t ns_ = 0;
};

inline SimTime Max(SimTime a, SimTime b) { return a < b ? b : a; }

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_UNITS_H_
