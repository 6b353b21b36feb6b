#include "sdk/nn/wrap_module.h"

#include <stdexcept>

#include "sdk/nn/errors.h"

namespace tdp::nn {

WrapModuleImpl::WrapModuleImpl(TensorDictFunction function, WrapModuleOptions options)
    : TensorDictModuleBase("WrapModule", options.in_keys(), options.out_keys()),
      function_(std::move(function)),
      options_(std::move(options)) {
  if (!function_) {
    throw std::invalid_argument("WrapModule: the function to wrap is an empty std::function.");
  }
}

TensorDict WrapModuleImpl::forward_impl(TensorDict tensordict,
                                        const std::optional<TensorDict>& tensordict_out) {
  TensorDict result;
  try {
    result = function_(tensordict);
  } catch (const std::exception&) {
    detail::rethrow_with_context(describe());
  }
  if (tensordict_out.has_value()) {
    TensorDict out = *tensordict_out;  // a handle: updating it updates the caller's
    return out.update(result);
  }
  if (options_.inplace() && !result.is_same(tensordict)) return tensordict.update(result);
  return result;
}

std::vector<std::string> WrapModuleImpl::repr_fields() const {
  return {"module=<function>", std::string("inplace=") + (options_.inplace() ? "True" : "False")};
}

}  // namespace tdp::nn
