// The dataflow graph of one loop iteration, as DOT for Graphviz: the ops of
// one Op::layer value (a scan iteration / decoder layer, forward and
// backward), the buffers they read and write, one cluster per phase, edges
// labelled with the bytes they carry, residuals (values saved for the
// backward pass) drawn bold red. Values from outside the iteration
// (parameters, stacks, the previous iteration's carry) sit outside the
// clusters. Given the other loop mode's lowering too (VizOptions::
// other_loop_mode), both are drawn, rolled left and unrolled right, each in
// an outer cluster with its own prefix on every DOT id.
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

namespace {

// One lowering's iteration: its nodes (phase clusters, then the values from
// outside the iteration) and edges, every DOT id prefixed with `prefix` so
// two lowerings can share a graph.
struct IterationDot {
  std::string title;  // "dataflow of loop iteration 16 (120 ops)"
  std::string nodes;
  std::string edges;
  bool empty = true;
};

IterationDot DrawIteration(const StepReport& r, const VizOptions& o, const std::string& prefix,
                           const std::string& indent) {
  IterationDot d;
  const Program& p = r.program;
  std::set<int> layers;
  for (const Op& op : p.ops) {
    if (op.layer >= 0) layers.insert(op.layer);
  }
  if (layers.empty()) {
    d.title = "no loop iterations (no op has a layer)";
    d.nodes = absl::StrCat(indent, prefix, "empty [shape=plaintext, label=\"(nothing to draw)\"];\n");
    return d;
  }
  d.empty = false;
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
  // Saved for the backward pass: residuals, and any value a forward op made
  // that a backward op reads (an unrolled lowering keeps them as plain
  // activations or loop state rather than residual stacks).
  std::set<TensorId> saved;
  {
    std::map<TensorId, Phase> made_in;
    for (const Op& op : p.ops) {
      for (TensorId t : op.outputs) made_in.emplace(t, op.phase);
    }
    for (const Op& op : p.ops) {
      if (op.phase != Phase::kBackward) continue;
      for (TensorId t : op.inputs) {
        auto it = made_in.find(t);
        if (it != made_in.end() && it->second == Phase::kForward) saved.insert(t);
      }
    }
    for (TensorId t : tensors) {
      if (p.tensor(t).role == Role::kResidual) saved.insert(t);
    }
  }
  d.title = absl::StrCat("dataflow of loop iteration ", layer, " (", ops.size(), " ops",
                         skipped > 0 ? absl::StrCat(", ", skipped, " more not shown") : "", ")");

  auto tensor_node = [&](TensorId t, const std::string& ind) {
    const Tensor& x = p.tensor(t);
    const bool residual = saved.count(t) > 0;
    const std::string fill(RoleColor(x.role));
    std::string label = absl::StrCat(x.name, "\n", HumanBytes(x.bytes()), " ", std::string(RoleName(x.role)));
    if (residual) label += x.role == Role::kResidual ? "\nsaved residual" : "\nsaved for backward";
    return absl::StrCat(ind, prefix, "t", t, " [shape=ellipse, style=", residual ? "\"filled,bold\"" : "filled",
                        ", fillcolor=", Quote(fill), ", fontcolor=", Quote(viz_internal::TextColorOn(fill)),
                        residual ? ", color=\"#c00000\", penwidth=3" : ", color=\"#666666\"",
                        ", label=", Quote(label), "];\n");
  };
  auto op_node = [&](const Op& op, const std::string& ind) {
    return absl::StrCat(ind, prefix, "o", op.id, " [shape=box, style=", op.recompute ? "\"rounded,dashed\"" : "rounded",
                        ", label=", Quote(absl::StrCat(op.name, "\n", std::string(OpKindName(op.kind)),
                                                       op.recompute ? " (recompute)" : "")),
                        "];\n");
  };

  const std::string inner = indent + "  ";
  for (Phase ph : {Phase::kForward, Phase::kBackward, Phase::kOptimizer, Phase::kOther}) {
    std::string body;
    for (OpId id : ops) {
      if (p.op(id).phase == ph) body += op_node(p.op(id), inner);
    }
    for (TensorId t : tensors) {
      auto it = producer.find(t);
      if (it != producer.end() && p.op(it->second).phase == ph) body += tensor_node(t, inner);
    }
    if (body.empty()) continue;
    absl::StrAppend(&d.nodes, indent, "subgraph cluster_", prefix, std::string(PhaseName(ph)),
                    " {\n", inner, "label=", Quote(std::string(PhaseName(ph))),
                    "; style=filled; fillcolor=", Quote(std::string(ClusterFill(ph))), "; color=\"#999999\";\n", body,
                    indent, "}\n");
  }
  absl::StrAppend(&d.nodes, indent, "// values from outside the iteration\n");
  for (TensorId t : tensors) {
    if (producer.count(t) == 0) d.nodes += tensor_node(t, indent);
  }
  for (OpId id : ops) {
    const Op& op = p.op(id);
    const bool in_place = op.kind == OpKind::kDynamicUpdateSlice && !op.inputs.empty() && op.outputs.empty();
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const TensorId t = op.inputs[k];
      const Tensor& x = p.tensor(t);
      const bool residual = saved.count(t) > 0;
      const std::string style = residual ? ", color=\"#c00000\", penwidth=2" : "";
      if (in_place && k == 0) {
        const Bytes update = op.inputs.size() > 1 ? p.tensor(op.inputs[1]).bytes() : x.bytes();
        absl::StrAppend(&d.edges, "  ", prefix, "o", id, " -> ", prefix, "t", t,
                        " [label=", Quote(absl::StrCat("in place ", HumanBytes(update))), ", style=bold", style, "];\n");
        continue;
      }
      absl::StrAppend(&d.edges, "  ", prefix, "t", t, " -> ", prefix, "o", id, " [label=", Quote(HumanBytes(x.bytes())),
                      style, "];\n");
    }
    for (TensorId t : op.outputs) {
      const Tensor& x = p.tensor(t);
      absl::StrAppend(&d.edges, "  ", prefix, "o", id, " -> ", prefix, "t", t, " [label=", Quote(HumanBytes(x.bytes())),
                      saved.count(t) > 0 ? ", color=\"#c00000\", penwidth=2" : "", "];\n");
    }
  }
  return d;
}

}  // namespace

