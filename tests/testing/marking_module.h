// MarkingModuleImpl: a TensorDictModule subclass that runs the class's own forward and then adds
// one to the entry "marked" (0 when absent): a test sees that a sequence called the subclass's
// forward(), and how many times.
//
//   auto marking = std::make_shared<tdp::test_util::MarkingModuleImpl>(fn, keys({"x"}, {"y"}));
//   TensorDictSequential seq({marking});
//   seq(td).get("marked");  // 1
#pragma once

#include <ATen/ops/zeros.h>

#include <optional>
#include <utility>

#include "sdk/nn/tensordict_module.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::test_util {

class MarkingModuleImpl : public nn::TensorDictModuleImpl {
 public:
  using nn::TensorDictModuleImpl::TensorDictModuleImpl;

 protected:
  TensorDict forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) override {
    TensorDict out = nn::TensorDictModuleImpl::forward_impl(std::move(tensordict), tensordict_out);
    out.set("marked", out.get("marked", at::zeros({})) + 1);
    return out;
  }
};

}  // namespace tdp::test_util
