#include "sim/calibrate/least_squares.h"

#include <cmath>

#include "gtest/gtest.h"

namespace gpusim::least_squares_test {
namespace {

TEST(LeastSquaresTest, FitsALineExactly) {
  // y = 2x + 1 at x = 0..4.
  LeastSquaresProblem p;
  p.x0 = {0, 0};
  p.lower = {-10, -10};
  p.upper = {10, 10};
  p.residuals = [](const std::vector<double>& v) {
    std::vector<double> r;
    for (int x = 0; x < 5; ++x) r.push_back(v[0] * x + v[1] - (2.0 * x + 1));
    return r;
  };
  LeastSquaresResult res = SolveBoundedLeastSquares(p);
  EXPECT_NEAR(res.x[0], 2, 1e-6);
  EXPECT_NEAR(res.x[1], 1, 1e-6);
  EXPECT_LT(res.cost, 1e-10);
  EXPECT_GT(res.initial_cost, 1);
}

TEST(LeastSquaresTest, StopsAtTheBound) {
  // Minimum at 3, bound at 2; the other variable still fits.
  LeastSquaresProblem p;
  p.x0 = {0, 0};
  p.lower = {-1, -5};
  p.upper = {2, 5};
  p.residuals = [](const std::vector<double>& v) {
    return std::vector<double>{v[0] - 3, std::exp(v[1]) - 2};
  };
  LeastSquaresResult res = SolveBoundedLeastSquares(p);
  EXPECT_DOUBLE_EQ(res.x[0], 2);
  EXPECT_NEAR(res.x[1], std::log(2.0), 1e-6);
  EXPECT_NEAR(res.cost, 1, 1e-9);
}

TEST(LeastSquaresTest, DeterministicAndProjectsTheStart) {
  LeastSquaresProblem p;
  p.x0 = {100};
  p.lower = {0};
  p.upper = {1};
  p.residuals = [](const std::vector<double>& v) { return std::vector<double>{v[0] * v[0] - 0.25}; };
  LeastSquaresResult a = SolveBoundedLeastSquares(p);
  LeastSquaresResult b = SolveBoundedLeastSquares(p);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_NEAR(a.x[0], 0.5, 1e-6);
}

TEST(LeastSquaresTest, WidensTheDifferenceStepOnAQuantisedResidual) {
  // r = round(x, 3 decimals) - 0.5: flat at the default 1e-4 step.
  LeastSquaresProblem p;
  p.x0 = {0.9};
  p.lower = {0};
  p.upper = {2};
  p.residuals = [](const std::vector<double>& v) {
    return std::vector<double>{std::round(v[0] * 1e3) / 1e3 - 0.5};
  };
  LeastSquaresResult res = SolveBoundedLeastSquares(p);
  EXPECT_NEAR(res.x[0], 0.5, 2e-3);
}

}  // namespace
}  // namespace gpusim::least_squares_test
