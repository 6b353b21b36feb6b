// TensorDictModule: wraps something that maps tensors to tensors (a LibTorch module, a
// function, or a TorchScript method, see scripted_module.h) so that it reads its inputs from
// the TensorDict entries named by in_keys and writes its outputs to the entries named by
// out_keys. Python's tensordict.nn.TensorDictModule.
//
//   tdp::nn::TensorDictModule actor(torch::nn::Linear(17, 6),
//       tdp::nn::TensorDictModuleOptions({"observation"}, {"action"}));
//   tdp::TensorDict td({{"observation", torch::randn({4, 17})}}, {4});
//   actor(td);                                        // writes td["action"], [4, 6]
//   tdp::nn::TensorDictModule both([](const at::Tensor& x) { return std::make_tuple(x - 1, x + 1); },
//       tdp::nn::TensorDictModuleOptions({"x"}, {"x_minus", "_"}));   // "_" drops an output
//
// What can be wrapped:
// - a LibTorch module (a module holder such as torch::nn::Linear, a std::shared_ptr to a
//   module, or a torch::nn::AnyModule) whose forward takes tensors; it becomes the child
//   "module", so parameters(), to(), train()/eval() and torch::save reach it;
// - a callable taking N tensors (or one `const TensorList&`, or one `const TensorKwargs&` for
//   arguments by name);
// The callable returns at::Tensor, a std::tuple of tensors, a TensorList, a tdp::TensorDict or a
// TensorKwargs (the last two are read at out_keys), or nothing. Through AnyModule, an LSTM's
// (output, (h, c)) counts as three outputs.
//
// Inputs: `in_keys` lists the keys in argument order. `in_keys_map` instead pairs argument
// names with keys: {argument, key} pairs by default (out_to_in_map true, as in tensordict), or
// {key, argument} with out_to_in_map(false); it needs a callable that takes arguments by name.
// With `strict`, a missing input throws tdp::KeyError naming the module, the key and the keys
// present; otherwise an undefined tensor is passed (and if the call then fails, the KeyError
// names the missing inputs). `in_key_defaults` gives a tensor to use for an input that is
// missing (as `td.get(key, default)`), strict or not.
//
// The reference's extras, in C++ terms:
// - `method`: wrap a member function of a LibTorch module instead of its forward; the module
//   is still the child "module":
//     TensorDictModule encode(net, &Net::encode, TensorDictModuleOptions({"obs"}, {"z"}));
// - `method_kwargs`: fixed tensors by name added to every call of a callable that takes its
//   arguments by name (a `const TensorKwargs&`), e.g. a constant temperature;
// - per-call kwargs: forward_with_kwargs(td, kwargs) passes more tensors by name to such a callable.
//   Per-call kwargs are overridden by the inputs read from the TensorDict, and both by
//   method_kwargs (the order tensordict merges them in). A callable taking positional
//   arguments rejects kwargs (method_kwargs at construction, per-call kwargs at the call).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sdk/nn/tensor_function.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/nn/tensordict_module_internal.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

// {argument name, TensorDict key} pairs (or {key, argument name}, see out_to_in_map).
using InKeyMap = std::vector<std::pair<NestedKey, NestedKey>>;
// {in_key, tensor used when the key is missing} pairs.
using InKeyDefaults = std::vector<std::pair<NestedKey, at::Tensor>>;

struct TensorDictModuleOptions {
  TensorDictModuleOptions() = default;
  TensorDictModuleOptions(std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys)
      : in_keys_(std::move(in_keys)), out_keys_(std::move(out_keys)) {}

  // Keys read, in argument order.
  TORCH_ARG(std::vector<NestedKey>, in_keys);
  // Inputs by argument name, instead of in_keys: {argument, key} pairs, or {key, argument}
  // pairs when out_to_in_map is false. Order is kept.
  TORCH_ARG(InKeyMap, in_keys_map);
  // How to read in_keys_map; only meaningful with it (a warning is logged otherwise).
  TORCH_ARG(std::optional<bool>, out_to_in_map);
  // Keys written, in output order; "_" drops the output at that position.
  TORCH_ARG(std::vector<NestedKey>, out_keys);
  TORCH_ARG(Inplace, inplace) = Inplace::kTrue;
  // Whether a missing input throws (true) or is passed as an undefined tensor (false).
  TORCH_ARG(bool, strict) = false;
  // Tensors used for inputs missing from the TensorDict, by in_key.
  TORCH_ARG(InKeyDefaults, in_key_defaults);
  // Tensors by name added to every call of a callable that takes its arguments by name.
  TORCH_ARG(TensorKwargs, method_kwargs);

 public:
  TensorDictModuleOptions& inplace(bool value) {
    inplace_ = value ? Inplace::kTrue : Inplace::kFalse;
    return *this;
  }
};

class TensorDictModuleImpl : public TensorDictModuleBase {
 public:
  // A LibTorch module held by a module holder (torch::nn::Linear, ...).
  template <typename M>
  TensorDictModuleImpl(torch::nn::ModuleHolder<M> module, TensorDictModuleOptions options)
      : TensorDictModuleImpl(module.is_empty() ? nullptr : module.ptr(), std::move(options)) {}

