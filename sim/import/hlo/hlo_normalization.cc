#include "sim/import/hlo/hlo_normalization.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpusim {
namespace {

// xla/service/gpu/reduction_utils.cc ReductionDimensionRaceFreeBound for a
// row reduction: MinThreadsXRowReduction (1024, ptxas >= 12.2) x the row
// tiling's 16 elements per thread (GetReductionTiling). Note
// [Normalisation fusions]: a longer row is left to the reduction pipeline.
constexpr int64_t kRowReductionRaceFreeBound = 1024 * 16;

bool IsUnaryElementwise(const std::string& op) {
  static const std::set<std::string>* const k = new std::set<std::string>{
      "abs", "cbrt", "ceil", "convert", "copy", "cosine", "erf", "exponential", "exponential-minus-one", "floor",
      "is-finite", "log", "log-plus-one", "logistic", "negate", "not", "reduce-precision", "round-nearest-afz",
      "round-nearest-even", "rsqrt", "sign", "sine", "sqrt", "tan", "tanh"};
  return k->count(op) > 0;
}

bool IsBinaryElementwise(const std::string& op) {
  static const std::set<std::string>* const k = new std::set<std::string>{
      "add", "and", "atan2", "divide", "maximum", "minimum", "multiply", "or", "power", "remainder", "subtract", "xor"};
  return k->count(op) > 0;
}

class Diamonds {
 public:
  Diamonds(const HloComputation& c, const std::vector<bool>& live) : c_(c), live_(live) {
    users_.assign(c.instructions.size(), {});
    for (size_t i = 0; i < c.instructions.size(); ++i) {
      if (!live[i]) continue;
      for (int o : c.instructions[i].operands) {
        auto& u = users_[static_cast<size_t>(o)];
        if (std::find(u.begin(), u.end(), static_cast<int>(i)) == u.end()) u.push_back(static_cast<int>(i));
      }
    }
  }

  const HloInstruction& I(int i) const { return c_.instructions[static_cast<size_t>(i)]; }
  size_t Users(int i) const { return users_[static_cast<size_t>(i)].size(); }

  // A reshape, a bitcast, or a broadcast that only adds size-1 dimensions:
  // bitcasts once the algebraic simplifier ran.
  bool IsView(int i) const {
    const HloInstruction& x = I(i);
    if (x.opcode == "reshape" || x.opcode == "bitcast") return x.operands.size() == 1;
    return x.opcode == "broadcast" && x.operands.size() == 1 &&
           I(x.operands[0]).shape.ElementCount() == x.shape.ElementCount();
  }

  // A broadcast (through views) of a scalar constant or parameter.
  bool IsSplat(int i) const {
    while (IsView(i) && I(i).opcode != "broadcast") i = I(i).operands[0];
    const HloInstruction& x = I(i);
    if (x.opcode != "broadcast" || x.operands.size() != 1) return false;
    const HloInstruction& s = I(x.operands[0]);
    return s.shape.dims.empty() && (s.opcode == "constant" || s.opcode == "parameter");
  }

  // softmax_rewriter_triton.cc IsTriviallyFusible.
  bool TriviallyFusible(int i) const {
    if (Users(i) > 1) return false;
    const HloInstruction& x = I(i);
    if (IsView(i)) return true;
    if (IsUnaryElementwise(x.opcode) && x.operands.size() == 1) return true;
    if (IsBinaryElementwise(x.opcode) && x.operands.size() == 2) {
      return x.operands[0] == x.operands[1] || (IsSplat(x.operands[0]) != IsSplat(x.operands[1]));
    }
    return false;
  }

  // ChooseOperandForFusionProcessing: the first non-splat operand.
  int Follow(int i) const {
    const HloInstruction& x = I(i);
    if (x.operands.size() > 1 && IsSplat(x.operands[0])) return x.operands[1];
    return x.operands[0];
  }

  // TrivialEdge: from `i` through trivially fusible ops to an `opcode`
  // (a broadcast that is not a view), or -1.
  int Edge(int i, const std::string& opcode) const {
    while (!(I(i).opcode == opcode && !(opcode == "broadcast" && IsView(i)))) {
      if (!TriviallyFusible(i)) return -1;
      i = Follow(i);
    }
    return i;
  }

