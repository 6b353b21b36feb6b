#include "sdk/nn/ensemble_module.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <stdexcept>
#include <utility>

#include "sdk/nn/networks.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_params.h"
#include "sdk/nn/tensordict_sequential.h"

namespace tdp::nn {
namespace {

bool holds_tensors(const torch::nn::Module& module) {
  return !module.parameters(/*recurse=*/true).empty() || !module.buffers(/*recurse=*/true).empty();
}

// [E, d1, ..., dk, n] -> [E, d1 * ... * dk, n] and back: batched matmuls take one row dim.
at::Tensor rows_of(const at::Tensor& x) { return x.reshape({x.size(0), -1, x.size(-1)}); }

}  // namespace

// One step of the batched plan: a Linear or an Mlp over one key, all copies at once, or a
// module without parameters run on the [num_copies, ...] TensorDict as it is.
struct EnsembleModuleImpl::Step {
  struct Layer {
    enum class Kind { kLinear, kLayerNorm, kElementwise } kind;
    at::Tensor weight;  // stacked: [E, out, in] (Linear) or [E, shape...] (LayerNorm)
    at::Tensor bias;    // stacked, may be undefined
    std::vector<int64_t> normalized_shape;
    double eps = 0;
    mutable torch::nn::AnyModule elementwise;  // AnyModule::forward is not const
  };
  NestedKey in_key;
  NestedKey out_key;
  std::vector<Layer> layers;
  std::shared_ptr<TensorDictModuleBase> module;  // set for a module run as it is
};

EnsembleModuleImpl::EnsembleModuleImpl(TensorDictModuleRef module, EnsembleModuleOptions options)
    : TensorDictModuleBase("EnsembleModule"), module_(module.ptr()), options_(std::move(options)) {
  if (module_ == nullptr) throw std::invalid_argument("EnsembleModule: the module is null");
  if (options_.num_copies() < 1) {
    throw std::invalid_argument(
        absl::StrCat("EnsembleModule: num_copies must be at least 1, got ", options_.num_copies()));
  }
  if (options_.batched_max_elements() < 0) {
    throw std::invalid_argument("EnsembleModule: batched_max_elements must be 0 or more");
  }
  set_in_keys(module_->in_keys());
  set_out_keys(module_->out_keys());
  register_module("module", module_);
  stack_copies();
  unbatchable_reason_ = plan_batched();
  if (options_.path() == EnsemblePath::kBatched && !unbatchable_reason_.empty()) {
    throw std::invalid_argument(absl::StrCat("EnsembleModule: path kBatched: ", unbatchable_reason_));
  }
}

void EnsembleModuleImpl::stack_copies() {
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    template_tensors_.push_back(item.value());
    names_.push_back(NestedKey(std::vector<std::string>(absl::StrSplit(item.key(), '.'))));
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    if (!item.value().defined()) continue;
    template_tensors_.push_back(item.value());
    names_.push_back(NestedKey(std::vector<std::string>(absl::StrSplit(item.key(), '.'))));
  }
  // [num_copies, ...] of each; parameters require grad as the template's do, buffers stay buffers.
  TensorDict stacked({options_.num_copies()});
  for (size_t j = 0; j < template_tensors_.size(); ++j) {
    const at::Tensor& tensor = template_tensors_[j];
    std::vector<int64_t> shape = {options_.num_copies()};
    shape.insert(shape.end(), tensor.sizes().begin(), tensor.sizes().end());
    stacked.set(names_[j], at::empty(shape, tensor.options()).requires_grad_(tensor.requires_grad()));
  }
  params_ = register_module("params", TensorDictParams(stacked, /*no_convert=*/true));
  for (const NestedKey& name : names_) stacked_tensors_.push_back(params_->data().get(name));
  reset_parameters();
}

void EnsembleModuleImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  // Each copy is the template re-initialized by its layers' own reset; the template itself is
  // left as it was. A template with nothing to reset (warned once) gives copies equal to it.
  std::vector<at::Tensor> saved;
  for (const at::Tensor& tensor : template_tensors_) saved.push_back(tensor.clone());
  bool resettable = !template_tensors_.empty();
  for (int64_t copy = 0; copy < options_.num_copies(); ++copy) {
    if (resettable) resettable = module_->reset_parameters_recursive();
    for (size_t j = 0; j < template_tensors_.size(); ++j) stacked_tensors_[j][copy].copy_(template_tensors_[j]);
  }
  for (size_t j = 0; j < template_tensors_.size(); ++j) template_tensors_[j].copy_(saved[j]);
}

