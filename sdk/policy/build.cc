// build_policy / load_policy: spec -> module tree (each module by its kind, sdk/policy/kinds/) ->
// parameters.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <absl/strings/cord.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>

#include "sdk/log/log.h"
#include "sdk/nn/ensemble_module.h"
#include "sdk/nn/errors.h"
#include "sdk/nn/layers.h"
#include "sdk/nn/multi_agent_mlp.h"
#include "sdk/nn/safe_module.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/policy/kinds/action_spec.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/limits.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy {
namespace {

std::string join_path(const std::string& base_dir, const std::string& file) {
  if (file.empty() || file[0] == '/' || base_dir.empty()) return file;
  return absl::StrCat(base_dir, "/", file);
}

}  // namespace

namespace kinds {

std::string BuildContext::file(const std::string& name) const { return join_path(base_dir_, name); }

ModulePtr BuildContext::module(const tdpolicy::Module& spec, const std::string& path) const {
  const ModuleKind* kind = module_kind(spec.kind_case());
  if (kind == nullptr) throw std::invalid_argument(absl::StrCat(path, ": no module kind is set"));
  ModulePtr module = kind->build(spec, path, *this);
  // A probabilistic module projects its own samples (it stays one inside a probabilistic
  // sequence); any other module is wrapped.
  if (spec.projections_size() == 0 || spec.kind_case() == tdpolicy::Module::kProbabilistic) return module;
  return nn::SafeModule(module, projections_of(spec)).ptr();
}

}  // namespace kinds

