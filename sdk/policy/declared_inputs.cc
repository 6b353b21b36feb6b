#include "sdk/policy/declared_inputs.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <c10/util/ArrayRef.h>

#include <algorithm>
#include <stdexcept>

#include "sdk/policy/keys.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy {
namespace {

std::string shape_string(c10::IntArrayRef shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

}  // namespace

at::ScalarType input_scalar_type(const tdpolicy::InputSpec& input) {
  if (input.dtype() == tdpolicy::DTYPE_UNSPECIFIED) return at::kFloat;
  const std::optional<at::ScalarType> dtype = scalar_type(input.dtype());
  if (!dtype.has_value()) {
    throw std::invalid_argument(
        absl::StrCat("input \"", input.key(), "\": unknown dtype ", static_cast<int>(input.dtype())));
  }
  return *dtype;
}

DeclaredInputs::DeclaredInputs(const tdpolicy::PolicySpec& spec) {
  for (const tdpolicy::InputSpec& input : spec.inputs()) {
    absl::StatusOr<NestedKey> key = parse_key(input.key());
    if (!key.ok()) throw std::invalid_argument(std::string(key.status().message()));
    inputs_.push_back({*key, input.key(), {input.shape().begin(), input.shape().end()}, input_scalar_type(input)});
  }
}

void DeclaredInputs::check(const TensorDict& observation, const std::string& who,
                           const std::vector<NestedKey>& optional_keys) const {
  const c10::IntArrayRef batch = observation.batch_size();
  for (const DeclaredInput& input : inputs_) {
    const bool optional = std::find(optional_keys.begin(), optional_keys.end(), input.key) != optional_keys.end();
    const bool present = observation.contains(input.key) && !observation.is_tensordict(input.key);
    if (!present && optional) continue;
    std::vector<int64_t> expected(batch.begin(), batch.end());
    expected.insert(expected.end(), input.shape.begin(), input.shape.end());
    const std::string declared = absl::StrCat(c10::toString(input.dtype), " ", shape_string(input.shape),
                                              " per environment, batch_size ", shape_string(batch));
    if (!present) {
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name, "\" is missing (declared ", declared,
                                               ")"));
    }
    const at::Tensor& value = observation.get(input.key);
    if (value.sizes() != c10::IntArrayRef(expected)) {
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name, "\" has shape ",
                                               shape_string(value.sizes()), ", expected ", shape_string(expected),
                                               " (", declared, ")"));
    }
    if (value.scalar_type() != input.dtype) {
      throw std::invalid_argument(absl::StrCat(who, ": input \"", input.name, "\" has dtype ",
                                               c10::toString(value.scalar_type()), ", expected ",
                                               c10::toString(input.dtype)));
    }
  }
}

}  // namespace tdp::policy
