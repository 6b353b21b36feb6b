#include "sdk/nn/tensordict_params.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace tdp::nn {
namespace {

NestedKey key_of(const std::string& dotted_name) {
  std::vector<std::string> path = absl::StrSplit(dotted_name, '.');
  return NestedKey(std::move(path));
}

}  // namespace

TensorDict from_module(const torch::nn::Module& module) {
  TensorDict out(std::vector<int64_t>{});
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.set(key_of(item.key()), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    if (item.value().defined()) out.set(key_of(item.key()), item.value());
  }
  return out;
}

TensorDict from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
  if (modules.empty()) throw std::invalid_argument("from_modules: no modules");
  std::vector<TensorDict> each;
  for (const auto& module : modules) {
    if (module == nullptr) throw std::invalid_argument("from_modules: a module is null");
    each.push_back(from_module(*module));
  }
  const std::vector<NestedKey> keys = each[0].keys(/*include_nested=*/true, /*leaves_only=*/true);
  for (size_t i = 1; i < each.size(); ++i) {
    const std::vector<NestedKey> other = each[i].keys(/*include_nested=*/true, /*leaves_only=*/true);
    for (const NestedKey& key : keys) {
      if (!each[i].contains(key)) {
        throw std::invalid_argument(absl::StrCat("from_modules: module ", i, " has no entry ", key.to_string()));
      }
      if (each[i].get(key).sizes() != each[0].get(key).sizes()) {
        throw std::invalid_argument(absl::StrCat("from_modules: entry ", key.to_string(), " is ",
                                                 shape_to_string(each[i].get(key).sizes()), " in module ", i, " and ",
                                                 shape_to_string(each[0].get(key).sizes()), " in module 0"));
      }
    }
    if (other.size() != keys.size()) {
      throw std::invalid_argument(absl::StrCat("from_modules: module ", i, " has ", other.size(),
                                               " entries, module 0 has ", keys.size()));
    }
  }
  torch::NoGradGuard no_grad;
  TensorDict out({static_cast<int64_t>(modules.size())});
  for (const NestedKey& key : keys) {
    std::vector<at::Tensor> values;
    for (const TensorDict& td : each) values.push_back(td.get(key));
    out.set(key, at::stack(values));
  }
  return out;
}

ToModule::ToModule(torch::nn::Module& module, const TensorDict& params) {
  const TensorDict own = from_module(module);
  const std::vector<NestedKey> keys = params.keys(/*include_nested=*/true, /*leaves_only=*/true);
  // Everything is checked before anything is swapped.
  for (const NestedKey& key : keys) {
    if (!own.contains(key)) {
      throw std::invalid_argument(absl::StrCat("to_module: the module has no parameter or buffer ", key.to_string()));
    }
    const at::Tensor& mine = own.get(key);
    const at::Tensor given = params.get(key);
    if (mine.sizes() != given.sizes() || mine.scalar_type() != given.scalar_type()) {
      throw std::invalid_argument(absl::StrCat("to_module: entry ", key.to_string(), " is ",
                                               c10::toString(given.scalar_type()), shape_to_string(given.sizes()),
                                               "; the module's is ", c10::toString(mine.scalar_type()),
                                               shape_to_string(mine.sizes())));
    }
  }
  std::vector<at::Tensor> targets;
  std::vector<at::Tensor> values;
  for (const NestedKey& key : keys) {
    targets.push_back(own.get(key));
    values.push_back(params.get(key));
  }
  swap_in(std::move(targets), values);
}

ToModule::ToModule(std::vector<at::Tensor> targets, const std::vector<at::Tensor>& values) {
  if (targets.size() != values.size()) {
    throw std::invalid_argument(absl::StrCat("to_module: ", targets.size(), " tensors but ", values.size(), " values"));
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].sizes() != values[i].sizes() || targets[i].scalar_type() != values[i].scalar_type()) {
      throw std::invalid_argument(absl::StrCat("to_module: value ", i, " is ", c10::toString(values[i].scalar_type()),
                                               shape_to_string(values[i].sizes()), "; the tensor is ",
                                               c10::toString(targets[i].scalar_type()),
                                               shape_to_string(targets[i].sizes())));
    }
  }
  swap_in(std::move(targets), values);
}

void ToModule::swap_in(std::vector<at::Tensor> targets, const std::vector<at::Tensor>& values) {
  targets_ = std::move(targets);
  for (size_t i = 0; i < targets_.size(); ++i) {
    originals_.push_back(targets_[i].variable_data());
    targets_[i].set_data(values[i]);
  }
}

ToModule::~ToModule() {
  for (size_t i = 0; i < targets_.size(); ++i) targets_[i].set_data(originals_[i]);
}

TensorDictParamsImpl::TensorDictParamsImpl(TensorDict params, bool no_convert) : data_(std::move(params)) {
  for (const NestedKey& key : data_.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    torch::nn::Module* owner = this;
    const std::vector<std::string>& path = key.path();
    for (size_t level = 0; level + 1 < path.size(); ++level) {
      // named_children() returns a copy: keep it alive while `found` points into it.
      const torch::OrderedDict<std::string, std::shared_ptr<torch::nn::Module>> children = owner->named_children();
      if (const auto* found = children.find(path[level])) {
        owner = found->get();
      } else {
        owner = owner->register_module(path[level], std::make_shared<torch::nn::Module>("TensorDictParams")).get();
      }
    }
    const at::Tensor value = data_.get(key);
    const bool parameter = no_convert ? value.requires_grad() : value.is_floating_point();
    // The registered tensor shares the entry's TensorImpl, so data() holds the registered ones.
    data_.set(key, parameter ? owner->register_parameter(path.back(), value, /*requires_grad=*/true)
                             : owner->register_buffer(path.back(), value));
  }
}

void soft_update(TensorDict& target, const TensorDict& source, double tau) {
  if (!(tau >= 0.0 && tau <= 1.0)) {
    throw std::invalid_argument("soft_update: tau must be in [0, 1], got " + std::to_string(tau));
  }
  torch::NoGradGuard no_grad;
  // Checked before anything is written, so a mismatch leaves `target` as it was.
  const std::vector<NestedKey> keys = target.keys(/*include_nested=*/true, /*leaves_only=*/true);
  for (const NestedKey& key : keys) {
    if (!source.contains(key)) {
      throw std::invalid_argument("soft_update: the source has no entry " + key.to_string());
    }
    if (source.get(key).sizes() != target.get(key).sizes()) {
      throw std::invalid_argument("soft_update: entry " + key.to_string() + " is " +
                                  shape_to_string(source.get(key).sizes()) + " in the source and " +
                                  shape_to_string(target.get(key).sizes()) + " in the target");
    }
  }
  for (const NestedKey& key : keys) {
    at::Tensor destination = target.get(key);
    if (!destination.is_floating_point()) continue;
    destination.lerp_(source.get(key).to(destination.options()), tau);
  }
}

}  // namespace tdp::nn
