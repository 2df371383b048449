// Bounded Levenberg–Marquardt; see least_squares.h.
#include "sim/calibrate/least_squares.h"

#include <algorithm>
#include <cmath>

#include "sim/base/status.h"

namespace gpusim {
namespace {

double SumSquares(const std::vector<double>& r) {
  double s = 0;
  for (double v : r) s += v * v;
  return s;
}

// Solves A x = b for a small symmetric positive (semi)definite A by Gaussian
// elimination with partial pivoting; singular pivots give 0 for that unknown.
std::vector<double> Solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[piv][c])) piv = r;
    }
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    if (std::fabs(a[c][c]) < 1e-300) continue;
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n, 0);
  for (size_t i = n; i-- > 0;) {
    if (std::fabs(a[i][i]) < 1e-300) continue;
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= a[i][k] * x[k];
    x[i] = s / a[i][i];
  }
  return x;
}

}  // namespace

LeastSquaresResult SolveBoundedLeastSquares(const LeastSquaresProblem& p,
                                            const LeastSquaresOptions& o) {
  const size_t n = p.x0.size();
  GPUSIM_CHECK(p.lower.size() == n && p.upper.size() == n);
  LeastSquaresResult res;
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) {
    GPUSIM_CHECK(p.lower[i] <= p.upper[i]);
    x[i] = std::clamp(p.x0[i], p.lower[i], p.upper[i]);
  }
  auto eval = [&](const std::vector<double>& at) {
    ++res.evaluations;
    return p.residuals(at);
  };
  std::vector<double> r = eval(x);
  double cost = SumSquares(r);
  res.initial_cost = cost;
  double lambda = 1e-3;
  for (int it = 0; it < o.max_iterations && n > 0; ++it) {
    res.iterations = it + 1;
    // Jacobian by forward differences, stepping inward at an upper bound.
    std::vector<std::vector<double>> jac(n);
    // A residual computed from quantised quantities (integer-nanosecond
    // times) can be flat at a tiny step: widen it tenfold, up to 0.1, until
    // the column's data residuals move.
    for (size_t j = 0; j < n; ++j) {
      jac[j].assign(r.size(), 0);
      for (double scale = 1; scale <= 1e4; scale *= 10) {
        std::vector<double> xp = x;
        double h = std::min(0.1, o.difference_step * scale) * std::max(1.0, std::fabs(x[j]));
        if (xp[j] + h > p.upper[j]) h = -h;
        xp[j] += h;
        std::vector<double> rp = eval(xp);
        GPUSIM_CHECK(rp.size() == r.size());
        bool moved = false;
        for (size_t i = 0; i < r.size(); ++i) {
          jac[j][i] = (rp[i] - r[i]) / h;
          if (i < p.data_residuals) moved |= jac[j][i] != 0;
        }
        if (moved || o.difference_step * scale >= 0.1) break;
      }
    }
    std::vector<std::vector<double>> a(n, std::vector<double>(n, 0));
    std::vector<double> g(n, 0);
    for (size_t j = 0; j < n; ++j) {
      for (size_t k = 0; k < n; ++k) {
        for (size_t i = 0; i < r.size(); ++i) a[j][k] += jac[j][i] * jac[k][i];
      }
      for (size_t i = 0; i < r.size(); ++i) g[j] += jac[j][i] * r[i];
    }
    // Variables at a bound that the descent direction pushes outward stay.
    std::vector<bool> fixed(n, false);
    for (size_t j = 0; j < n; ++j) {
      fixed[j] = (x[j] >= p.upper[j] && g[j] < 0) || (x[j] <= p.lower[j] && g[j] > 0);
    }
    bool accepted = false;
    double step_norm = 0;
    std::vector<double> xn, rn;
    double cn = cost;
    for (int inner = 0; inner < 30 && !accepted; ++inner) {
      std::vector<std::vector<double>> m = a;
      std::vector<double> b(n);
      for (size_t j = 0; j < n; ++j) {
        m[j][j] += lambda * std::max(a[j][j], 1e-12);
        b[j] = -g[j];
        if (fixed[j]) {
          for (size_t k = 0; k < n; ++k) m[j][k] = m[k][j] = 0;
          m[j][j] = 1;
          b[j] = 0;
        }
      }
      std::vector<double> d = Solve(m, b);
      xn = x;
      step_norm = 0;
      for (size_t j = 0; j < n; ++j) {
        xn[j] = std::clamp(x[j] + d[j], p.lower[j], p.upper[j]);
        step_norm = std::max(step_norm, std::fabs(xn[j] - x[j]));
      }
      if (step_norm == 0) break;
      rn = eval(xn);
      cn = SumSquares(rn);
      if (cn < cost) {
        accepted = true;
        lambda = std::max(lambda / 3, 1e-12);
      } else {
        lambda *= 4;
      }
    }
    if (!accepted) break;
    const double decrease = cost - cn;
    x = std::move(xn);
    r = std::move(rn);
    cost = cn;
    if (decrease <= o.relative_tolerance * std::max(cost, 1e-300) || step_norm < o.step_tolerance) break;
  }
  res.x = std::move(x);
  res.cost = cost;
  return res;
}

}  // namespace gpusim