std::string DataflowDot(const StepReport& r, const VizOptions& o) {
  std::string out = "digraph dataflow {\n";
  absl::StrAppend(&out,
                  "  graph [rankdir=TB, newrank=true, nodesep=0.25, ranksep=0.35, fontname=\"Helvetica\", "
                  "fontsize=14, labelloc=t];\n"
                  "  node [fontname=\"Helvetica\", fontsize=10];\n"
                  "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\", arrowsize=0.6];\n");
  const std::string legend = "edges: bytes; bold red: saved residuals (values the backward pass reads)";
  if (o.other_loop_mode == nullptr) {
    const IterationDot d = DrawIteration(r, o, "", "  ");
    absl::StrAppend(&out, "  graph [label=", Quote(absl::StrCat(r.program.name, ": ", d.title, d.empty ? "" : "; ", d.empty ? "" : legend)),
                    "];\n", d.nodes, d.edges, "}\n");
    return out;
  }
  // Rolled on the left, unrolled on the right, each in its own cluster; the
  // two are disconnected, so dot lays them out side by side.
  const bool r_unrolled = r.spec.loop.mode == "unrolled";
  const StepReport& rolled = r_unrolled ? *o.other_loop_mode : r;
  const StepReport& unrolled = r_unrolled ? r : *o.other_loop_mode;
  absl::StrAppend(&out, "  graph [label=",
                  Quote(absl::StrCat(r.program.name, ": one loop iteration, rolled (left) and unrolled (right); ",
                                     legend)),
                  "];\n");
  for (const auto& [name, rep] : {std::pair<std::string, const StepReport*>{"rolled", &rolled},
                                  std::pair<std::string, const StepReport*>{"unrolled", &unrolled}}) {
    const IterationDot d = DrawIteration(*rep, o, name + "_", "    ");
    absl::StrAppend(&out, "  subgraph cluster_", name, " {\n    label=",
                    Quote(absl::StrCat(name, " lowering (loop.mode=", name, "): ", d.title, "; peak ",
                                       HumanBytes(rep->peak))),
                    "; fontsize=16; style=\"rounded\"; color=\"#333333\"; penwidth=1.5;\n", d.nodes, "  }\n", d.edges);
  }
  out += "}\n";
  return out;
}

}  // namespace gpusim
