// Status helpers over absl::Status: early-return macros and error builders.
// Recoverable errors (anything input can cause) are Status; broken invariants
// are CHECK (GPUSIM_CHECK), which aborts with a message.
#ifndef GPUSIM_SIM_BASE_STATUS_H_
#define GPUSIM_SIM_BASE_STATUS_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPUSIM_CONCAT_INNER(a, b) a##b
#define GPUSIM_CONCAT(a, b) GPUSIM_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    ::absl::Status _st = (expr);              \
    if (!_st.ok()) return _st;                \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(GPUSIM_CONCAT(_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define GPUSIM_CHECK(cond)                                                   \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                   \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

#endif  // GPUSIM_SIM_BASE_STATUS_H_