TensorDict EnsembleModuleImpl::params() const { return params_->data(); }

const at::Tensor& EnsembleModuleImpl::stacked(const at::Tensor& tensor) const {
  for (size_t j = 0; j < template_tensors_.size(); ++j) {
    if (template_tensors_[j].is_same(tensor)) return stacked_tensors_[j];
  }
  throw std::logic_error("EnsembleModule: a tensor of the template has no stacked copy");
}

// Walks the template; returns why the batched path cannot run it, or "" and fills steps_.
std::string EnsembleModuleImpl::plan_batched() {
  std::function<std::string(const std::shared_ptr<TensorDictModuleBase>&)> walk =
      [&](const std::shared_ptr<TensorDictModuleBase>& module) -> std::string {
    if (module->out_keys() != module->out_keys_source()) {
      return absl::StrCat(module->type_name(), " has select_out_keys");
    }
    if (!holds_tensors(*module)) {
      auto step = std::make_shared<Step>();
      step->module = module;
      steps_.push_back(step);
      return "";
    }
    if (auto sequence = std::dynamic_pointer_cast<TensorDictSequentialImpl>(module)) {
      for (const auto& child : sequence->modules()) {
        if (std::string reason = walk(child); !reason.empty()) return reason;
      }
      return "";
    }
    auto wrapper = std::dynamic_pointer_cast<TensorDictModuleImpl>(module);
    if (wrapper == nullptr) return absl::StrCat(module->type_name(), " holds parameters");
    if (wrapper->module() == nullptr || wrapper->in_keys().size() != 1 || wrapper->out_keys().size() != 1 ||
        !wrapper->arg_names().empty()) {
      return absl::StrCat(wrapper->to_string(), ": the batched path runs one Linear or Mlp from one key to one key");
    }
    auto step = std::make_shared<Step>();
    step->in_key = wrapper->in_keys()[0];
    step->out_key = wrapper->out_keys()[0];
    auto add_linear = [&](const torch::nn::LinearImpl& linear) {
      step->layers.push_back({Step::Layer::Kind::kLinear, stacked(linear.weight),
                              linear.bias.defined() ? stacked(linear.bias) : at::Tensor()});
    };
    if (auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(wrapper->module())) {
      add_linear(*linear);
    } else if (auto mlp = std::dynamic_pointer_cast<MlpImpl>(wrapper->module())) {
      // named_children() returns a copy: keep it alive while `layers` points into it.
      const torch::OrderedDict<std::string, std::shared_ptr<torch::nn::Module>> children = mlp->named_children();
      const auto* layers = children.find("layers");
      auto sequential = layers != nullptr ? std::dynamic_pointer_cast<torch::nn::SequentialImpl>(*layers) : nullptr;
      if (sequential == nullptr) return "an Mlp without its layers";
      for (const torch::nn::AnyModule& layer : *sequential) {
        if (auto inner = std::dynamic_pointer_cast<torch::nn::LinearImpl>(layer.ptr())) {
          add_linear(*inner);
        } else if (auto norm = std::dynamic_pointer_cast<torch::nn::LayerNormImpl>(layer.ptr())) {
          Step::Layer entry{Step::Layer::Kind::kLayerNorm,
                            norm->weight.defined() ? stacked(norm->weight) : at::Tensor(),
                            norm->bias.defined() ? stacked(norm->bias) : at::Tensor()};
          entry.normalized_shape = norm->options.normalized_shape();
          entry.eps = norm->options.eps();
          step->layers.push_back(std::move(entry));
        } else if (!holds_tensors(*layer.ptr())) {
          Step::Layer entry{Step::Layer::Kind::kElementwise};
          entry.elementwise = layer;
          step->layers.push_back(std::move(entry));
        } else {
          return absl::StrCat("an Mlp layer ", layer.ptr()->name(), " holds parameters");
        }
      }
    } else {
      return absl::StrCat(wrapper->to_string(), " wraps a ", wrapper->module()->name(),
                          " (the batched path runs Linear and Mlp)");
    }
    steps_.push_back(step);
    return "";
  };
  std::string reason = walk(module_);
  if (!reason.empty()) steps_.clear();
  return reason;
}

bool EnsembleModuleImpl::uses_batched(int64_t rows) const {
  switch (options_.path()) {
    case EnsemblePath::kLoop: return false;
    case EnsemblePath::kBatched: return true;
    case EnsemblePath::kAuto: break;
  }
  return unbatchable_reason_.empty() && options_.num_copies() * rows <= options_.batched_max_elements();
}

