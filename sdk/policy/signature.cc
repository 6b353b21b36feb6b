#include "sdk/policy/signature.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/policy/call.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/tensor_proto.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/probabilistic_module_interface.h"
#include "sdk/tensordict/tensordict.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::policy {
namespace {

// "Sparse", "SparseCsr", ...: c10::toString(Layout) would convert to a whole TensorOptions.
std::string layout_name(c10::Layout layout) {
  std::ostringstream name;
  name << layout;
  return name.str();
}



const TensorSignature* find(const std::vector<TensorSignature>& entries, const NestedKey& key) {
  for (const TensorSignature& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

bool contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// Where the module's weights live: the probe's zeros go there.
c10::Device module_device(const nn::TensorDictModuleBase& module) {
  for (const at::Tensor& p : module.parameters()) return p.device();
  for (const at::Tensor& b : module.buffers()) return b.device();
  return c10::Device(c10::kCPU);
}

at::Generator probe_generator(const c10::Device& device) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(0);
  at::Generator generator = at::globalContext().defaultGenerator(device).clone();
  generator.set_current_seed(0);
  return generator;
}

constexpr nn::InteractionType kAllTypes[] = {nn::InteractionType::kMode, nn::InteractionType::kMedian,
                                             nn::InteractionType::kMean, nn::InteractionType::kRandom,
                                             nn::InteractionType::kDeterministic};

}  // namespace

int64_t TensorSignature::numel_per_env() const {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  return n;
}

const TensorSignature* Signature::find_input(const NestedKey& key) const { return find(inputs, key); }
const TensorSignature* Signature::find_output(const NestedKey& key) const { return find(outputs, key); }
bool Signature::is_state(const NestedKey& key) const { return contains(state_keys, key); }
bool Signature::supports(nn::InteractionType type) const {
  return std::find(interaction_types.begin(), interaction_types.end(), type) != interaction_types.end();
}

std::vector<NestedKey> Signature::input_keys() const {
  std::vector<NestedKey> keys;
  for (const TensorSignature& input : inputs) keys.push_back(input.key);
  return keys;
}

std::vector<NestedKey> Signature::output_keys() const {
  std::vector<NestedKey> keys;
  for (const TensorSignature& output : outputs) keys.push_back(output.key);
  return keys;
}

void Signature::check_observation(const TensorDict& observation, const std::string& who, bool state_optional) const {
  const c10::IntArrayRef batch = observation.batch_size();
  for (const TensorSignature& input : inputs) {
    const bool present = observation.contains(input.key) && !observation.is_tensordict(input.key);
    if (!present && ((state_optional && input.state) || input.optional)) continue;
    // Every call checks: the messages are built only for an error.
    auto declared = [&] {
      return absl::StrCat(c10::toString(input.dtype), " ", shape_to_string(input.shape), " per environment, batch_size ",
                          shape_to_string(batch));
    };
    if (!present) {
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name, "\" is missing (declared ", declared(),
                                               ")"));
    }
    const at::Tensor& value = observation.get(input.key);
    // Before anything reads the data: LibTorch's own errors for these are long backtraces.
    if (value.layout() != at::kStrided) {
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name, "\" is a ", layout_name(value.layout()),
                                               " tensor; expected a dense (strided) tensor (", declared(), ")"));
    }
    if (value.is_meta()) {
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name,
                                               "\" is on the meta device, which holds no data; expected a tensor on "
                                               "the cpu or a cuda device"));
    }
    const c10::IntArrayRef sizes = value.sizes();
    const c10::IntArrayRef shape(input.shape);
    if (sizes.size() != batch.size() + shape.size() || sizes.slice(0, batch.size()) != batch ||
        sizes.slice(batch.size()) != shape) {
      std::vector<int64_t> expected(batch.begin(), batch.end());
      expected.insert(expected.end(), input.shape.begin(), input.shape.end());
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name, "\" has shape ", shape_to_string(sizes),
                                               ", expected ", shape_to_string(expected), " (", declared(), ")"));
    }
    if (value.scalar_type() != input.dtype) {
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name, "\" has dtype ",
                                               c10::toString(value.scalar_type()), ", expected ",
                                               c10::toString(input.dtype)));
    }
  }
}