  // The diamond's producer when `r` is a diamond's root, else -1.
  int Match(int r) const {
    const HloInstruction& root = I(r);
    if (!IsBinaryElementwise(root.opcode) || root.operands.size() != 2) return -1;
    if (root.shape.element != "f32" && root.shape.element != "bf16" && root.shape.element != "f16") return -1;
    const int b = Edge(root.operands[1], "broadcast");
    if (b < 0) return -1;
    const int red = Edge(I(b).operands[0], "reduce");
    if (red < 0 || I(red).operands.size() != 2 || Users(b) != 1 || Users(red) != 1) return -1;
    const HloInstruction& reduce = I(red);
    const int64_t rank = static_cast<int64_t>(I(reduce.operands[0]).shape.dims.size());
    int64_t dim = -1;
    const std::string dims(absl::StripPrefix(absl::StripSuffix(reduce.attr("dimensions"), "}"), "{"));
    if (!absl::SimpleAtoi(dims, &dim) || dim != rank - 1 || I(reduce.operands[1]).opcode != "constant") return -1;
    if (I(reduce.operands[0]).shape.dims.back() > kRowReductionRaceFreeBound) return -1;
    const int64_t last = static_cast<int64_t>(I(b).shape.dims.size()) - 1;
    for (absl::string_view d : absl::StrSplit(absl::StripPrefix(absl::StripSuffix(I(b).attr("dimensions"), "}"), "{"), ',',
                                              absl::SkipWhitespace())) {
      int64_t v = -1;
      if (absl::SimpleAtoi(d, &v) && v == last) return -1;
    }
    int producer = reduce.operands[0];
    while (TriviallyFusible(producer)) producer = Follow(producer);
    int x = root.operands[0];
    while (x != producer) {
      if (!TriviallyFusible(x)) return -1;
      x = Follow(x);
    }
    if (producer != root.operands[0] && Users(root.operands[0]) != 1) return -1;
    return producer;
  }

  // Does every user of `e` lead (through one-user ops) into diamond root `r`?
  bool FeedsOnly(int e, int r) const {
    for (int u : users_[static_cast<size_t>(e)]) {
      int x = u;
      while (x != r && Users(x) == 1) x = users_[static_cast<size_t>(x)][0];
      if (x != r) return false;
    }
    return true;
  }

  std::vector<bool> Outputs() const {
    const size_t n = c_.instructions.size();
    std::vector<int> producer(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (live_[i]) producer[i] = Match(static_cast<int>(i));
    }
    std::vector<bool> out(n, false), absorbed(n, false);
    for (size_t i = 0; i < n; ++i) {
      if (producer[i] < 0 || absorbed[i]) continue;
      int e = static_cast<int>(i);
      while (true) {
        if (Users(e) == 1) {
          const int u = users_[static_cast<size_t>(e)][0];
          const HloInstruction& x = I(u);
          const bool elementwise = IsView(u) || (IsUnaryElementwise(x.opcode) && x.operands.size() == 1) ||
                                   (IsBinaryElementwise(x.opcode) && x.operands.size() == 2 && producer[static_cast<size_t>(u)] < 0 &&
                                    (IsSplat(x.operands[0]) || IsSplat(x.operands[1])));
          if (elementwise) {
            e = u;
            continue;
          }
        }
        int next = -1;
        for (size_t j = 0; j < n && next < 0; ++j) {
          if (producer[j] == e && !absorbed[j] && FeedsOnly(e, static_cast<int>(j))) next = static_cast<int>(j);
        }
        if (next < 0) break;
        absorbed[static_cast<size_t>(next)] = true;
        e = next;
      }
      out[static_cast<size_t>(e)] = true;
    }
    return out;
  }

 private:
  const HloComputation& c_;
  const std::vector<bool>& live_;
  std::vector<std::vector<int>> users_;
};

}  // namespace

std::vector<bool> NormalizationFusionOutputs(const HloComputation& comp, const std::vector<bool>& live) {
  return Diamonds(comp, live).Outputs();
}

}  // namespace gpusim