namespace {

absl::Status load_parameters(const tdpolicy::Parameters& parameters, const std::string& where,
                             torch::nn::Module& module, const LoadOptions& options) {
  std::map<std::string, at::Tensor> targets;
  for (const auto& item : module.named_parameters()) targets.emplace(item.key(), item.value());
  for (const auto& item : module.named_buffers()) targets.emplace(item.key(), item.value());
  std::set<std::string> loaded;
  torch::NoGradGuard no_grad;
  // Check everything before copying anything, so a bad file leaves the module as it was.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  for (int i = 0; i < parameters.tensors_size(); ++i) {
    const auto& named = parameters.tensors(i);
    const std::string field = absl::StrCat(where, ".tensors[", i, "] (\"", named.name(), "\")");
    auto target = targets.find(named.name());
    if (target == targets.end()) {
      std::vector<std::string> names;
      for (const auto& [name, tensor] : targets) names.push_back(name);
      return absl::InvalidArgumentError(absl::StrCat(field, ": the policy has no such parameter (it has: ",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    if (!loaded.insert(named.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": given twice"));
    }
    // The declared shape must be the layer's before anything is allocated: the layer's size is
    // bounded by the validator, a file's declared shape by nothing.
    const std::vector<int64_t> shape(named.tensor().shape().begin(), named.tensor().shape().end());
    if (at::IntArrayRef(shape) != target->second.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": has shape [", absl::StrJoin(shape, ", "), "] but the layer's is [",
          absl::StrJoin(target->second.sizes(), ", "), "] (hint: the layer sizes in the spec and the trained weights disagree)"));
    }
    auto value = from_tensor_proto(named.tensor());
    if (!value.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", value.status().message()));
    if (value->is_floating_point() && !at::isfinite(*value).all().item<bool>()) {
      const int64_t bad = (~at::isfinite(*value)).sum().item<int64_t>();
      const std::string message = absl::StrCat(field, ": ", bad, " of its ", value->numel(),
                                               " values are NaN or infinite");
      if (!options.allow_non_finite_parameters) {
        return absl::InvalidArgumentError(absl::StrCat(
            message, " (hint: a diverged training run? allow them with LoadOptions.allow_non_finite_parameters or "
                     "the tdp flag --allow_non_finite_parameters)"));
      }
      tdp::logger()->warn("{} (allowed by allow_non_finite_parameters)", message);
    }
    copies.emplace_back(target->second, *value);
  }
  std::vector<std::string> missing;
  for (const auto& [name, tensor] : targets) {
    if (!loaded.count(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing parameters: ", absl::StrJoin(missing, ", ")));
  }
  for (auto& [target, value] : copies) target.copy_(value);
  return absl::OkStatus();
}

// A seeded policy's initial parameters, drawn from `generator` in the order the modules' own
// constructors drew them from the global generator (depth first, children in order; a layer's
// parameters in its reset's order), so the weights are those a seeded global generator gave.
// An EnsembleModule drew its template (built first), then each copy: the same here.
void initialize(torch::nn::Module& module, const at::Generator& generator) {
  torch::NoGradGuard no_grad;
  if (nn::reset_layer_parameters(module, generator)) return;
  if (auto* conv = dynamic_cast<nn::Conv2dImpl*>(&module)) {
    nn::kaiming_uniform(conv->weight, std::sqrt(5.0), generator);
    if (conv->bias.defined()) {
      const at::Tensor& w = conv->weight;
      const double bound = 1.0 / std::sqrt(static_cast<double>(w.size(1) * w.size(2) * w.size(3)));
      conv->bias.uniform_(-bound, bound, generator);
    }
    return;
  }
  if (dynamic_cast<nn::MultiAgentMlpImpl*>(&module) != nullptr) {
    // One child per Linear under "params": weight, then bias, U(-1/sqrt(in), 1/sqrt(in)).
    for (const auto& layer : module.named_children()["params"]->children()) {
      auto tensors = layer->named_parameters(/*recurse=*/false);
      at::Tensor weight = tensors["weight"];
      at::Tensor bias = tensors["bias"];
      const double bound = 1.0 / std::sqrt(static_cast<double>(weight.size(-1)));
      weight.uniform_(-bound, bound, generator);
      bias.uniform_(-bound, bound, generator);
    }
    return;
  }
  if (auto* ensemble = dynamic_cast<nn::EnsembleModuleImpl*>(&module)) {
    initialize(*ensemble->module(), generator);
    ensemble->reset_parameters();  // the copies, from the InitGeneratorGuard's generator
    return;
  }
  for (const auto& child : module.children()) initialize(*child, generator);
}

absl::StatusOr<Policy> build_policy_unguarded(const tdpolicy::PolicySpec& spec, const std::string& source,
                                             const std::string& base_dir, const LoadOptions& options) {
  if (absl::Status valid = validate_spec(spec, source, options); !valid.ok()) return valid;
  Policy policy;
  policy.spec = spec;
  policy.spec.clear_parameters();
  try {
    kinds::BuildContext builder(base_dir, options.limits);
    if (spec.has_init_seed()) {
      // The layers' constructors draw from the global generator, which other threads may draw
      // from meanwhile: those values are discarded, and every parameter is drawn again from a
      // generator of the spec's own, in construction order (see initialize). Saved and restored,
      // so that a load on its own never disturbs the caller's random stream; serialized so that
      // concurrent loads restore it in turn.
      static std::mutex seeded_build;
      std::lock_guard<std::mutex> serialized(seeded_build);
      at::Generator global = at::detail::getDefaultCPUGenerator();
      at::Tensor state = global.get_state();
      try {
        policy.module = builder.module(spec.module(), "module");
      } catch (...) {
        global.set_state(state);
        throw;
      }
      global.set_state(state);
      at::Generator own = at::detail::createCPUGenerator(spec.init_seed());
      nn::InitGeneratorGuard guard(own);
      initialize(*policy.module, own);
    } else {
      policy.module = builder.module(spec.module(), "module");
    }
  } catch (const std::exception& error) {
    // Running out of memory says nothing about the spec: it propagates, as std::bad_alloc (the C
    // API's TDP_OUT_OF_MEMORY, Python's MemoryError).
    if (nn::detail::is_allocation_failure(error)) throw std::bad_alloc();
    const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
    return absl::InvalidArgumentError(absl::StrCat(source, ": module: cannot build the policy: ",
                                                   torch_error != nullptr ? torch_error->what_without_backtrace()
                                                                          : error.what()));
  }
  if (spec.has_parameters()) {
    if (auto status =
            load_parameters(spec.parameters(), absl::StrCat(source, ": parameters"), *policy.module, options);
        !status.ok()) {
      return status;
    }
  } else if (!spec.parameters_file().empty()) {
    const std::string file = join_path(base_dir, spec.parameters_file());
    auto content = read_bounded_file(file, options.limits.max_spec_bytes, "max_spec_bytes", "the parameters file");
    if (!content.ok()) {
      return absl::Status(content.status().code(),
                          absl::StrCat(source, ": parameters_file: ", content.status().message()));
    }
    tdpolicy::Parameters parameters;
    if (auto status = parse_binary_within_limits(*content, parameters, options.limits, file, "the parameters file");
        !status.ok()) {
      return status;
    }
    if (auto status = load_parameters(parameters, file, *policy.module, options); !status.ok()) return status;
  } else if (!spec.has_init_seed()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the spec has no parameters, no parameters_file and no init_seed",
        " (hint: set init_seed for a freshly initialized policy)"));
  }
  policy.module->eval();
  absl::StatusOr<Signature> signature = compute_signature(policy.spec, *policy.module);
  if (!signature.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", signature.status().message()));
  }
  policy.signature = *std::move(signature);
  if (options.run_self_tests) {
    if (auto status = run_self_tests(policy, source); !status.ok()) return status;
  }
  return policy;
}

// Marks the ResourceExhausted status of an allocation that failed, apart from loader limits.
constexpr char kOutOfMemoryPayload[] = "type.googleapis.com/tdpolicy.OutOfMemory";

}  // namespace

bool is_out_of_memory(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted && status.GetPayload(kOutOfMemoryPayload).has_value();
}

// The Status boundary: nothing LibTorch, protobuf or the SDK throws gets past it.
absl::StatusOr<Policy> build_policy(const tdpolicy::PolicySpec& spec, const std::string& source,
                                    const std::string& base_dir, const LoadOptions& options) {
  try {
    return build_policy_unguarded(spec, source, base_dir, options);
  } catch (const std::bad_alloc&) {
    absl::Status status = absl::ResourceExhaustedError(absl::StrCat(source, ": out of memory while loading the policy"));
    status.SetPayload(kOutOfMemoryPayload, absl::Cord());
    return status;
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": cannot load the policy: ", error.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(source, ": cannot load the policy: an unknown exception"));
  }
}

absl::StatusOr<Policy> load_policy(const std::string& path, const LoadOptions& options) {
  try {
    auto spec = read_spec(path, options.limits);
    if (!spec.ok()) return spec.status();
    const size_t slash = path.find_last_of('/');
    const std::string base_dir = slash == std::string::npos ? "." : path.substr(0, slash);
    return build_policy(*spec, path, base_dir, options);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": out of memory while reading the spec"));
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read the spec: ", error.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(path, ": cannot read the spec: an unknown exception"));
  }
}

}  // namespace tdp::policy
