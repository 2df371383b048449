// The dataflow graph of one loop iteration, as DOT for Graphviz: the ops of
// one Op::layer value (a scan iteration / decoder layer, forward and
// backward), the buffers they read and write, one cluster per phase, edges
// labelled with the bytes they carry, residuals (values saved for the
// backward pass) drawn bold red. Values from outside the iteration
// (parameters, stacks, the previous iteration's carry) sit outside the
// clusters.
//
// A dynamic-update-slice writes into its first operand in place, so that
// edge points from the op to the buffer and carries the update's size.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "viz/step_view.h"
#include "viz/svg.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

using viz_internal::HumanBytes;
using viz_internal::RoleColor;

// A DOT double-quoted string: quotes and backslashes escaped; "\n" kept as
// DOT's line break.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string_view ClusterFill(Phase p) { return viz_internal::PhaseColor(p); }

}  // namespace

std::string DataflowDot(const StepReport& r, const VizOptions& o) {
  const Program& p = r.program;
  std::set<int> layers;
  for (const Op& op : p.ops) {
    if (op.layer >= 0) layers.insert(op.layer);
  }
  std::string out = "digraph dataflow {\n";
  absl::StrAppend(&out,
                  "  graph [rankdir=TB, newrank=true, nodesep=0.25, ranksep=0.35, fontname=\"Helvetica\", "
                  "fontsize=14, labelloc=t];\n"
                  "  node [fontname=\"Helvetica\", fontsize=10];\n"
                  "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\", arrowsize=0.6];\n");
  if (layers.empty()) {
    absl::StrAppend(&out, "  graph [label=", Quote(absl::StrCat(p.name, ": no loop iterations (no op has a layer)")),
                    "];\n  empty [shape=plaintext, label=\"(nothing to draw)\"];\n}\n");
    return out;
  }
  std::vector<int> ls(layers.begin(), layers.end());
  int layer = ls[ls.size() / 2];
  if (o.iteration >= 0 && layers.count(o.iteration) > 0) layer = o.iteration;

  std::vector<OpId> ops;
  int64_t skipped = 0;
  for (const Op& op : p.ops) {
    if (op.layer != layer) continue;
    if (static_cast<int>(ops.size()) >= o.max_dataflow_ops) {
      ++skipped;
      continue;
    }
    ops.push_back(op.id);
  }
  std::map<TensorId, OpId> producer;  // within the shown ops
  for (OpId id : ops) {
    for (TensorId t : p.op(id).outputs) producer[t] = id;
  }
  std::set<TensorId> tensors;
  for (OpId id : ops) {
    for (TensorId t : p.op(id).inputs) tensors.insert(t);
    for (TensorId t : p.op(id).outputs) tensors.insert(t);
  }
  absl::StrAppend(&out, "  graph [label=",
                  Quote(absl::StrCat(p.name, ": dataflow of loop iteration ", layer, " (", ops.size(), " ops",
                                     skipped > 0 ? absl::StrCat(", ", skipped, " more not shown") : "",
                                     "); edges: bytes; bold red: saved residuals")),
                  "];\n");

  auto tensor_node = [&](TensorId t) {
    const Tensor& x = p.tensor(t);
    const bool residual = x.role == Role::kResidual;
    const std::string fill(RoleColor(x.role));
    std::string label = absl::StrCat(x.name, "\n", HumanBytes(x.bytes()), " ", std::string(RoleName(x.role)));
    if (residual) label += "\nsaved residual";
    return absl::StrCat("    t", t, " [shape=ellipse, style=", residual ? "\"filled,bold\"" : "filled",
                        ", fillcolor=", Quote(fill), ", fontcolor=", Quote(viz_internal::TextColorOn(fill)),
                        residual ? ", color=\"#c00000\", penwidth=3" : ", color=\"#666666\"",
                        ", label=", Quote(label), "];\n");
  };
  auto op_node = [&](const Op& op) {
    return absl::StrCat("    o", op.id, " [shape=box, style=", op.recompute ? "\"rounded,dashed\"" : "rounded",
                        ", label=", Quote(absl::StrCat(op.name, "\n", std::string(OpKindName(op.kind)),
                                                       op.recompute ? " (recompute)" : "")),
                        "];\n");
  };

  for (Phase ph : {Phase::kForward, Phase::kBackward, Phase::kOptimizer, Phase::kOther}) {
    std::string body;
    for (OpId id : ops) {
      if (p.op(id).phase == ph) body += op_node(p.op(id));
    }
    for (TensorId t : tensors) {
      auto it = producer.find(t);
      if (it != producer.end() && p.op(it->second).phase == ph) body += tensor_node(t);
    }
    if (body.empty()) continue;
    absl::StrAppend(&out, "  subgraph cluster_", std::string(PhaseName(ph)), " {\n    label=", Quote(std::string(PhaseName(ph))),
                    "; style=filled; fillcolor=", Quote(std::string(ClusterFill(ph))),
                    "; color=\"#999999\";\n", body, "  }\n");
  }
  absl::StrAppend(&out, "  // values from outside the iteration\n");
  for (TensorId t : tensors) {
    if (producer.count(t) == 0) {
      std::string n = tensor_node(t);
      out += n.substr(2);  // no cluster indent
    }
  }
  for (OpId id : ops) {
    const Op& op = p.op(id);
    const bool in_place = op.kind == OpKind::kDynamicUpdateSlice && !op.inputs.empty() && op.outputs.empty();
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const TensorId t = op.inputs[k];
      const Tensor& x = p.tensor(t);
      const bool residual = x.role == Role::kResidual;
      const std::string style = residual ? ", color=\"#c00000\", penwidth=2" : "";
      if (in_place && k == 0) {
        const Bytes update = op.inputs.size() > 1 ? p.tensor(op.inputs[1]).bytes() : x.bytes();
        absl::StrAppend(&out, "  o", id, " -> t", t, " [label=", Quote(absl::StrCat("in place ", HumanBytes(update))),
                        ", style=bold", style, "];\n");
        continue;
      }
      absl::StrAppend(&out, "  t", t, " -> o", id, " [label=", Quote(HumanBytes(x.bytes())), style, "];\n");
    }
    for (TensorId t : op.outputs) {
      const Tensor& x = p.tensor(t);
      absl::StrAppend(&out, "  o", id, " -> t", t, " [label=", Quote(HumanBytes(x.bytes())),
                      x.role == Role::kResidual ? ", color=\"#c00000\", penwidth=2" : "", "];\n");
    }
  }
  out += "}\n";
  return out;
}

}  // namespace gpusim
