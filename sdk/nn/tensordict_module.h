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
// - a callable taking N tensors (or one `const TensorList&`, or one `const Kwargs&` for
//   arguments by name);
// The callable returns at::Tensor, a std::tuple of tensors, a TensorList, a tdp::TensorDict or a
// Kwargs (the last two are read at out_keys), or nothing. Through AnyModule, an LSTM's
// (output, (h, c)) counts as three outputs.
//
// Inputs: `in_keys` lists the keys in argument order. `in_keys_map` instead pairs argument
// names with keys: {argument, key} pairs by default (out_to_in_map true, as in tensordict), or
// {key, argument} with out_to_in_map(false); it needs a callable that takes arguments by name.
// With `strict`, a missing input throws tdp::KeyError naming the module, the key and the keys
// present; otherwise an undefined tensor is passed (and if the call then fails, the KeyError
// names the missing inputs).
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

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

using TensorList = std::vector<at::Tensor>;
// Tensors by argument name, for callables that take their inputs by name.
using Kwargs = std::unordered_map<std::string, at::Tensor>;
// The form every wrapped callable is reduced to: the inputs in in_keys order (undefined for a
// missing non-strict input) to the outputs in out_keys_source() order.
using TensorFunction = std::function<TensorList(TensorList& inputs)>;
// {argument name, TensorDict key} pairs (or {key, argument name}, see out_to_in_map).
using InKeyMap = std::vector<std::pair<NestedKey, NestedKey>>;

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

 public:
  TensorDictModuleOptions& inplace(bool value) {
    inplace_ = value ? Inplace::kTrue : Inplace::kFalse;
    return *this;
  }
};

namespace detail {

template <typename T>
inline constexpr bool is_tensor_v = std::is_same_v<std::decay_t<T>, at::Tensor>;

template <typename T, typename = void>
struct fn_traits {
  static constexpr bool known = false;
};
template <typename R, typename... A>
struct fn_traits<R (*)(A...)> {
  static constexpr bool known = true;
  static constexpr bool tensor_args = (is_tensor_v<A> && ...);
  static constexpr size_t arity = sizeof...(A);
  using result = R;
};
template <typename R, typename... A>
struct fn_traits<R(A...)> : fn_traits<R (*)(A...)> {};
template <typename C, typename R, typename... A>
struct fn_traits<R (C::*)(A...)> : fn_traits<R (*)(A...)> {};
template <typename C, typename R, typename... A>
struct fn_traits<R (C::*)(A...) const> : fn_traits<R (*)(A...)> {};
template <typename F>
struct fn_traits<F, std::void_t<decltype(&F::operator())>> : fn_traits<decltype(&F::operator())> {};

// A LibTorch module whose forward is one plain member function over tensors can be called
// directly, without AnyModule's type-erased arguments.
template <typename M, typename = void>
struct forward_traits {
  static constexpr bool direct = false;
};
template <typename M>
struct forward_traits<M, std::void_t<decltype(&M::forward)>> : fn_traits<decltype(&M::forward)> {
  static constexpr bool direct = fn_traits<decltype(&M::forward)>::known &&
                                 fn_traits<decltype(&M::forward)>::tensor_args;
};

template <typename T>
struct is_std_function : std::false_type {};
template <typename R, typename... A>
struct is_std_function<std::function<R(A...)>> : std::true_type {};

// A module whose forward is a template (torch::nn::Sequential) but can be called with one tensor.
template <typename M, typename = void>
struct one_tensor_forward : std::false_type {};
template <typename M>
struct one_tensor_forward<
    M, std::void_t<decltype(std::declval<M&>().forward(std::declval<const at::Tensor&>()))>>
    : std::true_type {};

template <typename T>
struct is_shared_ptr : std::false_type {};
template <typename T>
struct is_shared_ptr<std::shared_ptr<T>> : std::true_type {};

template <typename F>
struct is_module_like
    : std::bool_constant<std::is_base_of_v<torch::detail::ModuleHolderIndicator, F> ||
                         std::is_same_v<F, torch::nn::AnyModule> || is_shared_ptr<F>::value ||
                         std::is_same_v<F, TensorDictModuleOptions>> {};

template <typename F, typename = void>
struct known_tensor_fn : std::false_type {};
template <typename F>
struct known_tensor_fn<F, std::enable_if_t<fn_traits<F>::known>>
    : std::bool_constant<fn_traits<F>::tensor_args> {};

// Callables accepted by the function constructor (modules have their own). std::conjunction
// stops before asking a module holder whether it is invocable, which would not compile.
template <typename F>
inline constexpr bool is_tensor_callable_v = std::conjunction_v<
    std::negation<is_module_like<std::decay_t<F>>>,
    std::disjunction<std::is_invocable<F&, const Kwargs&>, std::is_invocable<F&, const TensorList&>,
                     known_tensor_fn<std::decay_t<F>>>>;

TensorList tensors_from(const TensorDict& result, const std::vector<NestedKey>& out_keys,
                        const std::string& who);
TensorList tensors_from(const Kwargs& result, const std::vector<NestedKey>& out_keys,
                        const std::string& who);

template <typename... T>
TensorList tuple_to_list(std::tuple<T...>&& values) {
  static_assert((is_tensor_v<T> && ...), "a returned std::tuple must hold only at::Tensor");
  return std::apply([](auto&&... t) { return TensorList{std::move(t)...}; }, std::move(values));
}

// Normalizes what a callable returned to the outputs in out_keys order.
template <typename R>
TensorList to_tensor_list(R&& result, const std::vector<NestedKey>& out_keys,
                          const std::string& who) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, at::Tensor>) {
    return TensorList{std::forward<R>(result)};
  } else if constexpr (std::is_same_v<T, TensorList>) {
    return TensorList(std::forward<R>(result));
  } else if constexpr (std::is_same_v<T, TensorDict> || std::is_same_v<T, Kwargs>) {
    return tensors_from(result, out_keys, who);
  } else {
    return tuple_to_list(T(std::forward<R>(result)));
  }
}

