// Bounded nonlinear least squares: a small, deterministic Levenberg–Marquardt
// (Moré, "The Levenberg-Marquardt algorithm: implementation and theory",
// 1978; Marquardt's diagonal scaling) with forward-difference Jacobians and
// box bounds handled by projection, variables at a bound whose gradient
// points outward held fixed for the step. Calibration (calibrate.h) fits a
// handful of device parameters with it; nothing here knows about devices.
#ifndef GPUSIM_SIM_CALIBRATE_LEAST_SQUARES_H_
#define GPUSIM_SIM_CALIBRATE_LEAST_SQUARES_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace gpusim {

struct LeastSquaresProblem {
  std::vector<double> x0, lower, upper;  // same size; lower <= upper
  // r(x); same length on every call. Must be deterministic.
  std::function<std::vector<double>(const std::vector<double>&)> residuals;
  // The first data_residuals entries of r are data (the rest, e.g. a prior,
  // are smooth by construction); a Jacobian column flat in them is retried
  // with a wider difference step.
  size_t data_residuals = SIZE_MAX;
};

struct LeastSquaresOptions {
  int max_iterations = 100;
  double relative_tolerance = 1e-12;  // stop when the cost decreases less
  double step_tolerance = 1e-10;      // stop when the step is smaller
  double difference_step = 1e-4;      // forward-difference step in x
                                      // (widened when a column is flat)
};

struct LeastSquaresResult {
  std::vector<double> x;
  double cost = 0;          // Σ r²
  double initial_cost = 0;  // at the projected x0
  int iterations = 0;
  int evaluations = 0;
};

// REQUIRES: sizes agree, lower <= upper.
LeastSquaresResult SolveBoundedLeastSquares(const LeastSquaresProblem& problem,
                                            const LeastSquaresOptions& options = {});

}  // namespace gpusim

#endif  // GPUSIM_SIM_CALIBRATE_LEAST_SQUARES_H_
