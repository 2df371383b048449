// See capabilities.h.
#include "sim/step/capabilities.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/alloc/allocator.h"
#include "sim/base/status.h"
#include "sim/config/settings.h"
#include "sim/lower/semantics.h"
#include "sim/remat/remat_policy.h"
#include "sim/step/families.h"

namespace gpusim {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Where(const RunSpec& spec, const std::string& path) {
  auto it = spec.written.find(path);
  if (it == spec.written.end() || it->second.empty()) return "";
  return it->second + ": ";
}

// Writes a family's fixed value for `path` into `s`.
void SetFixed(RunSpec& s, const std::string& path, const std::string& value) {
  if (path == "loop.mode") {
    s.loop.mode = value;
  } else if (path == "model.attention") {
    s.model.attention = value;
  } else if (path == "model.tied_embeddings") {
    s.model.tied_embeddings = value == "true";
  } else if (path == "model.scan_layers") {
    s.model.scan_layers = value == "true";
  } else if (path == "model.param_scan_axis") {
    s.model.param_scan_axis = std::stoi(value);
  } else {
    GPUSIM_CHECK(false && "ModelFamily::fixed names a setting SetFixed does not write");
  }
}

}  // namespace

std::vector<std::string> ModelledSettings(const RunSpec& spec) {
  absl::StatusOr<const ModelFamily*> f = FamilyOf(spec);
  GPUSIM_CHECK(f.ok());
  std::vector<std::string> out = (*f)->settings(LoweringSemanticsOf(spec));
  out.push_back("allocator.impl");
  return out;
}

absl::StatusOr<RunSpec> ApplyCapabilities(const RunSpec& given) {
  // Note [Registry names fold case] (sim/base/names.h): a policy or
  // allocator written in another case is the registered one from here on.
  RunSpec spec = given;
  spec.remat.policy = FoldRematPolicyName(spec.remat.policy);
  for (std::string& p : spec.remat.policies) p = FoldRematPolicyName(p);
  spec.allocator.impl = FoldAllocatorName(spec.allocator.impl);
  ASSIGN_OR_RETURN(const ModelFamily* family, FamilyOf(spec));
  const LoweringSemantics semantics = LoweringSemanticsOf(spec);
  const std::vector<std::string>& modelled = family->settings(semantics);
  const std::string who = family->name == "program"
                              ? absl::StrCat("a program file under framework '", spec.framework, "'")
                              : absl::StrCat("model family '", family->name, "' under framework '", spec.framework,
                                             "'");
  // Note [Eager host costs] (sim/lower/eager/host_timeline.h): every eager
  // step charges the host timeline; an XLA step is one executable launch
  // whose host side is not modelled, so a device file's host: block is
  // refused there rather than ignored.
  if (spec.device.host_given && !semantics.charge_host_timeline) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.device.source_file, ": host: (host.op, host.module) is modelled only for eager steps (framework "
        "pytorch, a Megatron-LM launch line, a recorded PyTorch trace), not for ", who,
        ": an XLA step is one executable launch, whose host side is not modelled"));
  }
  // Note [Recorded host costs] (sim/lower/eager/host_timeline.h): these
  // price the host work a recorded PyTorch step carries (trace format 1.6
  // host=, `gpusim replay`); a model config's step has none to price.
  if (spec.device.host_recorded_given) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.device.source_file, ": host.dispatch, host.node and host.python_module price the host work a recorded "
        "PyTorch step carries (trace format 1.6 host=; gpusim replay), not ", who,
        ", whose eager step pays host.op per kernel and host.module per module call (Note [Host cost per kernel])"));
  }
  RunSpec out = spec;
  if (out.megatron.present) UseMegatronHostCosts(&out.device);  // Note [Megatron host costs]
  for (const SettingInfo& s : RunSettings()) {
    if (s.path == "allocator.impl") continue;
    const bool written = spec.written.count(s.path) > 0;
    // A setting only the XLA lowering reads that an eager step of this
    // family does not model runs the eager value (Note [Framework
    // semantics], sim/lower/semantics.h); written by the run otherwise, it
    // is refused with what eager PyTorch does instead.
    const XlaOnlySetting* xla_only = nullptr;
    if (!semantics.scans_layers && !Contains(modelled, s.path) && family->fixed.count(s.path) == 0) {
      for (const XlaOnlySetting& x : XlaOnlySettings()) {
        if (s.path == x.path) xla_only = &x;
      }
    }
    if (xla_only != nullptr) {
      const std::string value = s.value(spec);
      if (value == xla_only->eager_value) continue;
      // A model file's value is that model's default under jax (MaxText's
      // param_scan_axis 1 and scan_layers in configs/models/llama*.yaml).
      if (!written || spec.from_model_file.count(s.path) > 0) {
        SetFixed(out, s.path, xla_only->eager_value);
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          Where(spec, s.path), s.path, ": ", value, " is not modelled for ", who, ": it is ", xla_only->why,
          " (it runs ", s.path, " = ", xla_only->eager_value, "); remove it, or use framework: jax"));
    }
    auto fixed = family->fixed.find(s.path);
    if (Contains(modelled, s.path)) {
      // The family's default, where it is not the spec's (ModelFamily::fixed).
      if (fixed != family->fixed.end() && !written) SetFixed(out, s.path, fixed->second);
      continue;
    }
    const std::string value = s.value(spec);
    if (fixed != family->fixed.end()) {
      if (value == fixed->second) continue;
      if (!written) {
        SetFixed(out, s.path, fixed->second);
        continue;
      }
    } else if (value == s.default_value(spec)) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        Where(spec, s.path), s.path, ": not modelled for ", who, " (this family models: ",
        absl::StrJoin(modelled, ", "), fixed != family->fixed.end() ? absl::StrCat("; it runs ", s.path, " = ", fixed->second) : "",
        ")"));
  }
  if (family->check != nullptr) RETURN_IF_ERROR(family->check(out));
  // Allocator options of an XLA step: its footprint is buffer assignment,
  // checked against JAX's BFC arena; another runtime allocator would not be
  // what JAX runs. Program files replay their buffers through the allocator.
  if (semantics.runtime_check == RuntimeCheck::kJaxArena) {
    const bool known = std::any_of(std::begin(kJaxAllocators), std::end(kJaxAllocators),
                                   [&](const char* a) { return spec.allocator.impl == a; });
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(spec, "allocator.impl"), "allocator.impl: '", spec.allocator.impl, "' not modelled for ", who,
          " (an XLA step's footprint is its buffer assignment, checked against JAX's BFC arena: this combination "
          "models allocator.impl ideal or bfc)"));
    }
    if (spec.allocator.impl == "ideal" && !spec.allocator.options.empty()) {
      const std::string key = spec.allocator.options.begin()->first;
      return absl::InvalidArgumentError(
          absl::StrCat(Where(spec, "allocator." + key), "allocator.", key, ": allocator 'ideal' takes no options"));
    }
  }
  // The allocator's options, read once into its typed options with errors
  // where they were written (every builder of this spec's allocator reuses
  // them: AllocatorSpec::typed).
  RETURN_IF_ERROR(ParseAllocatorOptions(&out));
  return out;
}

}  // namespace gpusim