  // A LibTorch module by pointer.
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
  TensorDictModuleImpl(std::shared_ptr<M> module, TensorDictModuleOptions options)
      : TensorDictModuleImpl(std::move(options)) {
    if (module == nullptr) throw_empty();
    if (!arg_names_.empty()) detail::throw_no_names(describe());
    module_ = register_module("module", module);
    if constexpr (detail::forward_traits<M>::direct) {
      using traits = detail::forward_traits<M>;
      if (traits::arity != in_keys().size()) detail::throw_arity(describe(), traits::arity, in_keys().size());
      auto call = [module](auto&&... tensors) { return module->forward(tensors...); };
      function_ = [call, out_keys = out_keys_source(), who = describe()](TensorList& in) mutable {
        return detail::call_positional(call, in, out_keys, who,
                                       std::make_index_sequence<traits::arity>{});
      };
    } else if constexpr (detail::one_tensor_forward<M>::value) {
      // torch::nn::Sequential and other modules with a templated forward: one input.
      if (in_keys().size() != 1) detail::throw_arity(describe(), 1, in_keys().size());
      function_ = [module, out_keys = out_keys_source(), who = describe()](TensorList& in) {
        return detail::to_tensor_list(module->forward(in[0]), out_keys, who, in);
      };
    } else {
      function_ = detail::any_module_function(torch::nn::AnyModule(module), out_keys_source(),
                                              describe());
    }
  }

  // A member function of a LibTorch module, called instead of its forward (Python's `method`).
  template <typename M, typename R, typename... Args,
            typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
  TensorDictModuleImpl(std::shared_ptr<M> module, R (M::*method)(Args...), TensorDictModuleOptions options)
      : TensorDictModuleImpl(std::move(options)) {
    if (module == nullptr || method == nullptr) throw_empty();
    module_ = register_module("module", module);
    set_function([module, method](Args... args) -> R { return ((*module).*method)(std::forward<Args>(args)...); });
  }
  template <typename M, typename R, typename... Args,
            typename = std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>>>
  TensorDictModuleImpl(std::shared_ptr<M> module, R (M::*method)(Args...) const, TensorDictModuleOptions options)
      : TensorDictModuleImpl(std::move(options)) {
    if (module == nullptr || method == nullptr) throw_empty();
    module_ = register_module("module", module);
    set_function([module, method](Args... args) -> R { return ((*module).*method)(std::forward<Args>(args)...); });
  }

  // Any LibTorch module, type-erased; also the way to wrap modules with default arguments.
  TensorDictModuleImpl(torch::nn::AnyModule module, TensorDictModuleOptions options);

  // A callable over tensors (see the header comment for the signatures accepted).
  template <typename F, typename = std::enable_if_t<detail::is_tensor_callable_v<F>>>
  TensorDictModuleImpl(F function, TensorDictModuleOptions options)
      : TensorDictModuleImpl(std::move(options)) {
    if constexpr (std::is_pointer_v<F> || detail::is_std_function<F>::value) {
      if (!function) throw_empty();
    }
    set_function(std::move(function));
    function_repr_ = "<function>";
  }

  // A module (registered as the child "module"; may be null) called through `function`, which
  // receives the inputs in in_keys order. scripted_module() builds TorchScript modules this way.
  TensorDictModuleImpl(std::shared_ptr<torch::nn::Module> module, TensorFunction function,
                       TensorDictModuleOptions options, std::string function_repr = "<function>");

  // forward() that passes `kwargs` to a callable taking its arguments by name (see the header
  // comment); std::invalid_argument for a callable taking them by position. (Not an overload
  // of forward: LibTorch's module holders need one forward.)
  TensorDict forward_with_kwargs(const TensorDict& tensordict, const TensorKwargs& kwargs,
                                 const std::optional<TensorDict>& tensordict_out = std::nullopt);

  const TensorDictModuleOptions& options() const { return options_; }
  // The wrapped module, or nullptr when a plain function is wrapped.
  const std::shared_ptr<torch::nn::Module>& module() const { return module_; }
  // Argument names, in in_keys order, when the inputs are taken by name.
  const std::vector<std::string>& arg_names() const { return arg_names_; }

 protected:
  TensorDict forward_impl(TensorDict tensordict,
                          const std::optional<TensorDict>& tensordict_out) override;
  std::vector<std::string> repr_fields() const override;

 private:
  // Validates the options and sets the keys; the public constructors then set function_.
  explicit TensorDictModuleImpl(TensorDictModuleOptions options);
  [[noreturn]] void throw_empty() const;
  // Sets function_ (and kwargs_function_ for a callable taking its arguments by name).
  template <typename F>
  void set_function(F function) {
    if constexpr (std::is_invocable_v<F&, const TensorKwargs&>) {
      kwargs_function_ = detail::make_kwargs_function(function, out_keys_source(), describe());
    }
    function_ = detail::make_function(std::move(function), arg_names_, in_keys().size(), out_keys_source(),
                                      describe());
    check_method_kwargs();
  }
  // method_kwargs need a callable that takes its arguments by name.
  void check_method_kwargs() const;
  TensorDict call(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out,
                  const TensorKwargs& kwargs);

  TensorDictModuleOptions options_;
  std::vector<std::string> arg_names_;
  std::shared_ptr<torch::nn::Module> module_;
  TensorFunction function_;
  // Set when the callable takes its arguments by name: the call used when kwargs are given.
  KwargsFunction kwargs_function_;
  std::string function_repr_;
  // Per in_key: the tensor used when the key is missing (undefined: none).
  std::vector<at::Tensor> input_defaults_;
  // One flag per out key: true for "_", whose output is dropped.
  std::vector<bool> drop_output_;
};

TORCH_MODULE(TensorDictModule);

}  // namespace tdp::nn