absl::StatusOr<std::vector<TensorSignature>> declared_inputs(const tdpolicy::PolicySpec& spec) {
  const std::vector<NestedKey> state = state_keys(spec);
  const std::vector<NestedKey> optional = optional_inputs(spec);
  std::vector<TensorSignature> inputs;
  for (int i = 0; i < spec.inputs_size(); ++i) {
    const tdpolicy::InputSpec& input = spec.inputs(i);
    absl::StatusOr<NestedKey> key = parse_key(input.key());
    if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "].key: ", key.status().message()));
    std::optional<at::ScalarType> dtype =
        input.dtype() == tdpolicy::DTYPE_UNSPECIFIED ? std::optional(at::kFloat) : scalar_type(input.dtype());
    if (!dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs[", i, "].dtype: unknown dtype ", static_cast<int>(input.dtype())));
    }
    inputs.push_back({*key, input.key(), *dtype, {input.shape().begin(), input.shape().end()}, contains(state, *key),
                      contains(optional, *key) && !contains(state, *key)});
  }
  return inputs;
}

absl::StatusOr<Signature> compute_signature(const tdpolicy::PolicySpec& spec, nn::TensorDictModuleBase& module) {
  Signature signature;
  signature.composite_lp_aggregate = nn::composite_lp_aggregate();
  for (const StateKey& state : recurrent_state(spec)) {
    signature.state_keys.push_back(state.key);
    signature.next_state_keys.push_back(state.next);
  }
  absl::StatusOr<std::vector<TensorSignature>> inputs = declared_inputs(spec);
  if (!inputs.ok()) return inputs.status();
  signature.inputs = *std::move(inputs);

  // What a call returns, before the probe says which of them the module writes.
  std::vector<NestedKey> returned;
  for (const std::string& text : spec.output_keys()) {
    if (auto key = parse_key(text); key.ok() && !contains(returned, *key)) returned.push_back(*std::move(key));
  }
  // Aggregated, a composite's log-prob is one entry ("sample_log_prob") that a spec written for
  // per-part log-probs does not list: a call returns what its mode computes.
  auto* probabilistic = dynamic_cast<nn::ProbabilisticModuleInterface*>(&module);
  if (signature.composite_lp_aggregate && probabilistic != nullptr) {
    for (const NestedKey& key : probabilistic->log_prob_keys()) {
      if (!contains(returned, key)) returned.push_back(key);
    }
  }
  for (const NestedKey& key : signature.next_state_keys) {
    if (!contains(returned, key)) returned.push_back(key);
  }

  const c10::Device device = module_device(module);
  c10::InferenceMode inference;
  TensorDict zeros(std::vector<int64_t>{1}, device);
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    const TensorSignature& input = signature.inputs[i];
    std::vector<int64_t> shape{1};
    shape.insert(shape.end(), input.shape.begin(), input.shape.end());
    try {
      // A boolean input is an action mask more often than not: all false would allow no action,
      // and a masked distribution or exploration could draw none.
      const at::TensorOptions options = at::TensorOptions().dtype(input.dtype).device(device);
      zeros.set(input.key, input.dtype == at::kBool ? at::ones(shape, options) : at::zeros(shape, options));
    } catch (const std::exception& error) {
      // A key and one of its parents both declared: no observation can hold both.
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "].key (\"", input.name, "\"): ", error.what()));
    }
  }
  const at::Generator generator = probe_generator(device);
  std::optional<TensorDict> probed;
  std::string first_error;
  for (nn::InteractionType type : kAllTypes) {
    try {
      TensorDict out = call_policy(module, zeros.clone(/*deep=*/false), nn::SampleRequest{type, generator});
      signature.interaction_types.push_back(type);
      // DETERMINISTIC comes last and wins: it is the type a consumer without a preference reads.
      probed = std::move(out);
    } catch (const std::exception& error) {
      if (first_error.empty()) first_error = error.what();
    }
  }
  if (!probed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the policy fails at batch 1 on zero inputs under every interaction type: ", first_error));
  }
  for (const NestedKey& key : returned) {
    if (!probed->contains(key) || probed->is_tensordict(key)) continue;
    const at::Tensor value = probed->get(key);
    signature.outputs.push_back({key, key_string(key), value.scalar_type(),
                                 std::vector<int64_t>(value.sizes().begin() + 1, value.sizes().end()),
                                 contains(signature.next_state_keys, key)});
  }
  return signature;
}

}  // namespace tdp::policy
