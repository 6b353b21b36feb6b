// Typed modules: tensordict's tensorclass modules (TensorClassModuleBase) in C++ terms. A module's
// input and output are plain C++ structs of tensors whose fields are declared once with their
// TensorDict keys, so the module's code reads `in.observation`, not a string key: a misspelt
// field is a compile error, and so is a field that is not an at::Tensor. as_td_module() turns
// it into a tensordict module that reads and writes those keys and sits in any sequence.
//
//   struct Obs { at::Tensor observation; at::Tensor goal; };
//   struct Act { at::Tensor action; };
//   TDP_TENSORCLASS(Obs, TDP_FIELD(observation, "observation"), TDP_FIELD(goal, "goal", "position"));
//   TDP_TENSORCLASS(Act, TDP_FIELD(action, "action"));
//
//   struct Policy : tdp::nn::TensorClassModuleBase<Obs, Act> {
//     Act forward(const Obs& in) override { return {at::tanh(in.observation + in.goal)}; }
//   };
//   auto module = std::make_shared<Policy>()->as_td_module();   // in_keys observation, (goal, position)
//   module->forward(td);                                         // writes "action"
#pragma once

#include <ATen/core/Tensor.h>
#include <absl/strings/str_cat.h>
#include <torch/nn/module.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

// One declared field: a pointer to an at::Tensor member and its key.
template <typename Struct>
struct TensorClassField {
  at::Tensor Struct::*member;
  NestedKey key;
};

template <typename Struct, typename Member>
TensorClassField<Struct> tensorclass_field(Member Struct::*member, NestedKey key) {
  static_assert(std::is_same_v<Member, at::Tensor>, "a tensorclass field must be an at::Tensor");
  return {member, std::move(key)};
}

// Specialized by TDP_TENSORCLASS for each declared struct.
template <typename Struct>
struct TensorClass;

// The fields of `Struct` (declared with TDP_TENSORCLASS), in declaration order.
template <typename Struct>
const std::vector<TensorClassField<Struct>>& tensorclass_fields() {
  static const std::vector<TensorClassField<Struct>> fields = TensorClass<Struct>::fields();
  return fields;
}

template <typename Struct>
std::vector<NestedKey> tensorclass_keys() {
  std::vector<NestedKey> keys;
  for (const auto& field : tensorclass_fields<Struct>()) keys.push_back(field.key);
  return keys;
}

// The struct's fields read from `td`. Throws tdp::KeyError (from TensorDict::get) naming a
// missing key and the keys present.
template <typename Struct>
Struct from_tensordict(const TensorDict& td) {
  Struct value{};
  for (const auto& field : tensorclass_fields<Struct>()) value.*(field.member) = td.get(field.key);
  return value;
}

// Writes every defined field of `value` into `td` at its key.
template <typename Struct>
void write_tensorclass(const Struct& value, TensorDict& td, const std::string& who) {
  for (const auto& field : tensorclass_fields<Struct>()) {
    const at::Tensor& tensor = value.*(field.member);
    if (!tensor.defined()) {
      throw std::invalid_argument(absl::StrCat(who, ": output field for key ", field.key.to_string(),
                                               " was left undefined"));
    }
    td.set(field.key, tensor);
  }
}

template <typename Input, typename Output>
class TensorClassModuleBase;

// The tensordict module around a typed module (what as_td_module() returns): in_keys are Input's
// keys, out_keys Output's; the typed module is its child "module".
template <typename Input, typename Output>
class TensorClassTensorDictModule : public TensorDictModuleBase {
 public:
  explicit TensorClassTensorDictModule(std::shared_ptr<TensorClassModuleBase<Input, Output>> module)
      : TensorDictModuleBase("TensorClassModule", tensorclass_keys<Input>(), tensorclass_keys<Output>()),
        module_(register_module("module", std::move(module))) {}

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override {
    Output output = module_->forward(from_tensordict<Input>(tensordict));
    TensorDict out = tensordict_out ? *tensordict_out : tensordict;
    write_tensorclass(output, out, describe());
    return out;
  }

 private:
  std::shared_ptr<TensorClassModuleBase<Input, Output>> module_;
};

// A LibTorch module from one typed struct to another (register parameters and children as in
// any torch::nn::Module).
template <typename Input, typename Output>
class TensorClassModuleBase : public torch::nn::Module {
 public:
  virtual Output forward(const Input& input) = 0;

  // This module as a tensordict module (it must be owned by a std::shared_ptr, as LibTorch
  // modules are: torch::nn::Module is enable_shared_from_this).
  std::shared_ptr<TensorDictModuleBase> as_td_module() {
    return std::make_shared<TensorClassTensorDictModule<Input, Output>>(
        std::static_pointer_cast<TensorClassModuleBase>(this->shared_from_this()));
  }
};

}  // namespace tdp::nn

// TDP_TENSORCLASS(Struct, TDP_FIELD(member, key levels...), ...): declares which TensorDict key
// each at::Tensor member of Struct lives at. Write it in the global namespace (it specializes
// tdp::nn::TensorClass); a member that does not exist or is not an at::Tensor does not compile.
#define TDP_FIELD(member, ...) ::tdp::nn::tensorclass_field(&Self::member, ::tdp::NestedKey(std::vector<std::string>{__VA_ARGS__}))
#define TDP_TENSORCLASS(Struct, ...)                                                \
  template <>                                                                       \
  struct tdp::nn::TensorClass<Struct> {                                             \
    using Self = Struct;                                                            \
    static std::vector<::tdp::nn::TensorClassField<Struct>> fields() { return {__VA_ARGS__}; } \
  }
