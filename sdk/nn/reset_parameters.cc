// reset_parameters_recursive() lives apart from tensordict_module_base.cc because it needs the
// headers of every LibTorch layer it knows how to re-initialize.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/functional/instancenorm.h>  // instancenorm.h needs it first
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>

#include <torch/nn/init.h>
#include <torch/utils.h>

#include <cmath>
#include <optional>

#include "sdk/log/log.h"
#include "sdk/nn/tensordict_module_base.h"

namespace tdp::nn {
namespace {

thread_local std::optional<at::Generator> t_init_generator;

}  // namespace

// The bound as LibTorch's init.cpp computes it (fan in, leaky_relu gain), to the last bit: the
// same generator state gives the same values as the layer's own reset under a seeded global one.
void kaiming_uniform(at::Tensor& tensor, double a, const at::Generator& generator) {
  int64_t fan_in = tensor.size(1);
  for (int64_t d = 2; d < tensor.dim(); ++d) fan_in *= tensor.size(d);
  const double gain = std::sqrt(2.0 / (1 + std::pow(a, 2)));
  const double deviation = gain / std::sqrt(fan_in);
  const double bound = std::sqrt(3.0) * deviation;
  tensor.uniform_(-bound, bound, generator);
}

bool reset_layer_parameters(torch::nn::Module& module, const at::Generator& generator) {
  using namespace torch::nn;  // NOLINT
  torch::NoGradGuard no_grad;
  auto linear_like = [&](at::Tensor& weight, at::Tensor& bias) {
    kaiming_uniform(weight, std::sqrt(5.0), generator);
    if (bias.defined()) {
      int64_t fan_in = weight.size(1);
      for (int64_t d = 2; d < weight.dim(); ++d) fan_in *= weight.size(d);
      const double bound = 1 / std::sqrt(fan_in);
      bias.uniform_(-bound, bound, generator);
    }
  };
  if (auto* layer = dynamic_cast<LinearImpl*>(&module)) {
    linear_like(layer->weight, layer->bias);
    return true;
  }
  if (auto* layer = dynamic_cast<BilinearImpl*>(&module)) {
    const double bound = 1.0 / std::sqrt(layer->weight.size(1));
    layer->weight.uniform_(-bound, bound, generator);
    if (layer->bias.defined()) layer->bias.uniform_(-bound, bound, generator);
    return true;
  }
#define TDP_CONV(Impl)                                       \
  if (auto* layer = dynamic_cast<Impl*>(&module)) {          \
    linear_like(layer->weight, layer->bias);                 \
    return true;                                             \
  }
  TDP_CONV(Conv1dImpl)
  TDP_CONV(Conv2dImpl)
  TDP_CONV(Conv3dImpl)
  TDP_CONV(ConvTranspose1dImpl)
  TDP_CONV(ConvTranspose2dImpl)
  TDP_CONV(ConvTranspose3dImpl)
#undef TDP_CONV
  auto embedding = [&](at::Tensor& weight, const std::optional<int64_t>& padding_idx) {
    weight.normal_(0, 1, generator);
    if (padding_idx) weight[*padding_idx].fill_(0);
  };
  if (auto* layer = dynamic_cast<EmbeddingImpl*>(&module)) {
    embedding(layer->weight, layer->options.padding_idx());
    return true;
  }
  if (auto* layer = dynamic_cast<EmbeddingBagImpl*>(&module)) {
    embedding(layer->weight, layer->options.padding_idx());
    return true;
  }
  // RNN/LSTM/GRU and their cells: every parameter U(-1/sqrt(hidden), 1/sqrt(hidden)), in order.
  auto recurrent = [&](int64_t hidden_size) {
    const double stdv = 1.0 / std::sqrt(hidden_size);
    for (at::Tensor& weight : module.parameters()) weight.uniform_(-stdv, stdv, generator);
    return true;
  };
  if (auto* layer = dynamic_cast<RNNImpl*>(&module)) return recurrent(layer->options_base.hidden_size());
  if (auto* layer = dynamic_cast<LSTMImpl*>(&module)) return recurrent(layer->options_base.hidden_size());
  if (auto* layer = dynamic_cast<GRUImpl*>(&module)) return recurrent(layer->options_base.hidden_size());
  if (dynamic_cast<RNNCellImpl*>(&module) || dynamic_cast<LSTMCellImpl*>(&module) ||
      dynamic_cast<GRUCellImpl*>(&module)) {
    // options_base is protected in the cells: their hidden size is their weight_hh's last dim.
    return recurrent(module.named_parameters(/*recurse=*/false)["weight_hh"].size(1));
  }
  return false;
}

InitGeneratorGuard::InitGeneratorGuard(at::Generator generator) : previous_(std::move(t_init_generator)) {
  t_init_generator = std::move(generator);
}

InitGeneratorGuard::~InitGeneratorGuard() { t_init_generator = std::move(previous_); }

std::optional<at::Generator> init_generator() { return t_init_generator; }

namespace {

template <typename... Impl>
bool reset_known(torch::nn::Module& module) {
  // LibTorch's reset_parameters() are non-virtual members of each layer, hence the casts.
  bool done = false;
  (void)std::initializer_list<int>{([&] {
    if (done) return 0;
    if (auto* layer = dynamic_cast<Impl*>(&module)) {
      // Under an InitGeneratorGuard the layers that draw draw from its generator.
      if (!t_init_generator || !reset_layer_parameters(*layer, *t_init_generator)) layer->reset_parameters();
      done = true;
    }
    return 0;
  }())...};
  return done;
}

bool reset_one(torch::nn::Module& module) {
  if (auto* resettable = dynamic_cast<ParameterResettable*>(&module)) {
    resettable->reset_parameters();
    return true;
  }
  using namespace torch::nn;  // NOLINT: the list below reads better unqualified
  return reset_known<LinearImpl, BilinearImpl, Conv1dImpl, Conv2dImpl, Conv3dImpl,
                     ConvTranspose1dImpl, ConvTranspose2dImpl, ConvTranspose3dImpl,
                     BatchNorm1dImpl, BatchNorm2dImpl, BatchNorm3dImpl, InstanceNorm1dImpl,
                     InstanceNorm2dImpl, InstanceNorm3dImpl, LayerNormImpl, GroupNormImpl,
                     EmbeddingImpl, EmbeddingBagImpl, RNNImpl, LSTMImpl, GRUImpl, RNNCellImpl,
                     LSTMCellImpl, GRUCellImpl>(module);
}

// Depth first, like tensordict's _reset_parameters; a child is reset after its own children.
// A ParameterResettable module re-initializes its own subtree (an EnsembleModule resets its
// copies, not the template they run through), so the walk does not enter it.
bool reset_children(torch::nn::Module& module) {
  bool any = false;
  for (const auto& child : module.children()) {
    if (dynamic_cast<ParameterResettable*>(child.get()) == nullptr) any |= reset_children(*child);
    any |= reset_one(*child);
  }
  return any;
}

}  // namespace

bool TensorDictModuleBase::reset_parameters_recursive() {
  const bool any = dynamic_cast<ParameterResettable*>(this) != nullptr ? reset_one(*this) : reset_children(*this);
  if (!any) {
    logger()->warn(
        "{}: reset_parameters_recursive was called without the parameters argument and did "
        "not find any parameters to reset",
        describe());
  }
  return any;
}

}  // namespace tdp::nn
