#include "sdk/fused/plan.h"

#include <ATen/ATen.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <c10/core/InferenceMode.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "sdk/fused/math.h"
#include "sdk/fused/philox.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/q_value_module.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/egreedy_module.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/probabilistic/probabilistic_sequential.h"

namespace tdp::fused {
namespace {

// Rows computed together: bounds the per-thread scratch whatever the batch size.
constexpr int64_t kTile = 64;
constexpr int kMaxDestinations = 16;
// The largest event a head handles (classes, action dims): its per-row buffers live on the stack.
constexpr int64_t kMaxEvent = 256;

struct Mapping {
  enum Kind { kNone, kSoftplus, kExp, kRelu, kExpln, kAbs, kBiasedSoftplus } kind = kNone;
  float shift = 0, min_val = 0;
};

struct Op {
  enum Kind { kLinear, kLayerNorm, kActivation, kMapping, kSplitNormal, kAddScale, kGru, kLstm, kQValue } kind;
  int in = -1, out = -1, out2 = -1;
  // Recurrent cells: in is the input, state (and cell) the previous state; out (and out2) the
  // next; gates_in / gates_state hold the two projections.
  int state = -1, cell = -1, gates_in = -1, gates_state = -1;
  int64_t in_w = 0, out_w = 0;
  int64_t w = -1, b = -1;    // arena offsets
  int64_t w2 = -1, b2 = -1;  // the recurrent cells' hidden-state projection
  Activation activation = Activation::kIdentity;
  Mapping mapping;
  float lb = 0, eps = 1e-5f;
  bool one_hot = false;  // kQValue: a one-hot action (else the index)
};

enum class HeadKind { kNone, kCategorical, kOneHotCategorical, kBernoulli, kNormal, kIndependentNormal, kTanhNormal, kDelta };

// One distribution: the probabilistic module's, or one part of its composite.
struct Head {
  HeadKind kind = HeadKind::kNone;
  std::string path, name;
  int p0 = -1, p1 = -1;  // logits|probs / loc / param ; scale
  bool from_probs = false;
  int sample = -1, log_prob = -1;
  int64_t width = 0;  // event width (categorical: number of classes)
  // The first Philox block of this head's draws in a row: a composite's parts draw from
  // disjoint blocks, so each part's values are independent of the others'.
  uint32_t block0 = 0;
  bool tanh_loc = false;
  float upscale = 5.0f;
  double low = -1.0, high = 1.0;
  bool safe_tanh = true;
  double atol = 1e-6, rtol = 1e-6;
};

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float apply_mapping(const Mapping& m, float x) {
  switch (m.kind) {
    case Mapping::kNone: return x;
    case Mapping::kSoftplus: return softplus(x);
    case Mapping::kExp: return std::exp(x);
    case Mapping::kRelu: return x > 0.0f ? x : 0.0f;
    case Mapping::kExpln: return x <= 0.0f ? std::exp(x) : std::log1p(x) + 1.0f;
    case Mapping::kAbs: return std::fabs(x);
    case Mapping::kBiasedSoftplus: return softplus(x + m.shift) + m.min_val;
  }
  return x;
}

// The built-in mappings of sdk/nn/mappings.cc, by name; false for a custom one.
bool parse_mapping(const std::string& name, Mapping& m) {
  static const std::pair<const char*, Mapping::Kind> simple[] = {
      {"none", Mapping::kNone}, {"softplus", Mapping::kSoftplus}, {"exp", Mapping::kExp},
      {"relu", Mapping::kRelu}, {"expln", Mapping::kExpln},       {"abs", Mapping::kAbs}};
  for (const auto& [n, kind] : simple) {
    if (name == n) {
      m.kind = kind;
      return true;
    }
  }
  double bias = 1.0, min_val = 0.01;
  const std::string prefix = "biased_softplus_";
  if (name != "biased_softplus") {
    if (name.rfind(prefix, 0) != 0) return false;
    std::vector<std::string> parts = absl::StrSplit(name.substr(prefix.size()), '_');
    if (parts.size() > 2 || !absl::SimpleAtod(parts[0], &bias) ||
        (parts.size() == 2 && !absl::SimpleAtod(parts[1], &min_val))) {
      return false;
    }
  }
  m.kind = Mapping::kBiasedSoftplus;
  m.shift = static_cast<float>(std::log(std::max(std::expm1(bias - min_val), 1e-6)));
  m.min_val = static_cast<float>(min_val);
  return true;
}

Activation parse_activation(const std::string& name) {
  if (name == "tanh") return Activation::kTanh;
  if (name == "relu") return Activation::kRelu;
  if (name == "elu") return Activation::kElu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "leaky_relu") return Activation::kLeakyRelu;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "softplus") return Activation::kSoftplus;
  if (name == "identity") return Activation::kIdentity;
  throw std::invalid_argument("unknown activation " + name);
}

struct NotLowerable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The policy's spec does not describe its built module at `path` (a policy put together in C++
// whose spec is a header only): FusedPlan::lower lowers the spec the module exports to instead.
struct SpecMismatch : std::runtime_error {
  explicit SpecMismatch(const std::string& path)
      : std::runtime_error(absl::StrCat(path, ": the spec does not describe the built module")) {}
};

struct Scratch {
  std::unique_ptr<float[]> data;
  int64_t size = 0;
};

float* thread_scratch(int64_t floats) {
  thread_local Scratch scratch;
  if (scratch.size < floats) {
    scratch.data.reset(new float[floats]);
    scratch.size = floats;
  }
  return scratch.data.get();
}

constexpr double kLog2 = 0.69314718055994530942;
constexpr double kHalfLog2Pi = 0.91893853320467274178;

}  // namespace

struct FusedPlan::Impl {
  std::vector<Slot> slots;
  std::vector<int64_t> slot_offset;  // per slot, in the tile scratch
  int64_t scratch_per_tile = 0;
  std::vector<float> arena;
  std::vector<Op> ops;
  // The probabilistic module's distribution, or its composite's parts in distribution_map order.
  std::vector<Head> heads;
  std::string head_path;  // the probabilistic module's path in the spec
  bool composite = false;
  // An egreedy module's path: it passes the action through, except under RANDOM (and outside any
  // interaction-type scope), which the plan leaves to LibTorch (check()).
  std::string egreedy_path;
  int log_prob_sum = -1;  // a composite's aggregated log-prob (composite_lp_aggregate), else -1
  nn::InteractionType default_type = nn::InteractionType::kDeterministic;
  uint32_t next_block = 0;
  std::vector<int> inputs;  // the spec's inputs, in order
  std::vector<int> outputs;
  int action = -1;
  std::vector<std::string> description;

  // ---- lowering ---------------------------------------------------------------------------

