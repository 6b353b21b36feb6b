#include "sdk/nn/tensordict_module.h"

#include <c10/util/Exception.h>
#include <c10/util/Type.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "sdk/log/log.h"
#include "sdk/nn/errors.h"

namespace tdp::nn {
namespace detail {

TensorList tensors_from(const TensorDict& result, const std::vector<NestedKey>& out_keys,
                        const std::string& who) {
  TensorList tensors;
  tensors.reserve(out_keys.size());
  for (const NestedKey& key : out_keys) {
    if (key == NestedKey("_")) {
      tensors.emplace_back();
      continue;
    }
    if (!result.contains(key)) {
      throw KeyError("the module returned a TensorDict without the out_key " +
                     key.to_string() + "; it has keys " + keys_to_string(result.keys(true)) + ".");
    }
    tensors.push_back(result.get(key));
  }
  return tensors;
}

TensorList tensors_from(const TensorKwargs& result, const std::vector<NestedKey>& out_keys,
                        const std::string& who) {
  TensorList tensors;
  tensors.reserve(out_keys.size());
  for (const NestedKey& key : out_keys) {
    if (key == NestedKey("_")) {
      tensors.emplace_back();
      continue;
    }
    auto it = key.is_nested() ? result.end() : result.find(key.leaf());
    if (it == result.end()) {
      std::vector<NestedKey> names;
      for (const auto& item : result) names.emplace_back(item.first);
      std::sort(names.begin(), names.end());
      throw KeyError("the module returned a map without the out_key " + key.to_string() +
                     "; it has keys " + keys_to_string(names) + ".");
    }
    tensors.push_back(it->second);
  }
  return tensors;
}

void throw_arity(const std::string& who, size_t arity, size_t num_in_keys) {
  throw std::invalid_argument(who + ": the wrapped callable takes " + std::to_string(arity) +
                              " tensor argument(s) but in_keys has " +
                              std::to_string(num_in_keys) + " key(s).");
}

void throw_needs_names(const std::string& who) {
  throw std::invalid_argument(
      who + ": the wrapped callable takes its tensors by name (tdp::nn::TensorKwargs), so the inputs "
            "must be given with in_keys_map, which names the argument of each key.");
}

void throw_no_names(const std::string& who) {
  throw std::invalid_argument(
      who + ": in_keys_map passes inputs by name, but the wrapped callable takes positional "
            "tensors. Use in_keys, or wrap a callable taking tdp::nn::TensorKwargs or a TorchScript "
            "method.");
}

namespace {

TensorList from_any_value(torch::nn::AnyValue&& value, const std::vector<NestedKey>& out_keys,
                          const std::string& who) {
  if (auto* t = value.try_get<at::Tensor>()) return {std::move(*t)};
  if (auto* t = value.try_get<TensorList>()) return std::move(*t);
  using T = at::Tensor;
  if (auto* t = value.try_get<std::tuple<T, T>>()) return tuple_to_list(std::move(*t));
  if (auto* t = value.try_get<std::tuple<T, T, T>>()) return tuple_to_list(std::move(*t));
  if (auto* t = value.try_get<std::tuple<T, T, T, T>>()) return tuple_to_list(std::move(*t));
  if (auto* t = value.try_get<TensorDict>()) return tensors_from(*t, out_keys, who);
  // LSTM-style (output, (h, c)): flattened to output, h, c.
  if (auto* t = value.try_get<std::tuple<T, std::tuple<T, T>>>()) {
    return {std::get<0>(*t), std::get<0>(std::get<1>(*t)), std::get<1>(std::get<1>(*t))};
  }
  throw std::invalid_argument(
      "the module returned a value of type " + c10::demangle(value.type_info().name()) +
      "; expected at::Tensor, a std::tuple of 2 to 4 tensors, std::tuple<at::Tensor, "
      "std::tuple<at::Tensor, at::Tensor>>, std::vector<at::Tensor> or tdp::TensorDict.");
}

}  // namespace

TensorFunction any_module_function(torch::nn::AnyModule module,
                                   const std::vector<NestedKey>& out_keys,
                                   const std::string& who) {
  return [module = std::move(module), out_keys, who](TensorList& in) mutable {
    auto& m = module;
    switch (in.size()) {
      case 0:
        return from_any_value(m.any_forward(), out_keys, who);
      case 1:
        return from_any_value(m.any_forward(in[0]), out_keys, who);
      case 2:
        return from_any_value(m.any_forward(in[0], in[1]), out_keys, who);
      case 3:
        return from_any_value(m.any_forward(in[0], in[1], in[2]), out_keys, who);
      case 4:
        return from_any_value(m.any_forward(in[0], in[1], in[2], in[3]), out_keys, who);
      case 5:
        return from_any_value(m.any_forward(in[0], in[1], in[2], in[3], in[4]), out_keys, who);
      case 6:
        return from_any_value(m.any_forward(in[0], in[1], in[2], in[3], in[4], in[5]), out_keys,
                              who);
      default:
        throw std::invalid_argument(who + ": a torch::nn::AnyModule takes at most 6 inputs; got " +
                                    std::to_string(in.size()) + ".");
    }
  };
}

}  // namespace detail

TensorDictModuleImpl::TensorDictModuleImpl(TensorDictModuleOptions options)
    : TensorDictModuleBase("TensorDictModule"), options_(std::move(options)) {
  honor_skip_existing();
  if (!options_.in_keys_map().empty()) {
    if (!options_.in_keys().empty()) {
      throw std::invalid_argument(
          "TensorDictModule: give the inputs either as in_keys or as in_keys_map, not both; got "
          "in_keys=" + keys_to_string(options_.in_keys()) + ".");
    }
    const bool out_to_in = options_.out_to_in_map().value_or(true);
    std::vector<NestedKey> keys;
    for (const auto& [first, second] : options_.in_keys_map()) {
      const NestedKey& argument = out_to_in ? first : second;
      const NestedKey& key = out_to_in ? second : first;
      if (argument.size() != 1) {
        throw std::invalid_argument("TensorDictModule: an argument name in in_keys_map must be "
                                    "one string; got " + argument.to_string() + ".");
      }
      arg_names_.push_back(argument.leaf());
      keys.push_back(key);
    }
    set_in_keys(std::move(keys));
  } else {
    if (options_.out_to_in_map().has_value()) {
      logger()->warn(
          "out_to_in_map is not None but is only used when in_key is a dictionary (in_keys_map).");
    }
    set_in_keys(options_.in_keys());
  }
  for (const NestedKey& key : in_keys()) {
    if (key == NestedKey("_")) {
      logger()->warn("TensorDictModule: key \"_\" is for ignoring output, it should not be used "
                     "in input keys");
    }
  }
  set_out_keys(options_.out_keys());
  for (const NestedKey& key : out_keys_source()) drop_output_.push_back(key == NestedKey("_"));
  input_defaults_.resize(in_keys().size());
  for (const auto& [key, value] : options_.in_key_defaults()) {
    auto at = std::find(in_keys().begin(), in_keys().end(), key);
    if (at == in_keys().end()) {
      throw std::invalid_argument(describe() + ": in_key_defaults has " + key.to_string() +
                                  ", which is not one of in_keys " + keys_to_string(in_keys()) + ".");
    }
    if (!value.defined()) {
      throw std::invalid_argument(describe() + ": the default for " + key.to_string() + " is an undefined tensor.");
    }
    input_defaults_[static_cast<size_t>(at - in_keys().begin())] = value;
  }
}

void TensorDictModuleImpl::check_method_kwargs() const {
  if (!options_.method_kwargs().empty() && !kwargs_function_) {
    throw std::invalid_argument(describe() +
                                ": method_kwargs need a callable that takes its arguments by name (a const "
                                "TensorKwargs&, with in_keys_map); this one takes them by position.");
  }
}

TensorDictModuleImpl::TensorDictModuleImpl(torch::nn::AnyModule module,
                                           TensorDictModuleOptions options)
    : TensorDictModuleImpl(std::move(options)) {
  if (module.is_empty()) throw_empty();
  if (!arg_names_.empty()) detail::throw_no_names(describe());
  module_ = register_module("module", module.ptr());
  function_ = detail::any_module_function(std::move(module), out_keys_source(), describe());
  check_method_kwargs();
}

TensorDictModuleImpl::TensorDictModuleImpl(std::shared_ptr<torch::nn::Module> module,
                                           TensorFunction function,
                                           TensorDictModuleOptions options,
                                           std::string function_repr)
    : TensorDictModuleImpl(std::move(options)) {
  if (!function) throw_empty();
  if (module != nullptr) {
    module_ = register_module("module", std::move(module));
  } else {
    function_repr_ = std::move(function_repr);
  }
  function_ = std::move(function);
  check_method_kwargs();
}

void TensorDictModuleImpl::throw_empty() const {
  throw std::invalid_argument(describe() +
                              ": the module to wrap is empty (a null module, an empty module "
                              "holder or an empty std::function).");
}

std::vector<std::string> TensorDictModuleImpl::repr_fields() const {
  if (function_repr_.empty()) return {};
  return {"module=" + function_repr_};
}

TensorDict TensorDictModuleImpl::forward_with_kwargs(const TensorDict& tensordict, const TensorKwargs& kwargs,
                                                     const std::optional<TensorDict>& tensordict_out) {
  if (!kwargs.empty() && !kwargs_function_) {
    std::string names;
    for (const auto& entry : kwargs) names += (names.empty() ? "" : ", ") + entry.first;
    throw std::invalid_argument(describe() + ": got keyword arguments (" + names +
                                ") but the wrapped callable takes its arguments by position; kwargs need a "
                                "callable that takes a const TensorKwargs& (with in_keys_map).");
  }
  if (skips(tensordict)) return tensordict;
  const std::vector<bool> given = dropped_keys_given(tensordict);
  return apply_selection(call(tensordict, tensordict_out, kwargs), tensordict, given);
}

TensorDict TensorDictModuleImpl::forward_impl(TensorDict tensordict,
                                              const std::optional<TensorDict>& tensordict_out) {
  static const TensorKwargs kNoKwargs;
  return call(std::move(tensordict), tensordict_out, kNoKwargs);
}

TensorDict TensorDictModuleImpl::call(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out,
                                      const TensorKwargs& kwargs) {
  const std::vector<NestedKey>& keys = in_keys();
  TensorList inputs;
  // Room for the outputs too: a module's step writes them into this list (to_tensor_list()).
  inputs.reserve(std::max(keys.size(), out_keys_source().size()));
  bool any_missing = false;
  for (size_t i = 0; i < keys.size(); ++i) {
    const NestedKey& key = keys[i];
    if (input_defaults_[i].defined()) {
      inputs.push_back(tensordict.get(key, input_defaults_[i]));
    } else if (options_.strict()) {
      if (!tensordict.contains(key)) {
        throw KeyError(describe() + ": the input TensorDict has no entry " + key.to_string() +
                       " (strict=True); it has keys " +
                       keys_to_string(tensordict.keys(/*include_nested=*/true)) + ".");
      }
      inputs.push_back(tensordict.get(key));
    } else {
      static const at::Tensor kMissing;
      inputs.push_back(tensordict.get(key, kMissing));
      any_missing |= !inputs.back().defined();
    }
  }

  TensorList outputs;
  try {
    if (kwargs.empty() && options_.method_kwargs().empty()) {
      outputs = function_(inputs);
    } else {
      // tensordict's order: the call's kwargs, then the inputs read from the TensorDict, then
      // method_kwargs, each overriding the one before.
      TensorKwargs arguments = kwargs;
      for (size_t i = 0; i < inputs.size(); ++i) arguments[arg_names_[i]] = inputs[i];
      for (const auto& [name, value] : options_.method_kwargs()) arguments[name] = value;
      outputs = kwargs_function_(arguments);
    }
  } catch (const std::exception& error) {
    if (any_missing) {
      std::vector<NestedKey> missing;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!tensordict.contains(keys[i]) && !input_defaults_[i].defined()) missing.push_back(keys[i]);
      }
      const char* what = error.what();
      if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
        what = c10_error->what_without_backtrace();
      }
      throw KeyError(describe() +
                     ": Some tensors that are necessary for the module call may not have not "
                     "been found in the input tensordict: the following inputs are None: " +
                     keys_to_string(missing) + ". The TensorDict has keys " +
                     keys_to_string(tensordict.keys(/*include_nested=*/true)) +
                     ". The module failed with: " + what);
    }
    detail::rethrow_with_context(describe());
  }

  const std::vector<NestedKey>& out_keys = out_keys_source();
  if (outputs.size() != out_keys.size()) {
    throw std::runtime_error(describe() + ": the module returned " +
                             std::to_string(outputs.size()) + " tensor(s) but out_keys has " +
                             std::to_string(out_keys.size()) + " key(s): " +
                             keys_to_string(out_keys) + ".");
  }

  TensorDict target = tensordict_out.has_value()              ? *tensordict_out
                      : options_.inplace() == Inplace::kTrue  ? std::move(tensordict)
                      : options_.inplace() == Inplace::kEmpty ? tensordict.empty()
                                                              : TensorDict();
  try {
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!drop_output_[i]) target.set(out_keys[i], std::move(outputs[i]));
    }
  } catch (const std::exception&) {
    detail::rethrow_with_context(describe() + ": writing the outputs failed");
  }
  return target;
}

}  // namespace tdp::nn