TensorDict EnsembleModuleImpl::forward_impl(TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  if (tensordict_out) {
    throw std::invalid_argument(
        "EnsembleModule: tensordict_out is not supported; the output is a new TensorDict with the copies dim first");
  }
  const int64_t copies = options_.num_copies();
  if (!options_.expand_input() && (tensordict.ndim() == 0 || tensordict.batch_size()[0] != copies)) {
    throw std::invalid_argument(absl::StrCat("EnsembleModule: with expand_input false the input's batch size must start "
                                             "with num_copies (",
                                             copies, "), got ", shape_to_string(tensordict.batch_size())));
  }
  const int64_t rows = options_.expand_input() ? tensordict.numel() : tensordict.numel() / copies;
  return uses_batched(rows) ? forward_batched(tensordict) : forward_loop(tensordict);
}

TensorDict EnsembleModuleImpl::forward_batched(const TensorDict& input) const {
  TensorDict td = input;
  if (options_.expand_input()) {
    std::vector<int64_t> batch = {options_.num_copies()};
    batch.insert(batch.end(), input.batch_size().begin(), input.batch_size().end());
    td = TensorDict(batch, input.device());
    for (const NestedKey& key : input.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      const at::Tensor value = input.get(key);
      std::vector<int64_t> shape = {options_.num_copies()};
      shape.insert(shape.end(), value.sizes().begin(), value.sizes().end());
      td.set(key, value.expand(shape));
    }
  } else {
    td = input.clone(/*deep=*/false);
  }
  for (const auto& step : steps_) {
    if (step->module) {
      td = step->module->forward(td);
      continue;
    }
    const at::Tensor input_value = td.get(step->in_key);
    at::Tensor x = rows_of(input_value);
    for (const Step::Layer& layer : step->layers) {
      switch (layer.kind) {
        case Step::Layer::Kind::kLinear:
          x = layer.bias.defined() ? at::baddbmm(layer.bias.unsqueeze(1), x, layer.weight.transpose(1, 2))
                                   : at::bmm(x, layer.weight.transpose(1, 2));
          break;
        case Step::Layer::Kind::kLayerNorm:
          x = at::layer_norm(x, layer.normalized_shape, {}, {}, layer.eps);
          if (layer.weight.defined()) x = x * layer.weight.unsqueeze(1);
          if (layer.bias.defined()) x = x + layer.bias.unsqueeze(1);
          break;
        case Step::Layer::Kind::kElementwise:
          x = layer.elementwise.forward<at::Tensor>(x);
          break;
      }
    }
    std::vector<int64_t> shape = input_value.sizes().vec();
    shape.back() = x.size(-1);
    td.set(step->out_key, x.reshape(shape));
  }
  return td;
}

TensorDict EnsembleModuleImpl::forward_loop(const TensorDict& input) {
  if (at::GradMode::is_enabled()) {
    for (const at::Tensor& tensor : stacked_tensors_) {
      if (tensor.requires_grad()) {
        throw std::invalid_argument(
            absl::StrCat("EnsembleModule: the loop path computes no gradients for the stacked parameters (",
                         unbatchable_reason_.empty() ? "path kLoop" : unbatchable_reason_,
                         "); call it under torch::NoGradGuard or c10::InferenceMode, or use a module the batched "
                         "path runs"));
      }
    }
  }
  std::lock_guard<std::mutex> lock(loop_mutex_);
  std::vector<TensorDict> outputs;
  outputs.reserve(options_.num_copies());
  for (int64_t copy = 0; copy < options_.num_copies(); ++copy) {
    std::vector<at::Tensor> values;
    values.reserve(stacked_tensors_.size());
    for (const at::Tensor& stacked : stacked_tensors_) values.push_back(stacked.select(0, copy));
    ToModule swapped(template_tensors_, values);
    TensorDict given = options_.expand_input() ? input.clone(/*deep=*/false) : input[copy];
    outputs.push_back(module_->forward(given));
  }
  return TensorDict::stack(outputs, 0);
}

std::vector<std::string> EnsembleModuleImpl::repr_fields() const {
  return {absl::StrCat("num_copies=", options_.num_copies()),
          absl::StrCat("expand_input=", options_.expand_input() ? "True" : "False"),
          absl::StrCat("batched=", unbatchable_reason_.empty() ? "True" : "False")};
}

}  // namespace tdp::nn