  // The slot last written at `key` (an input's when no module writes it), else -1.
  int find_or_none(const NestedKey& key) const {
    for (int i = static_cast<int>(slots.size()) - 1; i >= 0; --i) {
      if (slots[i].key == key) return i;
    }
    return -1;
  }
  int find(const NestedKey& key, const std::string& path) const {
    const int s = find_or_none(key);
    if (s < 0) throw NotLowerable(absl::StrCat(path, ": reads ", key.to_string(), ", which the plan does not compute"));
    return s;
  }
  int add_slot(NestedKey key, int64_t width, std::vector<int64_t> shape, bool integer = false) {
    slots.push_back(Slot{std::move(key), width, std::move(shape), integer});
    return static_cast<int>(slots.size()) - 1;
  }
  int add_temp(int64_t width) { return add_slot(NestedKey("_"), width, {width}); }
  int64_t put(const at::Tensor& t) {
    at::Tensor c = t.detach().to(at::kFloat).contiguous();
    const int64_t at_offset = static_cast<int64_t>(arena.size());
    arena.insert(arena.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    return at_offset;
  }
  int add_linear(int in, const torch::nn::LinearImpl& linear, int out_slot) {
    Op op{Op::kLinear};
    op.in = in;
    op.in_w = linear.options.in_features();
    op.out_w = linear.options.out_features();
    if (slots[in].width != op.in_w) {
      throw NotLowerable(absl::StrCat("a Linear with in_features ", op.in_w, " reads a value of width ", slots[in].width));
    }
    op.out = out_slot < 0 ? add_temp(op.out_w) : out_slot;
    op.w = put(linear.weight.t());
    if (linear.options.bias()) op.b = put(linear.bias);
    ops.push_back(op);
    return op.out;
  }

  // The built module at a node of the spec, as the class the node's kind builds.
  template <typename Built>
  static const Built& built_as(const nn::TensorDictModuleBase& m, const std::string& path) {
    auto* built = dynamic_cast<const Built*>(&m);
    if (built == nullptr) throw SpecMismatch(path);
    return *built;
  }
  // The network a TensorDictModule wraps, as the class its spec kind builds.
  template <typename Network>
  static const Network& network_as(const nn::TensorDictModuleImpl& module, const std::string& path) {
    auto* network = dynamic_cast<const Network*>(module.module().get());
    if (network == nullptr) throw SpecMismatch(path);
    return *network;
  }

  // The module reads `ins` keys and writes `outs` (`what`: the network's class).
  static void need(const nn::TensorDictModuleImpl& module, size_t ins, size_t outs, const char* what,
                   const std::string& path) {
    if (module.in_keys().size() != ins || module.out_keys_source().size() != outs) {
      throw NotLowerable(absl::StrCat(path, ": a ", what, " module with ", module.in_keys().size(), " in_keys and ",
                                      module.out_keys_source().size(), " out_keys"));
    }
  }

  // ---- one lowering per network kind with a fused kernel; network() looks them up by kind ------

  void lower_mlp(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& mlp = network_as<nn::MlpImpl>(module, path);
    need(module, 1, 1, "Mlp", path);
    const auto& o = mlp.options();
    const Activation activation = parse_activation(o.activation());
    int x = find(module.in_keys()[0], path);
    std::shared_ptr<torch::nn::Module> layers = mlp.named_children()["layers"];
    const auto children = layers->children();
    for (size_t i = 0; i < children.size(); ++i) {
      if (auto* linear = dynamic_cast<const torch::nn::LinearImpl*>(children[i].get())) {
        x = add_linear(x, *linear, -1);
      } else if (auto* norm = dynamic_cast<const torch::nn::LayerNormImpl*>(children[i].get())) {
        if (!norm->options.elementwise_affine() || norm->options.normalized_shape().size() != 1) {
          throw NotLowerable(absl::StrCat(path, ": a LayerNorm without a 1-D affine shape"));
        }
        Op op{Op::kLayerNorm};
        op.in = op.out = x;
        op.out_w = slots[x].width;
        op.eps = static_cast<float>(norm->options.eps());
        op.w = put(norm->weight);
        op.b = put(norm->bias);
        ops.push_back(op);
      } else {
        Op op{Op::kActivation};
        op.in = op.out = x;
        op.out_w = slots[x].width;
        op.activation = activation;
        ops.push_back(op);
      }
    }
    output(x, module.out_keys_source()[0]);
    description.push_back(absl::StrCat(path, ": fused (Mlp ", o.in_features(), "->", o.out_features(), ", ",
                                       o.activation(), o.layer_norm() ? ", layer_norm" : "", ")"));
  }

  void lower_linear(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& linear = network_as<torch::nn::LinearImpl>(module, path);
    need(module, 1, 1, "Linear", path);
    output(add_linear(find(module.in_keys()[0], path), linear, -1), module.out_keys_source()[0]);
    description.push_back(absl::StrCat(path, ": fused (Linear)"));
  }

  void lower_mapping(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& mapping = network_as<nn::MappingModuleImpl>(module, path);
    need(module, 1, 1, "MappingModule", path);
    Op op{Op::kMapping};
    if (!parse_mapping(mapping.name(), op.mapping)) {
      throw NotLowerable(absl::StrCat(path, ": the mapping '", mapping.name(), "' is a custom one (C++ code)"));
    }
    op.in = find(module.in_keys()[0], path);
    op.out_w = slots[op.in].width;
    op.out = add_temp(op.out_w);
    ops.push_back(op);
    output(op.out, module.out_keys_source()[0]);
    description.push_back(absl::StrCat(path, ": fused (mapping ", mapping.name(), ")"));
  }

  void lower_normal_param_extractor(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& npe = network_as<nn::NormalParamExtractorImpl>(module, path);
    need(module, 1, 2, "NormalParamExtractor", path);
    Op op{Op::kSplitNormal};
    if (!parse_mapping(npe.options().scale_mapping(), op.mapping)) {
      throw NotLowerable(absl::StrCat(path, ": the scale mapping '", npe.options().scale_mapping(), "' is a custom one"));
    }
    op.in = find(module.in_keys()[0], path);
    if (slots[op.in].width % 2 != 0) throw NotLowerable(absl::StrCat(path, ": an odd width"));
    op.out_w = slots[op.in].width / 2;
    op.lb = static_cast<float>(npe.options().scale_lb());
    op.out = add_temp(op.out_w);
    op.out2 = add_temp(op.out_w);
    ops.push_back(op);
    output(op.out, module.out_keys_source()[0]);
    output(op.out2, module.out_keys_source()[1]);
    description.push_back(absl::StrCat(path, ": fused (NormalParamExtractor)"));
  }

  void lower_add_state_independent_normal_scale(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& add = network_as<nn::AddStateIndependentNormalScaleImpl>(module, path);
    need(module, 1, 2, "AddStateIndependentNormalScale", path);
    Op op{Op::kAddScale};
    op.in = find(module.in_keys()[0], path);
    op.out_w = slots[op.in].width;
    if (add.options().scale_shape() != std::vector<int64_t>{op.out_w}) {
      throw NotLowerable(absl::StrCat(path, ": a scale_shape other than [loc width]"));
    }
    // The scale is state-independent: LibTorch computes it once here, so it matches exactly.
    {
      c10::InferenceMode guard;
      auto [loc, scale] =
          const_cast<nn::AddStateIndependentNormalScaleImpl&>(add).forward(at::zeros({1, op.out_w}));
      op.w = put(scale.reshape({-1}));
    }
    op.out = add_temp(op.out_w);
    op.out2 = add_temp(op.out_w);
    ops.push_back(op);
    output(op.out, module.out_keys_source()[0]);
    output(op.out2, module.out_keys_source()[1]);
    description.push_back(absl::StrCat(path, ": fused (AddStateIndependentNormalScale)"));
  }

  void lower_gru_cell(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& gru = network_as<nn::GruCellImpl>(module, path);
    need(module, 2, 1, "GruCell", path);
    const auto& o = gru.options();
    Op op = recurrent_cell(Op::kGru, gru, o.input_size(), o.hidden_size(), 3, module.in_keys(), path);
    output(op.out, module.out_keys_source()[0]);
    ops.push_back(op);
    description.push_back(absl::StrCat(path, ": fused (GruCell ", o.input_size(), "->", o.hidden_size(), ")"));
  }

  void lower_lstm_cell(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& lstm = network_as<nn::LstmCellImpl>(module, path);
    need(module, 3, 2, "LstmCell", path);
    const auto& o = lstm.options();
    Op op = recurrent_cell(Op::kLstm, lstm, o.input_size(), o.hidden_size(), 4, module.in_keys(), path);
    op.cell = find(module.in_keys()[2], path);
    if (slots[op.cell].width != o.hidden_size()) {
      throw NotLowerable(absl::StrCat(path, ": an LstmCell of hidden_size ", o.hidden_size(),
                                      " reads a cell state of width ", slots[op.cell].width));
    }
    op.out2 = add_temp(o.hidden_size());
    output(op.out, module.out_keys_source()[0]);
    output(op.out2, module.out_keys_source()[1]);
    ops.push_back(op);
    description.push_back(absl::StrCat(path, ": fused (LstmCell ", o.input_size(), "->", o.hidden_size(), ")"));
  }

  // The lowering of the network kind `spec` names; a kind without one (torchscript, one_hot, cat)
  // is not lowerable.
  void network(const tdpolicy::Network& spec, const nn::TensorDictModuleImpl& module, const std::string& path) {
    using Lowering = void (Impl::*)(const nn::TensorDictModuleImpl&, const std::string&);
    static const std::pair<tdpolicy::Network::KindCase, Lowering> kLowerings[] = {
        {tdpolicy::Network::kMlp, &Impl::lower_mlp},
        {tdpolicy::Network::kLinear, &Impl::lower_linear},
        {tdpolicy::Network::kGruCell, &Impl::lower_gru_cell},
        {tdpolicy::Network::kLstmCell, &Impl::lower_lstm_cell},
        {tdpolicy::Network::kMapping, &Impl::lower_mapping},
        {tdpolicy::Network::kNormalParamExtractor, &Impl::lower_normal_param_extractor},
        {tdpolicy::Network::kAddStateIndependentNormalScale, &Impl::lower_add_state_independent_normal_scale},
    };
    if (spec.kind_case() == tdpolicy::Network::KIND_NOT_SET) throw SpecMismatch(path);
    for (const auto& [kind, lowering] : kLowerings) {
      if (kind == spec.kind_case()) return (this->*lowering)(module, path);
    }
    const auto& inner = module.module();
    const std::string what = inner ? inner->name() : "a function";
    throw NotLowerable(absl::StrCat(path, ": a TensorDictModule around ", what, " (no fused kernel for it)"));
  }

  // A GRU (3 gates) or LSTM (4 gates) cell reading (input, hidden state, ...): its torch.nn cell's
  // weights transposed into the arena, the next hidden state in a new slot (so the modules after
  // it, and the outputs, read the new state while the input slot keeps the old one).
  Op recurrent_cell(Op::Kind kind, const torch::nn::Module& cell, int64_t input_size, int64_t hidden_size,
                    int64_t gates, const std::vector<NestedKey>& in_keys, const std::string& path) {
    Op op{kind};
    op.in = find(in_keys[0], path);
    op.state = find(in_keys[1], path);
    if (slots[op.in].width != input_size || slots[op.state].width != hidden_size) {
      throw NotLowerable(absl::StrCat(path, ": a cell of input_size ", input_size, " and hidden_size ", hidden_size,
                                      " reads values of widths ", slots[op.in].width, " and ", slots[op.state].width));
    }
    op.in_w = input_size;
    op.out_w = hidden_size;
    const auto params = cell.named_parameters(/*recurse=*/true);
    auto weight = [&](const char* name) -> int64_t {
      const at::Tensor* t = params.find(absl::StrCat("cell.", name));
      return t != nullptr && t->defined() ? put(name[0] == 'w' ? t->t() : *t) : -1;
    };
    op.w = weight("weight_ih");
    op.w2 = weight("weight_hh");
    op.b = weight("bias_ih");
    op.b2 = weight("bias_hh");
    if (op.w < 0 || op.w2 < 0) throw NotLowerable(absl::StrCat(path, ": a recurrent cell without weight_ih/weight_hh"));
    op.gates_in = add_temp(gates * hidden_size);
    op.gates_state = add_temp(gates * hidden_size);
    op.out = add_temp(hidden_size);
    return op;
  }

  // Names slot `s` `key` (a "_" key drops it).
  void output(int s, const NestedKey& key) {
    if (key == NestedKey("_")) return;
    slots[s].key = key;
  }

  // What a head writes per row: its sample's width and shape, its log-prob's shape.
  struct HeadLayout {
    int64_t sample_width = 0;
    std::vector<int64_t> sample_shape, lp_shape;
    bool integer = false;
  };

  // Reads the distribution `h.name` with `kwargs` into `h`; `param(name)` is the slot of the
  // distribution parameter `name`, -1 when it has none.
  HeadLayout lower_head(Head& h, const dist::DistributionKwargs& kwargs,
                        const std::function<int(const std::string&)>& param) const {
    const std::string& path = h.path;
    auto kw = [&](const char* name, double fallback) {
      auto it = kwargs.find(name);
      return it == kwargs.end() ? fallback : it->second.toDouble();
    };
    for (const auto& [name, value] : kwargs) {
      static const char* known[] = {"low", "high", "upscale", "tanh_loc", "safe_tanh", "event_dims", "atol", "rtol"};
      if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return name == k; }) == std::end(known)) {
        throw NotLowerable(absl::StrCat(path, ": the distribution kwarg '", name, "'"));
      }
    }
    HeadLayout layout;
    if (h.name == "categorical" || h.name == "one_hot_categorical" || h.name == "bernoulli") {
      h.kind = h.name == "categorical" ? HeadKind::kCategorical
               : h.name == "bernoulli" ? HeadKind::kBernoulli
                                       : HeadKind::kOneHotCategorical;
      h.p0 = param("logits");
      if (h.p0 < 0) {
        h.p0 = param("probs");
        h.from_probs = true;
      }
      if (h.p0 < 0) throw NotLowerable(absl::StrCat(path, ": ", h.name, " without logits or probs"));
      h.width = slots[h.p0].width;
      if (h.kind == HeadKind::kCategorical) {
        layout.sample_width = 1;
        layout.integer = true;
      } else {
        layout.sample_width = h.width;
        layout.sample_shape = {h.width};
        layout.integer = h.kind == HeadKind::kOneHotCategorical;          // one-hot int64; Bernoulli floats
        if (h.kind == HeadKind::kBernoulli) layout.lp_shape = {h.width};  // one event per element
      }
    } else if (h.name == "normal" || h.name == "independent_normal" || h.name == "tanh_normal") {
      h.kind = h.name == "normal"        ? HeadKind::kNormal
               : h.name == "tanh_normal" ? HeadKind::kTanhNormal
                                         : HeadKind::kIndependentNormal;
      h.p0 = param("loc");
      h.p1 = param("scale");
      if (h.p0 < 0 || h.p1 < 0 || param("low") >= 0 || param("high") >= 0) {
        throw NotLowerable(absl::StrCat(path, ": ", h.name, " reads parameters other than (loc, scale)"));
      }
      h.width = slots[h.p0].width;
      if (slots[h.p1].width != h.width) throw NotLowerable(absl::StrCat(path, ": loc and scale widths differ"));
      if (kwargs.count("event_dims") && kwargs.at("event_dims").toLong() != 1) {
        throw NotLowerable(absl::StrCat(path, ": event_dims other than 1"));
      }
      h.tanh_loc = kwargs.count("tanh_loc") && kwargs.at("tanh_loc").toBool();
      h.upscale = static_cast<float>(kw("upscale", 5.0));
      h.low = kw("low", -1.0);
      h.high = kw("high", 1.0);
      h.safe_tanh = !kwargs.count("safe_tanh") || kwargs.at("safe_tanh").toBool();
      layout.sample_width = h.width;
      layout.sample_shape = {h.width};
      if (h.kind == HeadKind::kNormal) layout.lp_shape = {h.width};
    } else if (h.name == "delta") {
      h.kind = HeadKind::kDelta;
      h.p0 = param("param");
      if (h.p0 < 0) throw NotLowerable(absl::StrCat(path, ": delta without param"));
      h.width = slots[h.p0].width;
      h.atol = kw("atol", 1e-6);
      h.rtol = kw("rtol", 1e-6);
      layout.sample_width = h.width;
      layout.sample_shape = {h.width};  // one event per row (Delta's event shape is param's last dim)
    } else {
      throw NotLowerable(absl::StrCat(path, ": the distribution '", h.name, "' has no fused kernel"));
    }
    if (h.width > kMaxEvent) {
      throw NotLowerable(
          absl::StrCat(path, ": ", h.name, " over ", h.width, " values (the plan takes at most ", kMaxEvent, ")"));
    }
    return layout;
  }

  // Lowers `h` and gives it its sample slot (at `sample_key`), its log-prob slot (at `lp_key`;
  // "_": computed on request (the flat API), not an entry) and its Philox blocks.
  void add_head(Head h, const dist::DistributionKwargs& kwargs, const std::function<int(const std::string&)>& param,
                const NestedKey& sample_key, const NestedKey& lp_key) {
    const HeadLayout layout = lower_head(h, kwargs, param);
    h.block0 = next_block;
    const bool one_draw = h.kind == HeadKind::kCategorical || h.kind == HeadKind::kOneHotCategorical;
    next_block += static_cast<uint32_t>(one_draw ? 1 : (h.width + 3) / 4);
    h.sample = add_slot(sample_key, layout.sample_width, layout.sample_shape, layout.integer);
    h.log_prob = add_slot(lp_key, layout.lp_shape.empty() ? 1 : layout.lp_shape[0], layout.lp_shape);
    heads.push_back(std::move(h));
  }

  void probabilistic(const nn::ProbabilisticTensorDictModuleImpl& module, const std::string& path) {
    const auto& o = module.options();
    if (!heads.empty()) {
      throw NotLowerable(absl::StrCat(path, ": a second probabilistic module (autoregressive heads are not lowered)"));
    }
    if (!o.num_samples().empty()) throw NotLowerable(absl::StrCat(path, ": num_samples"));
    if (o.generator().has_value() || o.generator_key().has_value()) {
      throw NotLowerable(absl::StrCat(path, ": a module-owned generator or generator_key"));
    }
    head_path = path;
    default_type = o.default_interaction_type();
    const std::string default_name(nn::to_string(default_type));
    const auto sample_keys = module.dist_sample_keys();
    if (o.is_composite()) {
      composite_head(module, path);
      return;
    }
    if (sample_keys.size() != 1) throw NotLowerable(absl::StrCat(path, ": several sample keys"));
    Head h;
    h.path = path;
    h.name = o.distribution().to_string();
    auto param = [&](const std::string& name) {
      for (size_t i = 0; i < o.dist_keys().size(); ++i) {
        if (o.dist_keys()[i] == name) return find(o.in_keys()[i], path);
      }
      return -1;
    };
    NestedKey lp_key("_");
    for (const NestedKey& key : module.out_keys()) {
      if (key != sample_keys[0]) lp_key = key;
    }
    add_head(std::move(h), o.distribution_kwargs(), param, sample_keys[0], lp_key);
    description.push_back(absl::StrCat(path, ": fused (", heads[0].name, ", default ", default_name, ")"));
  }

  // A CompositeDistribution: one head per part, reading the part's entries under the module's
  // params key, writing what the LibTorch module writes: each part's sample at its name (after
  // name_map) and, with return_log_prob, each part's log-prob (the module's log_prob_keys when
  // not aggregating, `<name>_log_prob` when aggregating) and, aggregated, their sum at the
  // module's log_prob_key.
  void composite_head(const nn::ProbabilisticTensorDictModuleImpl& module, const std::string& path) {
    const auto& o = module.options();
    const auto& co = o.composite_options();
    const NestedKey& params = o.in_keys()[0];
    // The mode the module was built under: log_prob_keys() throws when the thread's differs.
    const bool aggregate = nn::composite_lp_aggregate();
    const std::vector<NestedKey> sample_keys = module.dist_sample_keys();
    std::vector<NestedKey> lp_keys;
    if (o.return_log_prob() && !aggregate) lp_keys = module.log_prob_keys();
    std::vector<std::string> parts;
    size_t index = 0;
    for (const auto& [part, builder] : *o.composite_map()) {
      NestedKey name = part;
      for (const auto& [from, to] : co.name_map()) {
        if (from == part) name = to;
      }
      if (index >= sample_keys.size() || sample_keys[index] != name) {
        throw NotLowerable(absl::StrCat(path, ": out_keys other than the composite's sample keys"));
      }
      Head h;
      h.path = absl::StrCat(path, " (part ", part.to_string(), ")");
      h.name = builder.to_string();
      const NestedKey prefix = params + part;
      std::vector<std::string> read;
      auto param = [&](const std::string& leaf) {
        const int s = find_or_none(prefix + NestedKey(leaf));
        if (s >= 0) read.push_back(leaf);
        return s;
      };
      dist::DistributionKwargs kwargs;
      for (const auto& [key, value] : co.extra_kwargs()) {
        if (key == part) kwargs = value;
      }
      NestedKey lp_key("_");
      if (o.return_log_prob()) lp_key = aggregate ? dist::add_suffix(name, "_log_prob") : lp_keys[index];
      const std::string part_path = h.path;
      add_head(std::move(h), kwargs, param, name, lp_key);
      // LibTorch builds the part from every entry under its params key: one the kernel does not
      // read would change the distribution (or be an error there).
      for (const Slot& s : slots) {
        if (s.key.size() == prefix.size() + 1 && s.key.starts_with(prefix) &&
            std::find(read.begin(), read.end(), s.key.leaf()) == read.end()) {
          throw NotLowerable(absl::StrCat(part_path, ": the parameter ", s.key.to_string(), " is not one ",
                                          heads.back().name, " reads here"));
        }
      }
      parts.push_back(absl::StrCat(policy::key_string(name), " ", heads.back().name));
      ++index;
    }
    if (index != sample_keys.size()) {
      throw NotLowerable(absl::StrCat(path, ": out_keys other than the composite's parts"));
    }
    if (o.return_log_prob() && aggregate) log_prob_sum = add_slot(module.log_prob_key(), 1, {});
    composite = true;
    description.push_back(absl::StrCat(path, ": fused (composite: ", absl::StrJoin(parts, ", "), "; default ",
                                       std::string(nn::to_string(default_type)), aggregate ? "; log-probs summed" : "",
                                       ")"));
  }

  // ---- the module tree: the spec's node says the kind, the built module gives the weights -----

  void sequential(const tdpolicy::Module& spec, const nn::TensorDictModuleBase& m, const std::string& path) {
    if (dynamic_cast<const nn::ProbabilisticTensorDictSequentialImpl*>(&m) != nullptr) throw SpecMismatch(path);
    children(spec.sequential().modules(), m, path + ".sequential");
  }

  void probabilistic_sequential(const tdpolicy::Module& spec, const nn::TensorDictModuleBase& m,
                                const std::string& path) {
    if (built_as<nn::ProbabilisticTensorDictSequentialImpl>(m, path).prob_options().return_composite().value_or(false)) {
      throw NotLowerable(absl::StrCat(path, ": return_composite"));
    }
    children(spec.probabilistic_sequential().modules(), m, path + ".probabilistic_sequential");
  }

  void children(const google::protobuf::RepeatedPtrField<tdpolicy::Module>& specs, const nn::TensorDictModuleBase& m,
                const std::string& kind_path) {
    const auto& seq = built_as<nn::TensorDictSequentialImpl>(m, kind_path);
    if (seq.modules().size() != static_cast<size_t>(specs.size())) throw SpecMismatch(kind_path);
    for (int i = 0; i < specs.size(); ++i) {
      module(specs[i], *seq.modules()[i], absl::StrCat(kind_path, ".modules[", i, "]"));
    }
  }

  void network_module(const tdpolicy::Module& spec, const nn::TensorDictModuleBase& m, const std::string& path) {
    const auto& td = built_as<nn::TensorDictModuleImpl>(m, path);
    if (!heads.empty()) {
      throw NotLowerable(absl::StrCat(path,
                                      ": a module after the probabilistic one (an autoregressive policy, "
                                      "which feeds a sample to later modules, is not lowered)"));
    }
    network(spec.network().network(), td, path);
  }

  void probabilistic_module(const tdpolicy::Module&, const nn::TensorDictModuleBase& m, const std::string& path) {
    probabilistic(built_as<nn::ProbabilisticTensorDictModuleImpl>(m, path), path);
  }

  // The greedy action of plain Q-values: an argmax (TorchRL's categorical action space) or every
  // maximal action set (one_hot), and the chosen action's value.
  void q_value(const tdpolicy::Module&, const nn::TensorDictModuleBase& m, const std::string& path) {
    const auto& q = built_as<nn::QValueModuleImpl>(m, path);
    if (!heads.empty()) throw NotLowerable(absl::StrCat(path, ": a module after the probabilistic one"));
    if (q.distributional()) {
      throw NotLowerable(absl::StrCat(path, ": a distributional q_value (its values are [atoms, actions])"));
    }
    if (q.options().action_mask_key()) {
      throw NotLowerable(absl::StrCat(path, ": an action mask (the plan reads float32 inputs only)"));
    }
    Op op{Op::kQValue};
    op.in = find(q.options().action_value_key(), path);
    op.in_w = slots[op.in].width;
    if (slots[op.in].shape.size() != 1 || op.in_w > kMaxEvent) {
      throw NotLowerable(absl::StrCat(path, ": action values that are not a vector of at most ", kMaxEvent));
    }
    op.one_hot = q.options().action_space() == nn::ActionSpace::kOneHot;
    const std::vector<NestedKey>& keys = q.out_keys_source();
    op.out = op.one_hot ? add_slot(keys[0], op.in_w, {op.in_w}, /*integer=*/true)
                        : add_slot(keys[0], 1, {}, /*integer=*/true);
    // The action values pass through unmasked: the slot read is the one written back.
    op.out2 = add_slot(keys[2], 1, {1});
    ops.push_back(op);
    description.push_back(absl::StrCat(path, ": fused (QValue, ", nn::to_string(q.options().action_space()), ")"));
  }

  void egreedy(const tdpolicy::Module&, const nn::TensorDictModuleBase& m, const std::string& path) {
    built_as<nn::EGreedyModuleImpl>(m, path);
    egreedy_path = path;
    description.push_back(
        absl::StrCat(path, ": fused (EGreedy: the action as is; RANDOM and unscoped calls run on LibTorch)"));
  }

  // The lowering of the module kind `spec` names; a kind without one (ensemble) is not lowerable.
  void module(const tdpolicy::Module& spec, const nn::TensorDictModuleBase& m, const std::string& path) {
    using Lowering = void (Impl::*)(const tdpolicy::Module&, const nn::TensorDictModuleBase&, const std::string&);
    static const std::pair<tdpolicy::Module::KindCase, Lowering> kLowerings[] = {
        {tdpolicy::Module::kSequential, &Impl::sequential},
        {tdpolicy::Module::kProbabilisticSequential, &Impl::probabilistic_sequential},
        {tdpolicy::Module::kNetwork, &Impl::network_module},
        {tdpolicy::Module::kProbabilistic, &Impl::probabilistic_module},
        {tdpolicy::Module::kQValue, &Impl::q_value},
        {tdpolicy::Module::kEgreedy, &Impl::egreedy},
    };
    if (spec.kind_case() == tdpolicy::Module::KIND_NOT_SET) throw SpecMismatch(path);
    for (const auto& [kind, lowering] : kLowerings) {
      if (kind == spec.kind_case()) return (this->*lowering)(spec, m, path);
    }
    throw NotLowerable(absl::StrCat(path, ": a ", m.type_name(), " (no fused kernel for it)"));
  }

  void lower(const policy::Policy& policy) {
    const policy::Signature& signature = policy.signature;
    // Every input gets a slot first, so that a module the plan cannot run is what the error names.
    std::string input_problem;
    for (size_t i = 0; i < signature.inputs.size(); ++i) {
      const policy::TensorSignature& in = signature.inputs[i];
      if (in.shape.size() != 1 || in.dtype != at::kFloat) {
        input_problem = absl::StrCat("inputs[", i, "] (", in.name, "): the plan takes float32 vectors");
        continue;
      }
      inputs.push_back(add_slot(in.key, in.shape[0], in.shape));
    }
    module(policy.spec.module(), *policy.module, "module");
    // Without a type a LibTorch call explores (TorchRL's EGreedyModule does outside any scope):
    // such a call goes to LibTorch as a RANDOM one does.
    if (!egreedy_path.empty()) default_type = nn::InteractionType::kRandom;
    if (!input_problem.empty()) throw NotLowerable(input_problem);
    if (inputs.empty()) throw NotLowerable("inputs: the spec declares none");
    // What a call returns, as the LibTorch path returns it.
    for (const policy::TensorSignature& out : signature.outputs) {
      const int s = find_or_none(out.key);
      if (s < 0) throw NotLowerable(absl::StrCat("outputs: the plan does not compute \"", out.name, "\""));
      outputs.push_back(s);
    }
    if (outputs.size() > kMaxDestinations) throw NotLowerable("more than 16 output keys");
    action = !heads.empty() ? heads[0].sample : outputs.empty() ? inputs[0] : outputs[0];
    for (const Slot& s : slots) {
      slot_offset.push_back(scratch_per_tile);
      // Rounded to 16 floats: every slot's rows start 64-byte aligned relative to the scratch.
      scratch_per_tile += (kTile * s.width + 15) / 16 * 16;
    }
  }

  // ---- running ------------------------------------------------------------------------------

  void run_ops(float* scratch, int64_t rows) const {
    auto at = [&](int s) { return scratch + slot_offset[s]; };
    for (const Op& op : ops) {
      switch (op.kind) {
        case Op::kLinear:
          linear(at(op.in), rows, op.in_w, arena.data() + op.w, op.b >= 0 ? arena.data() + op.b : nullptr, op.out_w,
                 at(op.out));
          break;
        case Op::kLayerNorm:
          layer_norm(at(op.out), rows, op.out_w, arena.data() + op.w, arena.data() + op.b, op.eps);
          break;
        case Op::kActivation:
          activate(op.activation, at(op.out), rows * op.out_w);
          break;
        case Op::kMapping: {
          const float* x = at(op.in);
          float* y = at(op.out);
          for (int64_t i = 0; i < rows * op.out_w; ++i) y[i] = apply_mapping(op.mapping, x[i]);
          break;
        }
        case Op::kSplitNormal: {
          const float* x = at(op.in);
          float* loc = at(op.out);
          float* scale = at(op.out2);
          const int64_t d = op.out_w;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < d; ++j) {
              loc[r * d + j] = x[r * 2 * d + j];
              scale[r * d + j] = std::max(apply_mapping(op.mapping, x[r * 2 * d + d + j]), op.lb);
            }
          }
          break;
        }
        case Op::kAddScale: {
          const float* x = at(op.in);
          float* loc = at(op.out);
          float* scale = at(op.out2);
          const int64_t d = op.out_w;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < d; ++j) {
              loc[r * d + j] = x[r * d + j];
              scale[r * d + j] = arena[op.w + j];
            }
          }
          break;
        }
        case Op::kQValue: {
          const float* values = at(op.in);
          float* action = at(op.out);
          float* chosen = at(op.out2);
          const int64_t n = op.in_w;
          for (int64_t r = 0; r < rows; ++r) {
            const float* v = values + r * n;
            int64_t best = 0;
            for (int64_t k = 1; k < n; ++k) {
              if (v[k] > v[best]) best = k;
            }
            if (op.one_hot) {
              // Every maximal action, and the sum of their values, as (action * values).sum(-1).
              float sum = 0;
              for (int64_t k = 0; k < n; ++k) {
                const bool on = v[k] == v[best];
                action[r * n + k] = on ? 1.0f : 0.0f;
                sum += on ? v[k] : 0.0f;
              }
              chosen[r] = sum;
            } else {
              action[r] = static_cast<float>(best);
              chosen[r] = v[best];
            }
          }
          break;
        }
        case Op::kGru:
        case Op::kLstm: {
          const int64_t gates = (op.kind == Op::kGru ? 3 : 4) * op.out_w;
          const float* w = arena.data();
          linear(at(op.in), rows, op.in_w, w + op.w, op.b >= 0 ? w + op.b : nullptr, gates, at(op.gates_in));
          linear(at(op.state), rows, op.out_w, w + op.w2, op.b2 >= 0 ? w + op.b2 : nullptr, gates, at(op.gates_state));
          if (op.kind == Op::kGru) {
            gru_gates(at(op.gates_in), at(op.gates_state), at(op.state), rows, op.out_w, at(op.out));
          } else {
            lstm_gates(at(op.gates_in), at(op.gates_state), at(op.cell), rows, op.out_w, at(op.out), at(op.out2));
          }
          break;
        }
      }
    }
  }

  // The four random words of Philox block `block` for (call, row): every draw of the plan is
  // addressed by the counter {call low, call high, row, block}, so a row's draws do not depend on
  // the batch it came in or on the other heads.
  static Philox4x32::Counter draw(const Philox4x32& rng, const RandomStream& stream, uint64_t row, uint32_t block) {
    return rng({static_cast<uint32_t>(stream.call), static_cast<uint32_t>(stream.call >> 32), static_cast<uint32_t>(row),
                block});
  }

  // Standard normals for (call, row): element j from block block0 + j / 4.
  static void normals(const Philox4x32& rng, const RandomStream& stream, uint64_t row, uint32_t block0, int64_t n,
                      float* out) {
    for (int64_t j = 0; j < n; j += 4) {
      const auto r = draw(rng, stream, row, block0 + static_cast<uint32_t>(j / 4));
      for (int pair = 0; pair < 2; ++pair) {
        const float u1 = uniform01_open0(r[2 * pair]);
        const float u2 = uniform01(r[2 * pair + 1]);
        const float radius = std::sqrt(-2.0f * std::log(u1));
        const float angle = 6.283185307179586f * u2;
        if (j + 2 * pair < n) out[j + 2 * pair] = radius * std::cos(angle);
        if (j + 2 * pair + 1 < n) out[j + 2 * pair + 1] = radius * std::sin(angle);
      }
    }
  }

  void run_head(const Head& head, float* scratch, int64_t rows, uint64_t first_row, nn::InteractionType type,
                const RandomStream& stream, bool want_log_prob) const {
    auto at = [&](int s) { return scratch + slot_offset[s]; };
    const bool random = type == nn::InteractionType::kRandom;
    const Philox4x32 rng(stream.seed);
    const int64_t d = head.width;
    float* sample = at(head.sample);
    float* lp = at(head.log_prob);
    switch (head.kind) {
      case HeadKind::kBernoulli: {
        const float* p = at(head.p0);
        for (int64_t r = 0; r < rows; ++r) {
          Philox4x32::Counter bits{};
          for (int64_t j = 0; j < d; ++j) {
            const float given = p[r * d + j];
            // Bernoulli keeps both: probs as given (or sigmoid(logits)), logits as given (or
            // log(p) - log1p(-p) of p clamped inside (0, 1)).
            float logit = given, prob = given;
            if (head.from_probs) {
              const float eps = std::numeric_limits<float>::epsilon();
              const float c = std::min(std::max(given, eps), 1.0f - eps);
              logit = std::log(c) - std::log1p(-c);
            } else {
              prob = 1.0f / (1.0f + std::exp(-given));
            }
            float value;
            if (random) {
              if (j % 4 == 0) {
                bits = draw(rng, stream, first_row + r, head.block0 + static_cast<uint32_t>(j / 4));
              }
              value = uniform01(bits[j % 4]) < prob ? 1.0f : 0.0f;
            } else if (type == nn::InteractionType::kMean) {
              value = prob;
            } else {  // mode (and deterministic: the mode, its support being discrete)
              value = prob == 0.5f ? std::numeric_limits<float>::quiet_NaN() : (prob >= 0.5f ? 1.0f : 0.0f);
            }
            sample[r * d + j] = value;
            if (want_log_prob) {
              const double l = logit;
              const double sp = std::max(l, 0.0) + std::log1p(std::exp(-std::abs(l)));
              lp[r * d + j] = static_cast<float>(value * l - sp);
            }
          }
        }
        return;
      }
      case HeadKind::kOneHotCategorical:
      case HeadKind::kCategorical: {
        const float* p = at(head.p0);
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = p + r * d;
          // Normalized log-probabilities (the distribution's logits), as Categorical keeps them.
          float logits[kMaxEvent];
          const int64_t k_max = d;
          if (head.from_probs) {
            double total = 0;
            for (int64_t k = 0; k < k_max; ++k) total += row[k];
            const float eps = std::numeric_limits<float>::epsilon();
            for (int64_t k = 0; k < k_max; ++k) {
              logits[k] = std::log(std::min(std::max(static_cast<float>(row[k] / total), eps), 1.0f - eps));
            }
          } else {
            float m = row[0];
            for (int64_t k = 1; k < k_max; ++k) m = std::max(m, row[k]);
            double sum = 0;
            for (int64_t k = 0; k < k_max; ++k) sum += std::exp(static_cast<double>(row[k]) - m);
            const float lse = static_cast<float>(m + std::log(sum));
            for (int64_t k = 0; k < k_max; ++k) logits[k] = row[k] - lse;
          }
          int64_t choice = 0;
          if (random) {
            const auto bits = draw(rng, stream, first_row + r, head.block0);
            const double u = uniform01(bits[0]);
            double cdf = 0;
            choice = -1;
            for (int64_t k = 0; k < k_max; ++k) {
              const double pk = std::exp(static_cast<double>(logits[k]));
              cdf += pk;
              if (pk > 0) choice = k;  // the last class with mass, should rounding leave u >= cdf
              if (u < cdf && pk > 0) break;
            }
            if (choice < 0) choice = 0;
          } else {
            // argmax of the probabilities: the first maximal logit.
            for (int64_t k = 1; k < k_max; ++k) {
              if (row[k] > row[choice]) choice = k;
            }
          }
          if (head.kind == HeadKind::kOneHotCategorical) {
            for (int64_t k = 0; k < d; ++k) sample[r * d + k] = k == choice ? 1.0f : 0.0f;
          } else {
            sample[r] = static_cast<float>(choice);
          }
          if (want_log_prob) lp[r] = logits[choice];
        }
        return;
      }
      case HeadKind::kDelta: {
        const float* p = at(head.p0);
        for (int64_t i = 0; i < rows * d; ++i) sample[i] = p[i];
        if (want_log_prob) {
          // The sample is the parameter itself: always inside Delta's tolerance.
          for (int64_t r = 0; r < rows; ++r) lp[r] = std::numeric_limits<float>::infinity();
        }
        return;
      }
      case HeadKind::kNormal:
      case HeadKind::kIndependentNormal:
      case HeadKind::kTanhNormal: {
        const bool tanh_head = head.kind == HeadKind::kTanhNormal;
        const bool per_element = head.kind == HeadKind::kNormal;
        const float* locs = at(head.p0);
        const float* scales = at(head.p1);
        const bool bounded = head.low != -1.0 || head.high != 1.0;
        const float half = static_cast<float>((head.high - head.low) / 2);
        const float shift = static_cast<float>((head.high + head.low) / 2);
        const float lim = static_cast<float>(1.0 - 1e-6);
        const double log_half = std::log(std::abs((head.high - head.low) / 2));
        float eps[kMaxEvent];
        for (int64_t r = 0; r < rows; ++r) {
          if (random) normals(rng, stream, first_row + r, head.block0, d, eps);
          double total = 0;
          for (int64_t j = 0; j < d; ++j) {
            float loc = locs[r * d + j];
            const float scale = scales[r * d + j];
            if (head.tanh_loc) {
              loc = std::tanh(loc / head.upscale) * head.upscale;
              if (tanh_head && bounded) loc = loc + half + static_cast<float>(head.low);
            }
            const float x = random ? loc + eps[j] * scale : loc;
            float y = x;
            if (tanh_head) {
              y = std::tanh(x);
              if (head.safe_tanh) y = std::min(std::max(y, -lim), lim);
              if (bounded) y = shift == 0.0f ? y * half : y * half + shift;
            }
            sample[r * d + j] = y;
            if (!want_log_prob) continue;
            double pre = x;
            if (tanh_head && !random) {
              // Scored from the action, as LibTorch's log_prob(action) does.
              float z = bounded ? (shift == 0.0f ? y : y - shift) / half : y;
              if (head.safe_tanh) z = std::min(std::max(z, -lim), lim);
              pre = std::atanh(z);
            }
            const double diff = (pre - loc) / scale;
            double value = -0.5 * diff * diff - std::log(static_cast<double>(scale)) - kHalfLog2Pi;
            if (tanh_head) {
              const double t = -2.0 * pre;
              const double sp = t > 20.0 ? t : std::log1p(std::exp(t));
              value -= 2.0 * (kLog2 - pre - sp) + (bounded ? log_half : 0.0);
            }
            if (per_element) {
              lp[r * d + j] = static_cast<float>(value);
            } else {
              total += value;
            }
          }
          if (want_log_prob && !per_element) lp[r] = static_cast<float>(total);
        }
        return;
      }
      case HeadKind::kNone:
        return;
    }
  }
};