template <typename F, size_t... I>
TensorList call_positional(F& f, TensorList& in, const std::vector<NestedKey>& out_keys,
                           const std::string& who, std::index_sequence<I...>) {
  using R = decltype(std::invoke(f, in[I]...));
  if constexpr (std::is_void_v<R>) {
    std::invoke(f, in[I]...);
    return {};
  } else {
    return to_tensor_list(std::invoke(f, in[I]...), out_keys, who);
  }
}

[[noreturn]] void throw_arity(const std::string& who, size_t arity, size_t num_in_keys);
[[noreturn]] void throw_needs_names(const std::string& who);
[[noreturn]] void throw_no_names(const std::string& who);

template <typename F>
TensorFunction make_function(F f, const std::vector<std::string>& arg_names, size_t num_in_keys,
                             const std::vector<NestedKey>& out_keys, const std::string& who) {
  if constexpr (std::is_invocable_v<F&, const Kwargs&>) {
    if (arg_names.empty()) throw_needs_names(who);
    return [f = std::move(f), names = arg_names, out_keys, who](TensorList& in) mutable {
      Kwargs kwargs;
      for (size_t i = 0; i < in.size(); ++i) kwargs.emplace(names[i], in[i]);
      using R = std::invoke_result_t<F&, const Kwargs&>;
      if constexpr (std::is_void_v<R>) {
        std::invoke(f, std::as_const(kwargs));
        return TensorList{};
      } else {
        return to_tensor_list(std::invoke(f, std::as_const(kwargs)), out_keys, who);
      }
    };
  } else if constexpr (std::is_invocable_v<F&, const TensorList&>) {
    if (!arg_names.empty()) throw_no_names(who);
    return [f = std::move(f), out_keys, who](TensorList& in) mutable {
      using R = std::invoke_result_t<F&, const TensorList&>;
      if constexpr (std::is_void_v<R>) {
        std::invoke(f, std::as_const(in));
        return TensorList{};
      } else {
        return to_tensor_list(std::invoke(f, std::as_const(in)), out_keys, who);
      }
    };
  } else {
    using traits = fn_traits<std::decay_t<F>>;
    if (!arg_names.empty()) throw_no_names(who);
    if (traits::arity != num_in_keys) throw_arity(who, traits::arity, num_in_keys);
    return [f = std::move(f), out_keys, who](TensorList& in) mutable {
      return call_positional(f, in, out_keys, who, std::make_index_sequence<traits::arity>{});
    };
  }
}

TensorFunction any_module_function(torch::nn::AnyModule module,
                                   const std::vector<NestedKey>& out_keys, const std::string& who);

}  // namespace detail

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
        return detail::to_tensor_list(module->forward(in[0]), out_keys, who);
      };
    } else {
      function_ = detail::any_module_function(torch::nn::AnyModule(module), out_keys_source(),
                                              describe());
    }
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
    function_ = detail::make_function(std::move(function), arg_names_, in_keys().size(),
                                      out_keys_source(), describe());
    function_repr_ = "<function>";
  }

  // A module (registered as the child "module"; may be null) called through `function`, which
  // receives the inputs in in_keys order. scripted_module() builds TorchScript modules this way.
  TensorDictModuleImpl(std::shared_ptr<torch::nn::Module> module, TensorFunction function,
                       TensorDictModuleOptions options, std::string function_repr = "<function>");

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

  TensorDictModuleOptions options_;
  std::vector<std::string> arg_names_;
  std::shared_ptr<torch::nn::Module> module_;
  TensorFunction function_;
  std::string function_repr_;
  // One flag per out key: true for "_", whose output is dropped.
  std::vector<bool> drop_output_;
};

TORCH_MODULE(TensorDictModule);

}  // namespace tdp::nn
