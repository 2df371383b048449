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
class SimTime {
 public:
  constexpr SimTime() = default;
  constexpr explicit SimTime(int64_t ns) : ns_(ns) {}
  static constexpr SimTime Nanos(int64_t ns) { return SimTime(ns); }
  // Converts seconds to the nearest nanosecond (used at the edge only).
  static SimTime FromSeconds(double s);
  constexpr int64_t ns() const { return ns_; }
  double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr auto operator<=>(const SimTime&) const = default;
  constexpr SimTime operator+(SimTime o) const { return SimTime(ns_ + o.ns_); }
  constexpr SimTime operator-(SimTime o) const { return SimTime(ns_ - o.ns_); }
  constexpr SimTime operator*(int64_t k) const { return SimTime(ns_ * k); }
  constexpr SimTime& operator+=(SimTime o) { ns_ += o.ns_; return *this; }

 private:
  int64_t ns_ = 0;
};

inline SimTime Max(SimTime a, SimTime b) { return a < b ? b : a; }

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_UNITS_H_