FusedPlan::FusedPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FusedPlan::~FusedPlan() = default;

absl::StatusOr<std::shared_ptr<const FusedPlan>> FusedPlan::lower(const policy::Policy& policy) {
  if (policy.module == nullptr) return absl::InvalidArgumentError("the policy has no module");
  auto impl = std::make_unique<Impl>();
  try {
    try {
      impl->lower(policy);
    } catch (const SpecMismatch&) {
      policy::Policy described = policy;
      absl::StatusOr<tdpolicy::PolicySpec> spec = policy::export_spec(*policy.module, policy.spec);
      if (!spec.ok()) {
        return absl::UnimplementedError(
            absl::StrCat("not lowerable to the fused CPU plan: ", spec.status().message()));
      }
      described.spec = *std::move(spec);
      described.spec.clear_parameters();  // the plan takes the weights from the module
      impl = std::make_unique<Impl>();
      impl->lower(described);
    }
  } catch (const std::exception& error) {
    return absl::UnimplementedError(absl::StrCat("not lowerable to the fused CPU plan: ", error.what()));
  }
  return std::shared_ptr<const FusedPlan>(new FusedPlan(std::move(impl)));
}

namespace {

// OK when the plan computes `h` under `type` as LibTorch does (a closed form); else why not.
absl::Status check_head(const Head& h, nn::InteractionType type) {
  bool ok = true;
  using T = nn::InteractionType;
  switch (h.kind) {
    case HeadKind::kNone:
    case HeadKind::kNormal:
      break;
    case HeadKind::kIndependentNormal:  // Independent has no icdf: LibTorch raises for MEDIAN
      ok = type != T::kMedian;
      break;
    case HeadKind::kCategorical:
    case HeadKind::kOneHotCategorical:  // its mean (the probabilities) is not a one-hot action
      ok = type != T::kMean && type != T::kMedian;
      break;
    case HeadKind::kBernoulli:
      ok = type != T::kMedian;
      break;
    case HeadKind::kTanhNormal:
      ok = type == T::kRandom || type == T::kDeterministic;
      break;
    case HeadKind::kDelta:
      ok = type != T::kMedian;
      break;
  }
  if (ok) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(h.path, ": ", h.name, " under interaction type ",
                                                    std::string(nn::to_string(type)),
                                                    " has no closed form here (LibTorch's path raises or estimates it)"));
}

}  // namespace

