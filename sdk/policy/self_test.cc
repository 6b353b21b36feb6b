// Self tests: a spec carries example inputs with the outputs (and log-probs) the trainer
// computed; the deployment recomputes them before it acts.
#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/core/InferenceMode.h>

#include "sdk/nn/tensordict_sequential.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/self_test.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy {
namespace {

// The batch dims are what a declared input has beyond its per-environment shape.
absl::StatusOr<std::vector<int64_t>> batch_of(const tdpolicy::PolicySpec& spec, const TensorDict& inputs) {
  for (const auto& input : spec.inputs()) {
    NestedKey key = *parse_key(input.key());
    if (!inputs.contains(key)) continue;
    at::Tensor value = inputs.get(key);
    const int64_t batch_dims = value.dim() - input.shape_size();
    if (batch_dims < 0) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", input.key(), "\" has ", value.dim(),
                                                     " dims, fewer than its declared shape's ", input.shape_size()));
    }
    return std::vector<int64_t>(value.sizes().begin(), value.sizes().begin() + batch_dims);
  }
  return std::vector<int64_t>{};
}

absl::StatusOr<TensorDict> to_tensordict(const google::protobuf::RepeatedPtrField<tdpolicy::NamedTensor>& tensors,
                                         std::vector<int64_t> batch, const std::string& where) {
  TensorDict td(std::move(batch));
  for (int i = 0; i < tensors.size(); ++i) {
    const std::string field = absl::StrCat(where, "[", i, "] (\"", tensors[i].name(), "\")");
    auto key = parse_key(tensors[i].name());
    if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", key.status().message()));
    auto value = from_tensor_proto(tensors[i].tensor());
    if (!value.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", value.status().message()));
    try {
      td.set(*key, *value);
    } catch (const std::exception& error) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", error.what()));
    }
  }
  return td;
}

// forward(), except that a probabilistic module whose samples `td` already holds keeps them and
// only scores them. A plain forward() draws (and scores) fresh values over given actions, so
// the log-probs of given actions need this walk.
TensorDict forward_scoring(const std::shared_ptr<nn::TensorDictModuleBase>& module, TensorDict td) {
  if (auto sequence = std::dynamic_pointer_cast<nn::TensorDictSequentialImpl>(module)) {
    for (const auto& child : sequence->modules()) td = forward_scoring(child, td);
    return td;
  }
  if (auto probabilistic = std::dynamic_pointer_cast<nn::ProbabilisticTensorDictModuleImpl>(module)) {
    bool given = true;
    for (const NestedKey& key : probabilistic->dist_sample_keys()) given = given && td.contains(key);
    if (given) return probabilistic->forward_requires_sample(td, std::nullopt, /*requires_sample=*/false);
  }
  return module->forward(td);
}

