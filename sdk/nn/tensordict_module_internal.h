// Internal to TensorDictModule: the templates that reduce what its constructors accept (module
// holders, module pointers, callables over tensors, TensorList or TensorKwargs) to one
// TensorFunction. Not part of the API: include sdk/nn/tensordict_module.h instead.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdk/nn/tensor_function.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

struct TensorDictModuleOptions;

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
    std::disjunction<std::is_invocable<F&, const TensorKwargs&>, std::is_invocable<F&, const TensorList&>,
                     known_tensor_fn<std::decay_t<F>>>>;

TensorList tensors_from(const TensorDict& result, const std::vector<NestedKey>& out_keys,
                        const std::string& who);
TensorList tensors_from(const TensorKwargs& result, const std::vector<NestedKey>& out_keys,
                        const std::string& who);

// The tensors of a returned tuple, in order, written into `list` (cleared first).
template <typename... T>
TensorList tuple_to_list(std::tuple<T...>&& values, TensorList&& list = {}) {
  static_assert((is_tensor_v<T> && ...), "a returned std::tuple must hold only at::Tensor");
  list.clear();
  std::apply([&](auto&&... t) { (list.push_back(std::move(t)), ...); }, std::move(values));
  return std::move(list);
}

// Normalizes what a callable returned to the outputs in out_keys order. A tensor or a tuple is
// written into `storage`, the list the call's inputs came in (read by then): a module's step then
// allocates no second list (TensorDictModule reserves that list for its outputs too).
template <typename R>
TensorList to_tensor_list(R&& result, const std::vector<NestedKey>& out_keys, const std::string& who,
                          TensorList& storage) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, at::Tensor>) {
    at::Tensor value = std::forward<R>(result);  // before the clear: `result` may be one of the inputs
    storage.clear();
    storage.push_back(std::move(value));
    return std::move(storage);
  } else if constexpr (std::is_same_v<T, TensorList>) {
    return TensorList(std::forward<R>(result));
  } else if constexpr (std::is_same_v<T, TensorDict> || std::is_same_v<T, TensorKwargs>) {
    return tensors_from(result, out_keys, who);
  } else {
    return tuple_to_list(T(std::forward<R>(result)), std::move(storage));
  }
}

template <typename R>
TensorList to_tensor_list(R&& result, const std::vector<NestedKey>& out_keys, const std::string& who) {
  TensorList storage;
  return to_tensor_list(std::forward<R>(result), out_keys, who, storage);
}

template <typename F, size_t... I>
TensorList call_positional(F& f, TensorList& in, const std::vector<NestedKey>& out_keys,
                           const std::string& who, std::index_sequence<I...>) {
  using R = decltype(std::invoke(f, in[I]...));
  if constexpr (std::is_void_v<R>) {
    std::invoke(f, in[I]...);
    return {};
  } else {
    return to_tensor_list(std::invoke(f, in[I]...), out_keys, who, in);
  }
}

[[noreturn]] void throw_arity(const std::string& who, size_t arity, size_t num_in_keys);
[[noreturn]] void throw_needs_names(const std::string& who);
[[noreturn]] void throw_no_names(const std::string& who);

// A callable taking its inputs by name, reduced to a function of the arguments by name.
template <typename F>
KwargsFunction make_kwargs_function(F f, const std::vector<NestedKey>& out_keys, const std::string& who) {
  return [f = std::move(f), out_keys, who](const TensorKwargs& kwargs) mutable {
    using R = std::invoke_result_t<F&, const TensorKwargs&>;
    if constexpr (std::is_void_v<R>) {
      std::invoke(f, kwargs);
      return TensorList{};
    } else {
      return to_tensor_list(std::invoke(f, kwargs), out_keys, who);
    }
  };
}

template <typename F>
TensorFunction make_function(F f, const std::vector<std::string>& arg_names, size_t num_in_keys,
                             const std::vector<NestedKey>& out_keys, const std::string& who) {
  if constexpr (std::is_invocable_v<F&, const TensorKwargs&>) {
    if (arg_names.empty()) throw_needs_names(who);
    return [g = make_kwargs_function(std::move(f), out_keys, who), names = arg_names](TensorList& in) {
      TensorKwargs kwargs;
      for (size_t i = 0; i < in.size(); ++i) kwargs.emplace(names[i], in[i]);
      return g(kwargs);
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

}  // namespace tdp::nn