absl::Status FusedPlan::check(nn::InteractionType type) const {
  using T = nn::InteractionType;
  if (!impl_->egreedy_path.empty() && type == T::kRandom) {
    return absl::FailedPreconditionError(
        absl::StrCat(impl_->egreedy_path,
                     ": egreedy under interaction type random draws from LibTorch's generator (torch.rand, randint, "
                     "multinomial), which the plan's Philox stream does not reproduce"));
  }
  if (impl_->composite && type == T::kMedian) {
    return absl::FailedPreconditionError(absl::StrCat(
        impl_->head_path,
        ": a composite distribution under interaction type median has no closed form here (LibTorch's path raises)"));
  }
  for (const Head& h : impl_->heads) {
    if (absl::Status s = check_head(h, type); !s.ok()) return s;
  }
  return absl::OkStatus();
}

nn::InteractionType FusedPlan::default_interaction_type() const { return impl_->default_type; }
const std::vector<int>& FusedPlan::input_slots() const { return impl_->inputs; }
const std::vector<int>& FusedPlan::output_slots() const { return impl_->outputs; }
int FusedPlan::find_slot(const NestedKey& key) const { return impl_->find_or_none(key); }
int FusedPlan::slot_count() const { return static_cast<int>(impl_->slots.size()); }
const FusedPlan::Slot& FusedPlan::slot(int index) const { return impl_->slots[index]; }
const std::vector<std::string>& FusedPlan::description() const { return impl_->description; }