absl::Status compare(const TensorDict& actual, const google::protobuf::RepeatedPtrField<tdpolicy::NamedTensor>& expected,
                     double atol, double rtol, const std::string& where) {
  for (int i = 0; i < expected.size(); ++i) {
    const std::string field = absl::StrCat(where, "[", i, "] (\"", expected[i].name(), "\")");
    NestedKey key = *parse_key(expected[i].name());
    if (!actual.contains(key)) {
      return absl::FailedPreconditionError(absl::StrCat(field, ": the policy did not write this key"));
    }
    auto want = from_tensor_proto(expected[i].tensor());
    if (!want.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", want.status().message()));
    at::Tensor got = actual.get(key);
    if (got.sizes() != want->sizes()) {
      return absl::FailedPreconditionError(absl::StrCat(field, ": computed shape [", absl::StrJoin(got.sizes(), ", "),
                                                        "] but expected [", absl::StrJoin(want->sizes(), ", "), "]"));
    }
    at::Tensor got64 = got.to(at::kDouble);
    at::Tensor want64 = want->to(at::kDouble);
    if (!at::allclose(got64, want64, rtol, atol, /*equal_nan=*/true)) {
      const double worst = (got64 - want64).abs().max().item<double>();
      return absl::FailedPreconditionError(absl::StrCat(field, ": differs from the expected value by up to ", worst,
                                                        " (atol ", atol, ", rtol ", rtol, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status run_self_tests(const Policy& policy, const std::string& source) {
  c10::InferenceMode inference;
  nn::InteractionTypeGuard deterministic(nn::InteractionType::kDeterministic, /*thread_local_only=*/true);
  for (int t = 0; t < policy.spec.self_tests_size(); ++t) {
    const auto& test = policy.spec.self_tests(t);
    const std::string where = absl::StrCat(source, ": self_tests[", t, "]");
    const double atol = test.atol() > 0 ? test.atol() : 1e-5;
    const double rtol = test.rtol() > 0 ? test.rtol() : 1e-5;
    try {
      auto inputs = to_tensordict(test.inputs(), {}, where + ".inputs");
      if (!inputs.ok()) return inputs.status();
      auto batch = batch_of(policy.spec, *inputs);
      if (!batch.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".inputs: ", batch.status().message()));
      auto td = to_tensordict(test.inputs(), *batch, where + ".inputs");
      if (!td.ok()) return td.status();
      TensorDict outputs = policy.module->forward(td->clone(/*deep=*/false));
      if (auto status = compare(outputs, test.expected_outputs(), atol, rtol, where + ".expected_outputs"); !status.ok()) {
        return status;
      }
      if (test.actions_size() > 0) {
        // With the actions present, probabilistic modules keep them and write their log-probs.
        TensorDict given = td->clone(/*deep=*/false);
        auto actions = to_tensordict(test.actions(), *batch, where + ".actions");
        if (!actions.ok()) return actions.status();
        given.update(*actions);
        TensorDict scored = forward_scoring(policy.module, given);
        if (auto status = compare(scored, test.expected_log_probs(), atol, rtol, where + ".expected_log_probs");
            !status.ok()) {
          return status;
        }
      }
    } catch (const std::exception& error) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": the policy failed on its own example: ", error.what()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<tdpolicy::SelfTest> make_self_test(const Policy& policy, const TensorDict& inputs,
                                                  const TensorDict& actions) {
  c10::InferenceMode inference;
  nn::InteractionTypeGuard deterministic(nn::InteractionType::kDeterministic, /*thread_local_only=*/true);
  tdpolicy::SelfTest test;
  try {
    for (const auto& [key, entry] : inputs.items(true, true)) {
      auto* named = test.add_inputs();
      named->set_name(key_string(key));
      *named->mutable_tensor() = to_tensor_proto(entry.tensor());
    }
    TensorDict outputs = policy.module->forward(inputs.clone(/*deep=*/false));
    for (const std::string& text : policy.spec.output_keys()) {
      auto* named = test.add_expected_outputs();
      named->set_name(text);
      *named->mutable_tensor() = to_tensor_proto(outputs.get(*parse_key(text)));
    }
    if (!actions.keys().empty()) {
      TensorDict given = inputs.clone(/*deep=*/false);
      given.update(actions);
      TensorDict scored = forward_scoring(policy.module, given);
      for (const auto& [key, entry] : actions.items(true, true)) {
        auto* named = test.add_actions();
        named->set_name(key_string(key));
        *named->mutable_tensor() = to_tensor_proto(entry.tensor());
      }
      for (const auto& [key, entry] : scored.items(true, true)) {
        const std::string name = key_string(key);
        if (name.size() > 9 && name.compare(name.size() - 9, 9, "_log_prob") == 0) {
          auto* named = test.add_expected_log_probs();
          named->set_name(name);
          *named->mutable_tensor() = to_tensor_proto(entry.tensor());
        }
      }
    }
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("make_self_test: ", error.what()));
  }
  return test;
}

}  // namespace tdp::policy