absl::Status FusedPlan::flat_status() const {
  const Impl& p = *impl_;
  if (p.inputs.size() != 1) {
    std::vector<std::string> keys;
    for (int s : p.inputs) keys.push_back(p.slots[s].key.to_string());
    return absl::FailedPreconditionError(absl::StrCat("the flat API takes one input; the policy reads ", keys.size(),
                                                      " (", absl::StrJoin(keys, ", "), "): use act()"));
  }
  if (p.composite) {
    return absl::FailedPreconditionError(absl::StrCat(
        p.head_path, ": a composite distribution writes one sample per part; the flat API takes one: use act()"));
  }
  return absl::OkStatus();
}
int64_t FusedPlan::observation_size() const { return flat_status().ok() ? impl_->slots[impl_->inputs[0]].width : 0; }
int FusedPlan::action_slot() const { return impl_->action; }
int FusedPlan::log_prob_slot() const { return impl_->heads.empty() ? -1 : impl_->heads[0].log_prob; }
int64_t FusedPlan::action_size() const { return flat_status().ok() ? impl_->slots[impl_->action].width : 0; }
int64_t FusedPlan::log_prob_size() const {
  return log_prob_slot() < 0 || !flat_status().ok() ? 0 : impl_->slots[log_prob_slot()].width;
}

void FusedPlan::run(const float* const* inputs, int64_t batch, nn::InteractionType type, const RandomStream& stream,
                    const Destination* destinations, int count) const {
  const Impl& p = *impl_;
  float* scratch = thread_scratch(p.scratch_per_tile);
  bool want_log_prob = false;
  for (int i = 0; i < count; ++i) {
    const int s = destinations[i].slot;
    want_log_prob |= s == p.log_prob_sum;
    for (const Head& h : p.heads) want_log_prob |= s == h.log_prob;
  }
  for (int64_t first = 0; first < batch; first += kTile) {
    const int64_t rows = std::min(kTile, batch - first);
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const int64_t w = p.slots[p.inputs[i]].width;
      std::copy(inputs[i] + first * w, inputs[i] + (first + rows) * w, scratch + p.slot_offset[p.inputs[i]]);
    }
    p.run_ops(scratch, rows);
    for (const Head& h : p.heads) {
      p.run_head(h, scratch, rows, static_cast<uint64_t>(first), type, stream, want_log_prob);
    }
    if (want_log_prob && p.log_prob_sum >= 0) {
      // As the composite sums its parts: each part over its event dims, then part by part.
      float* total = scratch + p.slot_offset[p.log_prob_sum];
      for (int64_t r = 0; r < rows; ++r) {
        float sum = 0;
        for (const Head& h : p.heads) {
          const int64_t w = p.slots[h.log_prob].width;
          const float* lp = scratch + p.slot_offset[h.log_prob] + r * w;
          float part = 0;
          for (int64_t j = 0; j < w; ++j) part += lp[j];
          sum += part;
        }
        total[r] = sum;
      }
    }
    for (int i = 0; i < count; ++i) {
      const int s = destinations[i].slot;
      const int64_t w = p.slots[s].width;
      const float* src = scratch + p.slot_offset[s];
      std::copy(src, src + rows * w, destinations[i].data + first * w);
    }
  }
}

absl::Status FusedPlan::run_flat(const float* observation, int64_t batch, nn::InteractionType type,
                                 const RandomStream& stream, const FlatOutputs& out) const {
  if (absl::Status s = flat_status(); !s.ok()) return s;
  if (batch < 0 || (batch > 0 && (observation == nullptr || out.action == nullptr))) {
    return absl::InvalidArgumentError("run_flat: a negative batch, or a null observation or action buffer");
  }
  if (out.log_prob != nullptr && log_prob_slot() < 0) {
    return absl::InvalidArgumentError("run_flat: a log_prob buffer was given, but the policy has no probabilistic module");
  }
  if (absl::Status s = check(type); !s.ok()) return s;
  Destination d[2] = {{action_slot(), out.action}, {log_prob_slot(), out.log_prob}};
  run(&observation, batch, type, stream, d, out.log_prob != nullptr ? 2 : 1);
  return absl::OkStatus();
}

}  // namespace tdp::fused
