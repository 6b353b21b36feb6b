#include "sdk/fused/plan.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <c10/core/InferenceMode.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "sdk/fused/philox.h"
#include "sdk/nn/layers.h"
#include "sdk/nn/multi_agent_mlp.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/q_value_module.h"
#include "sdk/nn/recurrent_module.h"
#include "sdk/nn/safe_module.h"
#include "sdk/nn/tanh_module.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/transforms.h"
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
// A call of more tiles than this runs them on LibTorch's intra-op threads, at least this many per
// thread (fewer rows cost more to hand out than to compute).
constexpr int64_t kTilesPerThread = 4;
constexpr int kMaxDestinations = 16;
// The largest event a head handles (classes, action dims): its per-row buffers live on the stack.
constexpr int64_t kMaxEvent = 256;
// InteractionType's values, kMode to kDeterministic: the plan answers check() for each up front.
constexpr int kInteractionTypes = static_cast<int>(nn::InteractionType::kDeterministic) + 1;

struct Mapping {
  enum Kind { kNone, kSoftplus, kExp, kRelu, kExpln, kAbs, kBiasedSoftplus } kind = kNone;
  float shift = 0, min_val = 0;
};

// An activation layer with torch's arguments (tdp::nn::Activation); `kernel` is set when
// kernels.h's activate() computes it (torch's default arguments).
struct LayerActivation {
  enum Kind { kKernel, kElu, kLeakyRelu, kGeluTanh, kSoftplus, kSilu } kind = kKernel;
  Activation kernel = Activation::kIdentity;
  float alpha = 1.0f, beta = 1.0f, threshold = 20.0f;
};

struct Op {
  enum Kind {
    kLinear, kLayerNorm, kActivation, kMapping, kSplitNormal, kAddScale, kGru, kLstm, kObservationNorm, kLayerActivation,
    // A recurrent module's state, layer by layer: columns [in_off, in_off + out_w) of each row of
    // `in` (in_w wide) copied to columns [out_off, ...) of `out` (width out_stride); rows whose
    // `in` (is_init) is nonzero zeroed in `out`; `out` zeroed.
    kCopyColumns, kResetRows, kZero,
    // TorchRL's TanhModule (kTanhBox) and a Bounded projection (kClampBox).
    kTanhBox, kClampBox,
    // TorchRL's QValueModule: the greedy action and its value.
    kQValue
  } kind;
  int in = -1, out = -1, out2 = -1;
  // Recurrent cells: in is the input, state (and cell) the previous state; out (and out2) the
  // next; gates_in / gates_state hold the two projections.
  int state = -1, cell = -1, gates_in = -1, gates_state = -1;
  int64_t in_w = 0, out_w = 0;
  int64_t in_off = 0, out_off = 0, out_stride = 0;  // kCopyColumns
  int64_t w = -1, b = -1;    // arena offsets
  int64_t w2 = -1, b2 = -1;  // the recurrent cells' hidden-state projection
  Activation activation = Activation::kIdentity;
  LayerActivation layer_activation;
  Mapping mapping;
  float lb = 0, eps = 1e-5f;
  // kSplitNormal: each row holds `agents` rows of parameters ([n_agents, 2 * out_w]); each one is
  // split on its own, as NormalParamExtractor splits the last dim.
  int64_t agents = 1;
  // ObservationNorm: w is loc, b is scale (both [out_w]); then clamped to [-clip, clip].
  bool standard_normal = false;
  float clip = std::numeric_limits<float>::infinity();
  // kTanhBox: tanh clamped into +-(1 - eps) first when clamp; low at w and high - low at w2.
  // kClampBox: out clamped in place into [low at w, high at w2].
  bool clamp = false;
  bool one_hot = false;  // kQValue: a one-hot action (else the index)
  // kQValue with an action mask: the mask's slot (0 / 1 floats, one per action) and the slot of
  // the masked values, which LibTorch writes back at the action-value key.
  int mask = -1, masked = -1;
  // kQValue with a support (DistributionalQValueModule): the values in are the logits
  // [atoms, out_w actions] (in_w = atoms * out_w, row-major), the support at arena offset w;
  // `masked` gets their log-softmax over the atoms (masked), which LibTorch writes back, and
  // `expected` each action's expected value. A mask of mask_w = out_w flags broadcasts over the
  // atoms (per-environment [1, actions]); of mask_w = in_w, one flag per value.
  int64_t atoms = 0, mask_w = 0;
  int expected = -1;
};

enum class HeadKind {
  kNone, kCategorical, kOneHotCategorical, kBernoulli, kNormal, kIndependentNormal, kTanhNormal, kDelta, kTanhDelta
};

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
  // masked_categorical / masked_one_hot_categorical (kind kCategorical / kOneHotCategorical):
  // the mask's slot, a bool input of one flag per class or one per row (LibTorch's masked_fill
  // broadcasts it over the classes); the logit a masked-out class gets, which is also the
  // log-prob of a value LibTorch scores as not finite; and whether log_prob normalizes the logits
  // once more (TorchRL's use_cross_entropy).
  int mask = -1;
  int64_t mask_width = 0;
  float neg_inf = -std::numeric_limits<float>::infinity();
  bool use_cross_entropy = true;
  // tanh_delta: arena offsets of four [width] float32 arrays, each as TanhDelta computes it from
  // its bounds (in double for numbers, in float32 for tensors): (high - low) / 2, which the Delta's
  // shift adds to param before low, then low, then the affine map's loc (high + low) / 2; its scale
  // is (high - low) / 2 again. `safe_tanh` is TanhDelta's `safe`.
  int64_t tanh_delta_bounds = -1;
  // tanh_normal with tensor bounds that are not the default ones: arena offsets of four [width]
  // float32 arrays, as TanhNormal computes them from its bounds cast to float32: (high - low) / 2,
  // low, (high + low) / 2, and log |(high - low) / 2| (the affine map's Jacobian).
  int64_t tanh_normal_bounds = -1;
  // Per-agent parameters ([n_agents, d] per row, held flat: width is n_agents * d): each agent's
  // d values are one event, so the event heads write one log-prob per agent, as LibTorch's
  // [batch, n_agents].
  int64_t agents = 1;
};

// log(sum(exp(x))) over n floats, the max factored out and the sum taken in double. NaN when
// every x is -inf, where LibTorch's x - logsumexp(x) is NaN too (-inf - -inf).
float log_sum_exp(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t k = 1; k < n; ++k) m = std::max(m, x[k]);
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<double>(x[k]) - m);
  return static_cast<float>(m + std::log(sum));
}

// A distributional QValueModule over `rows` rows of logits [atoms, n] (op.atoms, op.out_w), as
// LibTorch computes it: log_softmax over the atoms (max factored out, the sum in double), the
// masked-out values set to float32's lowest, each action's expected value
// sum_a exp(value[a, k]) * support[a] (a masked-out action's is 0, as in LibTorch), then the greedy
// action: the first maximal one (categorical) or every maximal one (one_hot).
void run_distributional_q_value(const Op& op, int64_t rows, const float* support, const float* logits,
                                const float* mask, float* values, float* expected, float* action) {
  const int64_t atoms = op.atoms, n = op.out_w, w = op.in_w;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * w;
    float* y = values + r * w;
    float* q = expected + r * n;
    for (int64_t k = 0; k < n; ++k) {
      float m = x[k];
      for (int64_t a = 1; a < atoms; ++a) m = std::max(m, x[a * n + k]);
      double sum = 0;
      for (int64_t a = 0; a < atoms; ++a) sum += std::exp(static_cast<double>(x[a * n + k] - m));
      const float log_sum = static_cast<float>(std::log(sum));
      for (int64_t a = 0; a < atoms; ++a) y[a * n + k] = (x[a * n + k] - m) - log_sum;
    }
    if (mask != nullptr) {
      const float* allowed = mask + r * op.mask_w;
      for (int64_t i = 0; i < w; ++i) {
        if (allowed[op.mask_w == n ? i % n : i] == 0.0f) y[i] = std::numeric_limits<float>::lowest();
      }
    }
    for (int64_t k = 0; k < n; ++k) q[k] = 0.0f;
    for (int64_t a = 0; a < atoms; ++a) {
      for (int64_t k = 0; k < n; ++k) q[k] += std::exp(y[a * n + k]) * support[a];
    }
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k) {
      if (q[k] > q[best]) best = k;
    }
    if (op.one_hot) {
      for (int64_t k = 0; k < n; ++k) action[r * n + k] = q[k] == q[best] ? 1.0f : 0.0f;
    } else {
      action[r] = static_cast<float>(best);
    }
  }
}

// TorchRL's MaskedCategorical.__init__ on one row of d classes: the logits, or the log of the
// probs zeroed where masked and renormalized, then neg_inf where the mask is false (0). These
// are the logits Categorical then normalizes.
void mask_row(const Head& h, const float* given, const float* mask, int64_t d, float* out) {
  auto allowed = [&](int64_t k) { return mask[h.mask_width == 1 ? 0 : k] != 0.0f; };
  if (h.from_probs) {
    double total = 0;
    for (int64_t k = 0; k < d; ++k) total += allowed(k) ? given[k] : 0.0f;
    const float sum = static_cast<float>(total);
    for (int64_t k = 0; k < d; ++k) out[k] = allowed(k) ? std::log(given[k] / sum) : h.neg_inf;
  } else {
    for (int64_t k = 0; k < d; ++k) out[k] = allowed(k) ? given[k] : h.neg_inf;
  }
}

// Each row's class by the inverse CDF of its d masses scaled to their sum, as multinomial
// normalizes its probabilities (they sum to 1 only up to rounding): the first class with mass
// whose CDF, summed in double, passes u * total, else the last class with mass (should rounding
// leave u * total at or past the CDF), else -1 (no class has mass: NaN logits). No branch on the
// draw: a loop that stopped at the drawn class would be mispredicted about as often as the draw
// is uncertain. kD > 0 fixes d at compile time (the common few classes: the loops unrolled, the
// row in registers); 0 reads it from `d_given`.
template <int kD, class Mass>
void draw_classes(const Mass* mass, int64_t rows, int64_t d_given, const float* uniform, int64_t* choice) {
  const int64_t d = kD > 0 ? kD : d_given;
  for (int64_t r = 0; r < rows; ++r) {
    const Mass* m = mass + r * d;
    double total = 0;
    for (int64_t k = 0; k < d; ++k) total += m[k];
    const double u = uniform[r] * total;
    double cdf = 0;
    int64_t c = -1;
    bool found = false;
    for (int64_t k = 0; k < d; ++k) {
      cdf += m[k];
      const bool has_mass = m[k] > 0;
      // A mask, not `cond ? k : c`, which GCC compiles to a branch on `found`.
      c ^= (c ^ k) & -static_cast<int64_t>(!found & has_mass);
      found = found | (has_mass & (u < cdf));
    }
    choice[r] = c;
  }
}

void draw_classes(const float* mass, int64_t rows, int64_t d, const float* uniform, int64_t* choice) {
  switch (d) {
    case 2: return draw_classes<2>(mass, rows, d, uniform, choice);
    case 3: return draw_classes<3>(mass, rows, d, uniform, choice);
    case 4: return draw_classes<4>(mass, rows, d, uniform, choice);
    default: return draw_classes<0>(mass, rows, d, uniform, choice);
  }
}

// MaskedCategorical::log_prob of class k from the row's normalized logits: with
// use_cross_entropy their log-softmax (torch's cross_entropy normalizes them once more), and
// neg_inf for a score that is not finite (a masked-out class, a row that allows none).
float masked_log_prob(const Head& h, const float* logits, int64_t d, int64_t k) {
  const float score = h.use_cross_entropy ? logits[k] - log_sum_exp(logits, d) : logits[k];
  return std::isfinite(score) ? score : h.neg_inf;
}

// y = m(x) over n floats (y may be x). The softplus mappings, a Normal's usual scale, run on the
// vector units (kernels.h's activate); the others value by value.
void map_values(const Mapping& m, const float* x, float* y, int64_t n) {
  switch (m.kind) {
    case Mapping::kNone:
      std::copy(x, x + n, y);
      return;
    case Mapping::kSoftplus:
    case Mapping::kBiasedSoftplus:  // softplus(x + shift) + min_val; kSoftplus's are 0
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] + m.shift;
      activate(Activation::kSoftplus, y, n);
      for (int64_t i = 0; i < n; ++i) y[i] += m.min_val;
      return;
    case Mapping::kExp:
      for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
      return;
    case Mapping::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];  // NaN stays NaN
      return;
    case Mapping::kExpln:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] <= 0.0f ? std::exp(x[i]) : std::log1p(x[i]) + 1.0f;
      return;
    case Mapping::kAbs:
      for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]);
      return;
  }
}

// In place over n floats, torch.nn's formulas with the layer's arguments.
void activate_layer(const LayerActivation& a, float* x, int64_t n) {
  switch (a.kind) {
    case LayerActivation::kKernel:
      return activate(a.kernel, x, n);
    case LayerActivation::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : a.alpha * std::expm1(x[i]);
      return;
    case LayerActivation::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : a.alpha * x[i];
      return;
    case LayerActivation::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + std::tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
      }
      return;
    case LayerActivation::kSoftplus:
      for (int64_t i = 0; i < n; ++i) {
        const float bx = x[i] * a.beta;
        x[i] = bx > a.threshold ? x[i] : std::log1p(std::exp(bx)) / a.beta;
      }
      return;
    case LayerActivation::kSilu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
      return;
  }
}

// LayerNorm in place over [rows, width], giving LibTorch's answer for every input, finite or not.
// LibTorch accumulates a row's moments in float32 (Welford, in the order of its vector lanes),
// so a row whose values approach sqrt(FLT_MAX / width) overflows them, and its output is then
// zeros or NaN depending on that order; the fused kernel's moments are double and stay finite.
// A row beyond `bound` (below it no float32 Welford term can reach FLT_MAX: |delta| <= 2 |x|,
// width terms) therefore goes to LibTorch's own kernel, which allocates but only for such rows;
// the others run the fused kernel, equal to LibTorch's to rounding. A NaN row stays fused (NaN
// propagates there as in LibTorch); an infinite one exceeds the bound.
void layer_norm_as_libtorch(float* x, int64_t rows, int64_t width, const float* gamma, const float* beta,
                            float eps) {
  const float bound = std::sqrt(std::numeric_limits<float>::max() / (8.0f * static_cast<float>(width)));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * width;
    float largest = 0.0f;
    for (int64_t i = 0; i < width; ++i) largest = std::max(largest, std::fabs(row[i]));
    if (!(largest > bound)) {
      layer_norm(row, 1, width, gamma, beta, eps);
      continue;
    }
    const auto weight = at::from_blob(const_cast<float*>(gamma), {width}, at::kFloat);
    const auto bias = at::from_blob(const_cast<float*>(beta), {width}, at::kFloat);
    at::Tensor values = at::from_blob(row, {1, width}, at::kFloat);
    values.copy_(at::layer_norm(values, {width}, weight, bias, eps));
  }
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

// The spec's name of a network kind ("conv2d").
std::string network_kind_name(tdpolicy::Network::KindCase kind) {
  const auto* field = tdpolicy::Network::descriptor()->FindFieldByNumber(kind);
  return field == nullptr ? std::to_string(kind) : field->name();
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
  int64_t head_scratch = 0;  // in the tile scratch: the heads' work space (three [kTile, width] arrays)
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
  // What flat_status() and check() answer, worked out once the plan is built: a plan never
  // changes, and they are asked on every call.
  absl::Status flat;
  std::array<absl::Status, kInteractionTypes> checks;
  // The spec of the network network() is lowering, for the lowerings that walk its layers.
  const tdpolicy::Network* network_spec = nullptr;

  // ---- lowering ---------------------------------------------------------------------------

  // The slot last written at `key` (an input's when no module writes it), else -1.
  int find_or_none(const NestedKey& key) const {
    for (int i = static_cast<int>(slots.size()) - 1; i >= 0; --i) {
      if (slots[i].key == key) return i;
    }
    return -1;
  }
  int find(const NestedKey& key, const std::string& path) const {
    const int s = find_agents(key, path);
    if (slots[s].shape.size() > 1) {
      throw NotLowerable(absl::StrCat(path, ": reads ", key.to_string(), " of per-environment shape [",
                                      absl::StrJoin(slots[s].shape, ", "),
                                      "]; the plan's kernels read vectors, and such values only as a multi_agent_mlp's "
                                      "input, a normal_param_extractor's or a sequence's activation or mapping layer's "
                                      "input, a normal, independent_normal, tanh_normal, delta or tanh_delta head's "
                                      "parameters, or a recurrent module's state"));
    }
    return s;
  }
  // find() for a value that may be [n_agents, features] per row (held flat, n_agents * features).
  int find_agents(const NestedKey& key, const std::string& path) const {
    const int s = find_or_none(key);
    if (s < 0) throw NotLowerable(absl::StrCat(path, ": reads ", key.to_string(), ", which the plan does not compute"));
    if (slots[s].float64) {
      throw NotLowerable(absl::StrCat(path, ": reads the float64 input ", key.to_string(),
                                      "; the plan computes in float32 and reads a float64 input only through a "
                                      "to_dtype to float32 (DoubleToFloat)"));
    }
    if (slots[s].boolean) {
      throw NotLowerable(absl::StrCat(path, ": reads the bool input ", key.to_string(),
                                      "; the plan reads a bool input only as a masked categorical's mask, a "
                                      "recurrent module's is_init or through a to_dtype to float32"));
    }
    return s;
  }
  int add_slot(NestedKey key, int64_t width, std::vector<int64_t> shape, bool integer = false) {
    slots.push_back(Slot{std::move(key), width, std::move(shape), integer});
    return static_cast<int>(slots.size()) - 1;
  }
  int add_temp(int64_t width) { return add_slot(NestedKey("_"), width, {width}); }
  // A temporary of slot x's per-environment shape (an elementwise op's output keeps it).
  int add_temp_like(int x) { return add_slot(NestedKey("_"), slots[x].width, slots[x].shape); }
  int64_t put(const at::Tensor& t) {
    at::Tensor c = t.detach().to(at::kFloat).contiguous();
    const int64_t at_offset = static_cast<int64_t>(arena.size());
    arena.insert(arena.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    return at_offset;
  }
  int add_linear(int in, const torch::nn::LinearImpl& linear, int out_slot) {
    return add_dense(in, linear.weight, linear.options.bias() ? linear.bias : at::Tensor(), out_slot);
  }
  // x @ weight.T + bias (bias may be undefined) over slot `in`, as torch.nn.Linear.
  int add_dense(int in, const at::Tensor& weight, const at::Tensor& bias, int out_slot) {
    Op op{Op::kLinear};
    op.in = in;
    op.in_w = weight.size(1);
    op.out_w = weight.size(0);
    if (slots[in].width != op.in_w) {
      throw NotLowerable(absl::StrCat("a Linear with in_features ", op.in_w, " reads a value of width ", slots[in].width));
    }
    op.out = out_slot < 0 ? add_temp(op.out_w) : out_slot;
    op.w = put(weight.t());
    if (bias.defined()) op.b = put(bias);
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
    output(add_mlp(find(module.in_keys()[0], path), mlp, path), module.out_keys_source()[0]);
    description.push_back(absl::StrCat(path, ": fused (Mlp ", o.in_features(), "->", o.out_features(), ", ",
                                       o.activation(), o.layer_norm() ? ", layer_norm" : "", ")"));
  }

  // An Mlp's ops reading slot x; returns the slot of its output (a new one).
  int add_mlp(int x, const nn::MlpImpl& mlp, const std::string& path) {
    const Activation activation = parse_activation(mlp.options().activation());
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
    return x;
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
    const auto [loc, scale] = add_split_normal(find_agents(module.in_keys()[0], path), npe, path);
    output(loc, module.out_keys_source()[0]);
    output(scale, module.out_keys_source()[1]);
    const char* per_agent = slots[loc].shape.size() > 1 ? ", per agent" : "";
    description.push_back(absl::StrCat(path, ": fused (NormalParamExtractor", per_agent, ")"));
  }

  // NormalParamExtractor over slot x: its last dim split into loc and the mapped scale (a
  // [n_agents, 2 d] value agent by agent: loc and scale [n_agents, d]). Returns (loc, scale).
  std::pair<int, int> add_split_normal(int x, const nn::NormalParamExtractorImpl& npe, const std::string& path) {
    Op op{Op::kSplitNormal};
    if (!parse_mapping(npe.options().scale_mapping(), op.mapping)) {
      throw NotLowerable(absl::StrCat(path, ": the scale mapping '", npe.options().scale_mapping(), "' is a custom one"));
    }
    std::vector<int64_t> shape = slots[x].shape;
    if (shape.empty() || shape.back() % 2 != 0) {
      throw NotLowerable(absl::StrCat(path, ": splits a value of per-environment shape [", absl::StrJoin(shape, ", "),
                                      "], whose last dim is not even"));
    }
    op.in = x;
    shape.back() /= 2;
    op.out_w = shape.back();
    op.agents = slots[x].width / (2 * op.out_w);
    op.lb = static_cast<float>(npe.options().scale_lb());
    op.out = add_slot(NestedKey("_"), slots[x].width / 2, shape);
    op.out2 = add_slot(NestedKey("_"), slots[x].width / 2, shape);
    ops.push_back(op);
    return {op.out, op.out2};
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
    Op op = recurrent_cell(Op::kGru, gru.named_parameters(), "cell.", "", o.input_size(), o.hidden_size(), 3,
                           find(module.in_keys()[0], path), find(module.in_keys()[1], path), path);
    output(op.out, module.out_keys_source()[0]);
    ops.push_back(op);
    description.push_back(absl::StrCat(path, ": fused (GruCell ", o.input_size(), "->", o.hidden_size(), ")"));
  }

  void lower_lstm_cell(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& lstm = network_as<nn::LstmCellImpl>(module, path);
    need(module, 3, 2, "LstmCell", path);
    const auto& o = lstm.options();
    Op op = recurrent_cell(Op::kLstm, lstm.named_parameters(), "cell.", "", o.input_size(), o.hidden_size(), 4,
                           find(module.in_keys()[0], path), find(module.in_keys()[1], path), path);
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

  // Columns [from, from + width) of every row of `in` into columns [to, ...) of `out`.
  void copy_columns(int in, int64_t from, int64_t width, int out, int64_t to) {
    Op op{Op::kCopyColumns};
    op.in = in;
    op.out = out;
    op.in_w = slots[in].width;
    op.in_off = from;
    op.out_off = to;
    op.out_w = width;
    op.out_stride = slots[out].width;
    ops.push_back(op);
  }

  // An lstm / gru module (TorchRL's LSTMModule / GRUModule, one step): each layer's state is
  // taken out of the [num_layers * hidden_size] state slot, reset where is_init is set, stepped
  // by the layer's cell, and put back into a new next-state slot; the last layer's state is the
  // output. A state that no input or earlier module provides is zeros; a missing is_init resets
  // nothing.
  void recurrent_module(const tdpolicy::Module& spec, const nn::TensorDictModuleBase& m, const std::string& path) {
    const auto& rnn = built_as<nn::RecurrentModuleImpl>(m, path);
    if ((spec.has_lstm() ? rnn.states() != 2 : rnn.states() != 1)) throw SpecMismatch(path);
    if (!heads.empty()) {
      throw NotLowerable(absl::StrCat(path, ": a module after the probabilistic one (not lowered)"));
    }
    const nn::RecurrentModuleOptions& o = rnn.options();
    const int64_t hidden = o.hidden_size(), layers = o.num_layers();
    const bool lstm = rnn.states() == 2;
    const std::vector<NestedKey>& in_keys = o.in_keys();
    const std::vector<NestedKey>& out_keys = o.out_keys();
    int x = find(in_keys[0], path);
    if (slots[x].width != o.input_size()) {
      throw NotLowerable(absl::StrCat(path, ": input_size ", o.input_size(), " reads a value of width ", slots[x].width));
    }
    std::vector<int> state(rnn.states()), next(rnn.states());
    for (int s = 0; s < rnn.states(); ++s) {
      state[s] = find_or_none(in_keys[1 + s]);
      if (state[s] >= 0 && slots[state[s]].width != layers * hidden) {
        throw NotLowerable(absl::StrCat(path, ": a state of width ", slots[state[s]].width, ", expected num_layers x ",
                                        "hidden_size = ", layers * hidden));
      }
    }
    const int is_init = find_or_none(in_keys.back());
    if (is_init >= 0 && slots[is_init].width != 1) {
      throw NotLowerable(absl::StrCat(path, ": an is_init of width ", slots[is_init].width));
    }
    const auto params = rnn.network().named_parameters(/*recurse=*/true);
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<int> layer(rnn.states());
      for (int s = 0; s < rnn.states(); ++s) {
        layer[s] = add_temp(hidden);
        if (state[s] < 0) {
          Op zero{Op::kZero};
          zero.out = layer[s];
          zero.out_w = hidden;
          ops.push_back(zero);
          continue;
        }
        copy_columns(state[s], l * hidden, hidden, layer[s], 0);
        if (is_init >= 0) {
          Op reset{Op::kResetRows};
          reset.in = is_init;
          reset.out = layer[s];
          reset.out_w = hidden;
          ops.push_back(reset);
        }
      }
      const int64_t in_size = l == 0 ? o.input_size() : hidden;
      Op op = recurrent_cell(lstm ? Op::kLstm : Op::kGru, params, "", absl::StrCat("_l", l), in_size, hidden,
                             lstm ? 4 : 3, x, layer[0], path);
      if (lstm) {
        op.cell = layer[1];
        op.out2 = add_temp(hidden);
      }
      ops.push_back(op);
      if (l == 0) {
        for (int s = 0; s < rnn.states(); ++s) {
          next[s] = add_slot(NestedKey("_"), layers * hidden, {layers, hidden});
        }
      }
      copy_columns(op.out, 0, hidden, next[0], l * hidden);
      if (lstm) copy_columns(op.out2, 0, hidden, next[1], l * hidden);
      x = op.out;
    }
    output(x, out_keys[0]);
    for (int s = 0; s < rnn.states(); ++s) output(next[s], out_keys[1 + s]);
    description.push_back(absl::StrCat(path, ": fused (", m.type_name(), " ", o.input_size(), "->", hidden, ", ", layers,
                                       layers == 1 ? " layer)" : " layers)"));
  }

  void lower_observation_norm(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& norm = network_as<nn::ObservationNormImpl>(module, path);
    need(module, 1, 1, "ObservationNorm", path);
    Op op{Op::kObservationNorm};
    op.in = find(module.in_keys()[0], path);
    op.out_w = slots[op.in].width;
    if (norm.loc.dim() > 1) throw NotLowerable(absl::StrCat(path, ": loc and scale of more than one dim"));
    op.w = put(norm.loc.expand({op.out_w}));
    op.b = put(norm.scale.expand({op.out_w}));
    op.standard_normal = norm.options().standard_normal();
    if (norm.options().clip()) op.clip = static_cast<float>(*norm.options().clip());
    op.out = add_temp(op.out_w);
    ops.push_back(op);
    output(op.out, module.out_keys_source()[0]);
    description.push_back(absl::StrCat(path, ": fused (ObservationNorm", norm.options().clip() ? ", clip" : "", ")"));
  }

  // A cast to float32 is a copy in the plan (its values are float32 already, a float64 input's
  // cast by the caller: FusedPlan::Slot::float64).
  void lower_to_dtype(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& cast = network_as<nn::ToDtypeImpl>(module, path);
    need(module, 1, 1, "ToDtype", path);
    if (cast.dtype() != at::kFloat) {
      throw NotLowerable(absl::StrCat(path, ": casts to ", c10::toString(cast.dtype()),
                                      "; the plan computes in float32 only"));
    }
    Op op{Op::kMapping};
    op.in = find_or_none(module.in_keys()[0]);
    // The error naming the key, or a value that is not a vector (the copy below is a vector's).
    if (op.in < 0 || slots[op.in].shape.size() > 1) op.in = find(module.in_keys()[0], path);
    op.out_w = slots[op.in].width;
    op.out = add_temp(op.out_w);
    ops.push_back(op);
    output(op.out, module.out_keys_source()[0]);
    description.push_back(absl::StrCat(path, ": fused (ToDtype float32)"));
  }

  // A cat (TorchRL's CatTensors) of float vectors: each input's rows copied side by side.
  void lower_cat(const nn::TensorDictModuleImpl& module, const std::string& path) {
    network_as<nn::CatImpl>(module, path);
    need(module, module.in_keys().size(), 1, "Cat", path);
    std::vector<int> sources;
    int64_t width = 0;
    for (const NestedKey& key : module.in_keys()) {
      sources.push_back(find(key, path));
      if (slots[sources.back()].integer) {
        throw NotLowerable(absl::StrCat(path, ": joins the integer value ", key.to_string(),
                                        " (torch.cat's dtype promotion is not the plan's)"));
      }
      width += slots[sources.back()].width;
    }
    const int out = add_temp(width);
    int64_t column = 0;
    for (int source : sources) {
      copy_columns(source, 0, slots[source].width, out, column);
      column += slots[source].width;
    }
    output(out, module.out_keys_source()[0]);
    description.push_back(absl::StrCat(path, ": fused (Cat of ", sources.size(), ")"));
  }

  void lower_to_tensor_image(const nn::TensorDictModuleImpl&, const std::string& path) {
    throw NotLowerable(absl::StrCat(path,
                                    ": a ToTensorImage reads an image [H, W, C]; the plan's values are vectors "
                                    "(an image policy runs on LibTorch)"));
  }

  // TorchRL's MultiAgentMLP on a row of [n_agents, n_agent_inputs] values, which the plan holds
  // flat: each agent's MLP is the plan's Linear and activation ops on its own temporaries, reading
  // the agent's columns (or, centralized, the whole row), its output copied into the agent's
  // columns of the [n_agents, n_agent_outputs] result. With share_params every agent's Linear
  // reads the same weights; centralized and shared, one MLP's output is copied to every agent.
  void lower_multi_agent_mlp(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& mlp = network_as<nn::MultiAgentMlpImpl>(module, path);
    need(module, 1, 1, "MultiAgentMlp", path);
    output(add_multi_agent_mlp(find_agents(module.in_keys()[0], path), mlp, path), module.out_keys_source()[0]);
    const auto& o = mlp.options();
    description.push_back(absl::StrCat(path, ": fused (MultiAgentMlp, ", o.n_agents(), " agents, ",
                                       o.centralized() ? "centralized" : "decentralized",
                                       o.share_params() ? ", shared params" : ", one MLP per agent", ")"));
  }

  // A MultiAgentMlp's ops reading slot x ([n_agents, n_agent_inputs] per row); returns the slot of
  // its [n_agents, n_agent_outputs] output (a new one).
  int add_multi_agent_mlp(int x, const nn::MultiAgentMlpImpl& mlp, const std::string& path) {
    const auto& o = mlp.options();
    const int64_t agents = o.n_agents(), in_w = o.n_agent_inputs(), out_w = o.n_agent_outputs();
    if (slots[x].shape != std::vector<int64_t>{agents, in_w}) {
      const std::string value =
          slots[x].key == NestedKey("_") ? "the previous layer's output" : slots[x].key.to_string();
      throw NotLowerable(absl::StrCat(path, ": a MultiAgentMlp of n_agents ", agents, " and n_agent_inputs ", in_w,
                                      " reads ", value, " of per-environment shape [",
                                      absl::StrJoin(slots[x].shape, ", "), "]"));
    }
    const Activation activation = parse_activation(o.activation());
    // TorchRL's parameter names: params.<2 i>.weight / .bias, stacked over agents unless shared.
    const auto params = mlp.named_parameters(/*recurse=*/true);
    std::vector<std::pair<at::Tensor, at::Tensor>> layers;
    for (size_t i = 0; i <= o.hidden_sizes().size(); ++i) {
      const at::Tensor* weight = params.find(absl::StrCat("params.", 2 * i, ".weight"));
      const at::Tensor* bias = params.find(absl::StrCat("params.", 2 * i, ".bias"));
      if (weight == nullptr || bias == nullptr) throw SpecMismatch(path);
      layers.emplace_back(*weight, *bias);
    }
    const int out = add_slot(NestedKey("_"), agents * out_w, {agents, out_w});
    const int64_t nets = o.centralized() && o.share_params() ? 1 : agents;
    std::vector<size_t> first_agent_linears;  // shared weights: agent 0's ops, whose arena the others read
    for (int64_t a = 0; a < nets; ++a) {
      int y = x;
      if (!o.centralized()) {
        y = add_temp(in_w);
        copy_columns(x, a * in_w, in_w, y, 0);
      }
      for (size_t i = 0; i < layers.size(); ++i) {
        const auto& [weight, bias] = layers[i];
        if (o.share_params() && a > 0) {
          Op op = ops[first_agent_linears[i]];
          op.in = y;
          op.out = y = add_temp(op.out_w);
          ops.push_back(op);
        } else {
          y = o.share_params() ? add_dense(y, weight, bias, -1) : add_dense(y, weight[a], bias[a], -1);
          if (a == 0) first_agent_linears.push_back(ops.size() - 1);
        }
        if (i + 1 < layers.size() || o.activate_last_layer()) {
          Op op{Op::kActivation};
          op.in = op.out = y;
          op.out_w = slots[y].width;
          op.activation = activation;
          ops.push_back(op);
        }
      }
      for (int64_t to = nets == 1 ? 0 : a; to < (nets == 1 ? agents : a + 1); ++to) {
        copy_columns(y, 0, out_w, out, to * out_w);
      }
    }
    return out;
  }

  // ---- layers (activation, layer_norm, flatten, sequence): each from input slots to new ones ----

  // The layer kinds a sequence lowers; conv2d and dueling (and any other kind) run on LibTorch.
  static void check_layers(const tdpolicy::Network& spec, const std::string& path) {
    switch (spec.kind_case()) {
      case tdpolicy::Network::kLinear:
      case tdpolicy::Network::kMlp:
      case tdpolicy::Network::kActivation:
      case tdpolicy::Network::kLayerNorm:
      case tdpolicy::Network::kMapping:
      case tdpolicy::Network::kNormalParamExtractor:
      case tdpolicy::Network::kFlatten:
      case tdpolicy::Network::kMultiAgentMlp:
      case tdpolicy::Network::kUnflatten:
        return;
      case tdpolicy::Network::kSequence:
        for (int i = 0; i < spec.sequence().layers_size(); ++i) {
          check_layers(spec.sequence().layers(i), absl::StrCat(path, ".sequence.layers[", i, "]"));
        }
        return;
      default:
        throw NotLowerable(absl::StrCat(path, ": ", network_kind_name(spec.kind_case()), " runs on LibTorch"));
    }
  }

  // An activation layer's op: in place on a temporary (`in_place`), else into a new slot.
  int add_layer_activation(int x, const nn::ActivationImpl& activation, bool in_place) {
    const auto& o = activation.options();
    Op op{Op::kLayerActivation};
    LayerActivation& a = op.layer_activation;
    if (o.name() == "elu" && o.alpha() && *o.alpha() != 1.0) {
      a.kind = LayerActivation::kElu;
      a.alpha = static_cast<float>(*o.alpha());
    } else if (o.name() == "leaky_relu" && o.negative_slope() && *o.negative_slope() != 0.01) {
      a.kind = LayerActivation::kLeakyRelu;
      a.alpha = static_cast<float>(*o.negative_slope());
    } else if (o.name() == "gelu" && o.approximate() == "tanh") {
      a.kind = LayerActivation::kGeluTanh;
    } else if (o.name() == "softplus" && (o.beta().value_or(1.0) != 1.0 || o.threshold().value_or(20.0) != 20.0)) {
      a.kind = LayerActivation::kSoftplus;
      a.beta = static_cast<float>(o.beta().value_or(1.0));
      a.threshold = static_cast<float>(o.threshold().value_or(20.0));
    } else if (o.name() == "silu") {
      a.kind = LayerActivation::kSilu;
    } else {
      a.kernel = parse_activation(o.name());
    }
    op.in = x;
    op.out_w = slots[x].width;
    op.out = in_place ? x : add_temp_like(x);
    ops.push_back(op);
    return op.out;
  }

  int add_layer_norm(int x, const torch::nn::LayerNormImpl& norm, bool in_place, const std::string& path) {
    const auto& o = norm.options;
    if (o.normalized_shape() != std::vector<int64_t>{slots[x].width}) {
      throw NotLowerable(absl::StrCat(path, ": a LayerNorm over other than the last dim of a vector"));
    }
    Op op{Op::kLayerNorm};
    op.in = x;
    op.out_w = slots[x].width;
    op.out = in_place ? x : add_temp(op.out_w);
    op.eps = static_cast<float>(o.eps());
    op.w = put(o.elementwise_affine() ? norm.weight : at::ones({op.out_w}));
    op.b = put(o.elementwise_affine() ? norm.bias : at::zeros({op.out_w}));
    ops.push_back(op);
    return op.out;
  }

  // A layer's ops reading slots `ins`; returns its output slots. A slot from `fresh` on is a
  // temporary of the sequence, which an elementwise op may overwrite (an input or a keyed value
  // keeps its value).
  std::vector<int> lower_layer(const tdpolicy::Network& spec, const std::shared_ptr<torch::nn::Module>& layer,
                               const std::vector<int>& ins, int fresh, const std::string& path) {
    auto as = [&](auto* typed) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(typed)>>;
      auto* built = dynamic_cast<const T*>(layer.get());
      if (built == nullptr) throw SpecMismatch(path);
      return built;
    };
    if (spec.kind_case() != tdpolicy::Network::kSequence && ins.size() != 1) {
      throw NotLowerable(absl::StrCat(path, ": a layer reading ", ins.size(), " values"));
    }
    const int x = ins[0];
    const bool in_place = x >= fresh;
    // Values of two dims per row (a multi_agent_mlp's [n_agents, features], an unflatten's [a, b]),
    // held flat, go only to the layers that work row by row of them or element by element.
    static const tdpolicy::Network::KindCase kPerAgent[] = {
        tdpolicy::Network::kMultiAgentMlp, tdpolicy::Network::kNormalParamExtractor,
        tdpolicy::Network::kActivation, tdpolicy::Network::kMapping, tdpolicy::Network::kSequence};
    if (slots[x].shape.size() > 1 &&
        std::find(std::begin(kPerAgent), std::end(kPerAgent), spec.kind_case()) == std::end(kPerAgent)) {
      throw NotLowerable(absl::StrCat(path, ": a ", network_kind_name(spec.kind_case()),
                                      " layer reads a value of per-environment shape [",
                                      absl::StrJoin(slots[x].shape, ", "),
                                      "]; the plan runs such values through multi_agent_mlp, normal_param_extractor, "
                                      "activation and mapping layers only"));
    }
    switch (spec.kind_case()) {
      case tdpolicy::Network::kLinear:
        return {add_linear(x, *as(static_cast<torch::nn::LinearImpl*>(nullptr)), -1)};
      case tdpolicy::Network::kMlp:
        return {add_mlp(x, *as(static_cast<nn::MlpImpl*>(nullptr)), path)};
      case tdpolicy::Network::kActivation:
        return {add_layer_activation(x, *as(static_cast<nn::ActivationImpl*>(nullptr)), in_place)};
      case tdpolicy::Network::kLayerNorm:
        return {add_layer_norm(x, *as(static_cast<torch::nn::LayerNormImpl*>(nullptr)), in_place, path)};
      case tdpolicy::Network::kMapping: {
        const auto* mapping = as(static_cast<nn::MappingModuleImpl*>(nullptr));
        Op op{Op::kMapping};
        if (!parse_mapping(mapping->name(), op.mapping)) {
          throw NotLowerable(absl::StrCat(path, ": the mapping '", mapping->name(), "' is a custom one (C++ code)"));
        }
        op.in = x;
        op.out_w = slots[x].width;
        op.out = add_temp_like(x);
        ops.push_back(op);
        return {op.out};
      }
      case tdpolicy::Network::kNormalParamExtractor: {
        const auto [loc, scale] = add_split_normal(x, *as(static_cast<nn::NormalParamExtractorImpl*>(nullptr)), path);
        return {loc, scale};
      }
      case tdpolicy::Network::kMultiAgentMlp:
        return {add_multi_agent_mlp(x, *as(static_cast<nn::MultiAgentMlpImpl*>(nullptr)), path)};
      case tdpolicy::Network::kFlatten:
        // The plan's values are vectors: only the flatten of their one dim, which changes nothing.
        if (as(static_cast<nn::FlattenImpl*>(nullptr))->num_dims() != 1 || slots[x].shape.size() != 1) {
          throw NotLowerable(absl::StrCat(path, ": a flatten of more than a vector's one dim"));
        }
        return {x};
      case tdpolicy::Network::kUnflatten: {
        // A [a, b] value is its row-major a * b floats: only the slot's shape changes (on a copy
        // when the value is an input or a keyed one, which keeps its shape).
        const auto* unflatten = as(static_cast<torch::nn::UnflattenImpl*>(nullptr));
        int y = x;
        if (!in_place) {
          y = add_temp(slots[x].width);
          copy_columns(x, 0, slots[x].width, y, 0);
        }
        slots[y].shape = unflatten->options.sizes();
        return {y};
      }
      case tdpolicy::Network::kSequence: {
        const auto* sequence = as(static_cast<nn::SequenceImpl*>(nullptr));
        const auto& layers = spec.sequence().layers();
        if (sequence->layers().size() != static_cast<size_t>(layers.size())) throw SpecMismatch(path);
        std::vector<int> values = ins;
        for (int i = 0; i < layers.size(); ++i) {
          values = lower_layer(layers[i], sequence->layers()[i].module, values, fresh,
                               absl::StrCat(path, ".sequence.layers[", i, "]"));
        }
        return values;
      }
      default:
        throw NotLowerable(absl::StrCat(path, ": ", network_kind_name(spec.kind_case()), " runs on LibTorch"));
    }
  }

  // A layer kind's module: check_layers first (so that a conv2d is what the error names, not
  // the pixels the plan has no slot for), then the layer's ops from the module's in_keys.
  void lower_layers(const tdpolicy::Network& spec, const nn::TensorDictModuleImpl& module, const std::string& path,
                    const std::string& what) {
    const std::string kind_path = path + ".network.network";
    check_layers(spec, kind_path);
    const int fresh = static_cast<int>(slots.size());
    std::vector<int> ins;
    for (const NestedKey& key : module.in_keys()) ins.push_back(find_agents(key, path));
    std::vector<int> outs = lower_layer(spec, module.module(), ins, fresh, kind_path);
    if (outs.size() != module.out_keys_source().size()) throw SpecMismatch(path);
    for (size_t i = 0; i < outs.size(); ++i) {
      // A value the module did not compute (a flatten passes its input through) is copied, so
      // that naming the output leaves the input's slot as it is.
      if (outs[i] < fresh) {
        Op op{Op::kLayerActivation};
        op.in = outs[i];
        op.out_w = slots[outs[i]].width;
        op.out = add_temp(op.out_w);
        ops.push_back(op);
        outs[i] = op.out;
      }
      output(outs[i], module.out_keys_source()[i]);
    }
    description.push_back(absl::StrCat(path, ": fused (", what, ")"));
  }

  void lower_sequence(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& sequence = network_as<nn::SequenceImpl>(module, path);
    lower_layers(*network_spec, module, path, absl::StrCat("Sequence of ", sequence.layers().size(), " layers"));
  }
  void lower_activation(const nn::TensorDictModuleImpl& module, const std::string& path) {
    const auto& activation = network_as<nn::ActivationImpl>(module, path);
    lower_layers(*network_spec, module, path, "activation " + activation.options().name());
  }
  void lower_layer_norm(const nn::TensorDictModuleImpl& module, const std::string& path) {
    network_as<torch::nn::LayerNormImpl>(module, path);
    lower_layers(*network_spec, module, path, "LayerNorm");
  }
  void lower_flatten(const nn::TensorDictModuleImpl& module, const std::string& path) {
    network_as<nn::FlattenImpl>(module, path);
    lower_layers(*network_spec, module, path, "Flatten");
  }
  void lower_unflatten(const nn::TensorDictModuleImpl& module, const std::string& path) {
    network_as<torch::nn::UnflattenImpl>(module, path);
    lower_layers(*network_spec, module, path, "Unflatten");
  }
  // Convolutions run on LibTorch: Backend::kAuto falls back to it, and `tdp describe` says why.
  void lower_conv2d(const nn::TensorDictModuleImpl&, const std::string& path) {
    throw NotLowerable(absl::StrCat(path, ": conv2d runs on LibTorch"));
  }
  void lower_dueling(const nn::TensorDictModuleImpl&, const std::string& path) {
    throw NotLowerable(absl::StrCat(path, ": dueling runs on LibTorch"));
  }
  void lower_aoti_package(const nn::TensorDictModuleImpl&, const std::string& path) {
    throw NotLowerable(absl::StrCat(path, ": an AOTInductor package runs on LibTorch"));
  }

  // The lowering of the network kind `spec` names; a kind without one (torchscript, one_hot) is
  // not lowerable.
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
        {tdpolicy::Network::kSequence, &Impl::lower_sequence},
        {tdpolicy::Network::kActivation, &Impl::lower_activation},
        {tdpolicy::Network::kConv2D, &Impl::lower_conv2d},
        {tdpolicy::Network::kFlatten, &Impl::lower_flatten},
        {tdpolicy::Network::kLayerNorm, &Impl::lower_layer_norm},
        {tdpolicy::Network::kDueling, &Impl::lower_dueling},
        {tdpolicy::Network::kCat, &Impl::lower_cat},
        {tdpolicy::Network::kMultiAgentMlp, &Impl::lower_multi_agent_mlp},
        {tdpolicy::Network::kObservationNorm, &Impl::lower_observation_norm},
        {tdpolicy::Network::kToDtype, &Impl::lower_to_dtype},
        {tdpolicy::Network::kToTensorImage, &Impl::lower_to_tensor_image},
        {tdpolicy::Network::kAotiPackage, &Impl::lower_aoti_package},
        {tdpolicy::Network::kUnflatten, &Impl::lower_unflatten},
    };
    if (spec.kind_case() == tdpolicy::Network::KIND_NOT_SET) throw SpecMismatch(path);
    network_spec = &spec;
    for (const auto& [kind, lowering] : kLowerings) {
      if (kind == spec.kind_case()) return (this->*lowering)(module, path);
    }
    const auto& inner = module.module();
    const std::string what = inner ? inner->name() : "a function";
    throw NotLowerable(absl::StrCat(path, ": a TensorDictModule around ", what, " (no fused kernel for it)"));
  }

  // A GRU (3 gates) or LSTM (4 gates) cell reading slots `in` and `state`: the weights
  // <prefix>weight_ih<suffix>, ... of `params` transposed into the arena, the next hidden state
  // in a new slot (so the modules after it, and the outputs, read the new state while the input
  // slot keeps the old one).
  Op recurrent_cell(Op::Kind kind, const torch::OrderedDict<std::string, at::Tensor>& params, const std::string& prefix,
                    const std::string& suffix, int64_t input_size, int64_t hidden_size, int64_t gates, int in,
                    int state, const std::string& path) {
    Op op{kind};
    op.in = in;
    op.state = state;
    if (slots[op.in].width != input_size || slots[op.state].width != hidden_size) {
      throw NotLowerable(absl::StrCat(path, ": a cell of input_size ", input_size, " and hidden_size ", hidden_size,
                                      " reads values of widths ", slots[op.in].width, " and ", slots[op.state].width));
    }
    op.in_w = input_size;
    op.out_w = hidden_size;
    auto weight = [&](const char* name) -> int64_t {
      const at::Tensor* t = params.find(absl::StrCat(prefix, name, suffix));
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
  // `tensors`: the kwargs given as tensors (tanh_delta's per-element bounds).
  HeadLayout lower_head(Head& h, const dist::DistributionKwargs& kwargs, const dist::DistributionTensorKwargs& tensors,
                        const std::function<int(const std::string&)>& param) {
    const std::string& path = h.path;
    if (!tensors.empty() && h.name != "tanh_delta" && h.name != "tanh_normal") {
      throw NotLowerable(absl::StrCat(path, ": the tensor kwarg \"", tensors.begin()->first, "\" of ", h.name,
                                      " (per-element distribution bounds have no fused kernel here)"));
    }
    auto kw = [&](const char* name, double fallback) {
      auto it = kwargs.find(name);
      return it == kwargs.end() ? fallback : it->second.toDouble();
    };
    for (const auto& kwarg : kwargs) {
      const std::string& name = kwarg.first;  // a structured binding: not capturable before C++20
      static const char* known[] = {"low",  "high", "upscale", "tanh_loc",          "safe_tanh", "event_dims",
                                    "atol", "rtol", "neg_inf", "use_cross_entropy", "safe"};
      if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return name == k; }) == std::end(known)) {
        throw NotLowerable(absl::StrCat(path, ": the distribution kwarg '", name, "'"));
      }
    }
    HeadLayout layout;
    // TorchRL's MaskedCategorical / MaskedOneHotCategorical: (one-hot) categoricals whose logits
    // are masked first, so they lower as those, with a mask.
    const bool masked = h.name == "masked_categorical" || h.name == "masked_one_hot_categorical";
    if (h.name == "categorical" || h.name == "one_hot_categorical" || masked || h.name == "bernoulli") {
      h.kind = h.name == "categorical" || h.name == "masked_categorical" ? HeadKind::kCategorical
               : h.name == "bernoulli"                                   ? HeadKind::kBernoulli
                                                                         : HeadKind::kOneHotCategorical;
      h.p0 = param("logits");
      if (h.p0 < 0) {
        h.p0 = param("probs");
        h.from_probs = true;
      }
      if (h.p0 < 0) throw NotLowerable(absl::StrCat(path, ": ", h.name, " without logits or probs"));
      h.width = slots[h.p0].width;
      if (masked) lower_mask(h, kwargs, param);
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
      if (!tensors.empty()) lower_tanh_normal_bounds(h, kwargs, tensors);
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
    } else if (h.name == "tanh_delta") {
      lower_tanh_delta(h, kwargs, tensors, param);
      layout.sample_width = h.width;
      layout.sample_shape = {h.width};
    } else {
      throw NotLowerable(absl::StrCat(path, ": the distribution '", h.name, "' has no fused kernel"));
    }
    if (h.width > kMaxEvent) {
      throw NotLowerable(
          absl::StrCat(path, ": ", h.name, " over ", h.width, " values (the plan takes at most ", kMaxEvent, ")"));
    }
    lower_agents(h, layout);
    return layout;
  }

  // Per-agent parameters ([n_agents, d] per row, MAPPO's actor): the continuous heads run
  // element by element over the flat n_agents * d values, each agent's d values one event (one
  // log-prob per agent; normal: one per element), sample and log-prob shaped as LibTorch's.
  void lower_agents(Head& h, HeadLayout& layout) const {
    const Slot& p = slots[h.p0];
    if (p.shape.size() <= 1) return;
    const bool elementwise = h.kind == HeadKind::kNormal || h.kind == HeadKind::kIndependentNormal ||
                             h.kind == HeadKind::kTanhNormal || h.kind == HeadKind::kDelta ||
                             h.kind == HeadKind::kTanhDelta;
    if (!elementwise || p.shape.size() > 2) {
      throw NotLowerable(absl::StrCat(h.path, ": ", h.name, " reads ", p.key.to_string(), " of per-environment shape [",
                                      absl::StrJoin(p.shape, ", "), "]; the plan takes per-agent ([n_agents, d]) "
                                      "parameters for normal, independent_normal, tanh_normal, delta and tanh_delta "
                                      "heads only, vectors otherwise"));
    }
    if (h.p1 >= 0 && slots[h.p1].shape != p.shape) {
      throw NotLowerable(absl::StrCat(h.path, ": ", h.name, " reads ", p.key.to_string(), " of per-environment shape [",
                                      absl::StrJoin(p.shape, ", "), "] and ", slots[h.p1].key.to_string(), " of [",
                                      absl::StrJoin(slots[h.p1].shape, ", "), "]; the plan takes them of one shape"));
    }
    h.agents = p.shape[0];
    layout.sample_shape = p.shape;
    layout.lp_shape = h.kind == HeadKind::kNormal ? p.shape : std::vector<int64_t>{h.agents};
  }

  // Whether `t` broadcasts onto `shape` (a value's per-environment shape) without widening it.
  static bool broadcasts_onto(const at::Tensor& t, const std::vector<int64_t>& shape) {
    if (t.dim() > static_cast<int64_t>(shape.size())) return false;
    for (int64_t i = 1; i <= t.dim(); ++i) {
      const int64_t size = t.size(-i);
      if (size != 1 && size != shape[shape.size() - i]) return false;
    }
    return true;
  }

  // tanh_normal with tensor bounds (per dimension or per agent): TanhNormal casts them to float32
  // and maps the tanh by (high + low) / 2 + (high - low) / 2 * y; those arrays, one value per
  // element of loc, go to the arena (Head::tanh_normal_bounds). Bounds that are -1 and 1
  // everywhere leave the tanh as it is, as in TanhNormal.
  void lower_tanh_normal_bounds(Head& h, const dist::DistributionKwargs& kwargs,
                                const dist::DistributionTensorKwargs& tensors) {
    const std::vector<int64_t>& shape = slots[h.p0].shape;
    for (const auto& [name, t] : tensors) {
      if (name != "low" && name != "high") {
        throw NotLowerable(absl::StrCat(h.path, ": the tensor kwarg \"", name, "\" of tanh_normal"));
      }
      if (!broadcasts_onto(t, shape)) {
        throw NotLowerable(absl::StrCat(h.path, ": a tanh_normal bound '", name, "' of shape [",
                                        absl::StrJoin(t.sizes(), ", "),
                                        "] does not broadcast onto loc's per-environment shape [",
                                        absl::StrJoin(shape, ", "), "] (LibTorch would widen the batch)"));
      }
    }
    auto given = [&](const char* name, double fallback) {
      auto it = tensors.find(name);
      if (it != tensors.end()) return it->second.detach().cpu();
      auto number = kwargs.find(name);
      return at::scalar_tensor(number == kwargs.end() ? fallback : number->second.toDouble(), at::kDouble);
    };
    const at::Tensor low_given = given("low", -1.0), high_given = given("high", 1.0);
    if (!(high_given > low_given).all().item<bool>()) {
      throw NotLowerable(absl::StrCat(h.path, ": tanh_normal bounds with high <= low (LibTorch raises for them)"));
    }
    if (!(high_given != 1.0).any().item<bool>() && !(low_given != -1.0).any().item<bool>()) return;
    const at::Tensor low = low_given.to(at::kFloat), high = high_given.to(at::kFloat);
    const at::Tensor half = (high - low) / 2;
    h.tanh_normal_bounds = put(half.expand(shape).reshape({-1}));
    put(low.expand(shape).reshape({-1}));
    put(((high + low) / 2).expand(shape).reshape({-1}));
    put(half.abs().log().expand(shape).reshape({-1}));
  }

  // TorchRL's TanhDelta over param's last dim: its bounds (numbers or float32 tensors of one value
  // or one per element) as the four arrays of Head::tanh_delta_bounds, computed as TanhDelta does,
  // so that the plan's float32 ops are LibTorch's.
  void lower_tanh_delta(Head& h, const dist::DistributionKwargs& kwargs, const dist::DistributionTensorKwargs& tensors,
                        const std::function<int(const std::string&)>& param) {
    h.kind = HeadKind::kTanhDelta;
    h.p0 = param("param");
    if (h.p0 < 0) throw NotLowerable(absl::StrCat(h.path, ": tanh_delta without param"));
    h.width = slots[h.p0].width;
    if (kwargs.count("event_dims") && kwargs.at("event_dims").toLong() != 1) {
      throw NotLowerable(absl::StrCat(h.path, ": tanh_delta with event_dims other than 1"));
    }
    auto kw = [&](const char* name, double fallback) {
      auto it = kwargs.find(name);
      return it == kwargs.end() ? fallback : it->second.toDouble();
    };
    h.atol = kw("atol", 1e-6);
    h.rtol = kw("rtol", 1e-6);
    h.safe_tanh = !kwargs.count("safe") || kwargs.at("safe").toBool();
    using Bound = std::variant<double, at::Tensor>;
    auto bound = [&](const char* name, double fallback) -> Bound {
      auto it = tensors.find(name);
      if (it == tensors.end()) return kw(name, fallback);
      const at::Tensor& t = it->second;
      const std::vector<int64_t>& shape = slots[h.p0].shape;
      if (t.scalar_type() != at::kFloat || !broadcasts_onto(t, shape)) {
        throw NotLowerable(absl::StrCat(h.path, ": a tanh_delta bound '", name, "' of dtype ",
                                        c10::toString(t.scalar_type()), " and shape [", absl::StrJoin(t.sizes(), ", "),
                                        "]; the plan takes a number or a float32 tensor that broadcasts onto param's "
                                        "per-environment shape [", absl::StrJoin(shape, ", "), "]"));
      }
      return t.detach().cpu();
    };
    for (const auto& [name, value] : tensors) {
      if (name != "low" && name != "high") {
        throw NotLowerable(absl::StrCat(h.path, ": the tensor kwarg \"", name, "\" of tanh_delta"));
      }
    }
    const Bound low = bound("low", -1.0), high = bound("high", 1.0);
    // Numbers stay numbers (double arithmetic, then one rounding to float32), tensors are float32.
    auto as_row = [&](const auto& v) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>) {
        return at::full({h.width}, v, at::kFloat);
      } else {
        return at::Tensor(v).expand(slots[h.p0].shape).reshape({-1});
      }
    };
    auto half_range = std::visit([](const auto& l, const auto& u) -> Bound { return (u - l) / 2; }, low, high);
    auto centre = std::visit([](const auto& l, const auto& u) -> Bound { return (u + l) / 2; }, low, high);
    const at::Tensor range = std::visit(as_row, half_range);
    if (!(range > 0).all().item<bool>()) {
      throw NotLowerable(absl::StrCat(h.path, ": tanh_delta bounds with high <= low (LibTorch raises for them)"));
    }
    h.tanh_delta_bounds = put(range);
    put(std::visit(as_row, low));
    put(std::visit(as_row, centre));
  }

  // A masked categorical's mask and kwargs. LibTorch reads the mask as a bool tensor that
  // masked_fill broadcasts over the logits: here a bool input of one flag per class or one per
  // row, which the plan reads as 0 / 1 floats. Anything else (LibTorch raises for it) is named
  // with what was expected.
  void lower_mask(Head& h, const dist::DistributionKwargs& kwargs,
                  const std::function<int(const std::string&)>& param) const {
    h.mask = param("mask");
    if (h.mask < 0) throw NotLowerable(absl::StrCat(h.path, ": ", h.name, " without a mask"));
    const Slot& mask = slots[h.mask];
    if (!mask.boolean || mask.shape.size() != 1 || (mask.width != h.width && mask.width != 1)) {
      const bool input = std::find(inputs.begin(), inputs.end(), h.mask) != inputs.end();
      const char* what = mask.boolean   ? "a bool input"
                         : mask.float64 ? "a float64 input"
                         : input        ? "a float32 input"
                                        : "a float32 value";
      throw NotLowerable(absl::StrCat(h.path, ": the mask ", mask.key.to_string(), " is ", what,
                                      " of per-environment shape [", absl::StrJoin(mask.shape, ", "), "]; ", h.name,
                                      " over ", h.width, " classes takes a bool input of per-environment shape [",
                                      h.width, "] (or [1], one flag per row)"));
    }
    h.mask_width = mask.width;
    auto it = kwargs.find("neg_inf");
    if (it != kwargs.end()) h.neg_inf = static_cast<float>(it->second.toDouble());
    it = kwargs.find("use_cross_entropy");
    if (it != kwargs.end()) h.use_cross_entropy = it->second.toBool();
  }

  // Lowers `h` and gives it its sample slot (at `sample_key`), its log-prob slot (at `lp_key`;
  // "_": computed on request (the flat API), not an entry) and its Philox blocks.
  void add_head(Head h, const dist::DistributionKwargs& kwargs, const dist::DistributionTensorKwargs& tensors,
                const std::function<int(const std::string&)>& param, const NestedKey& sample_key,
                const NestedKey& lp_key) {
    const HeadLayout layout = lower_head(h, kwargs, tensors, param);
    h.block0 = next_block;
    const bool one_draw = h.kind == HeadKind::kCategorical || h.kind == HeadKind::kOneHotCategorical;
    next_block += static_cast<uint32_t>(one_draw ? 1 : (h.width + 3) / 4);
    h.sample = add_slot(sample_key, layout.sample_width, layout.sample_shape, layout.integer);
    int64_t lp_width = 1;
    for (int64_t size : layout.lp_shape) lp_width *= size;
    h.log_prob = add_slot(lp_key, lp_width, layout.lp_shape);
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
    if (o.is_composite() && !o.distribution_tensor_kwargs().empty()) {
      throw NotLowerable(absl::StrCat(path, ": the tensor kwarg \"", o.distribution_tensor_kwargs().begin()->first,
                                      "\" (per-element distribution bounds have no fused kernel)"));
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
        if (o.dist_keys()[i] != name) continue;
        // A mask is a bool input, which find() keeps from the float kernels; lower_mask checks it.
        const int mask = name == "mask" ? find_or_none(o.in_keys()[i]) : -1;
        // Per-agent parameters: lower_agents says which heads take them.
        return mask >= 0 ? mask : find_agents(o.in_keys()[i], path);
      }
      return -1;
    };
    NestedKey lp_key("_");
    for (const NestedKey& key : module.out_keys()) {
      if (key != sample_keys[0]) lp_key = key;
    }
    add_head(std::move(h), o.distribution_kwargs(), o.distribution_tensor_kwargs(), param, sample_keys[0], lp_key);
    const std::string mask =
        heads[0].mask < 0 ? "" : absl::StrCat(", mask ", policy::key_string(slots[heads[0].mask].key));
    description.push_back(absl::StrCat(path, ": fused (", heads[0].name, mask, ", default ", default_name, ")"));
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
      add_head(std::move(h), kwargs, {}, param, name, lp_key);
      if (heads.back().agents > 1) {
        throw NotLowerable(absl::StrCat(part_path, ": per-agent parameters in a composite distribution"));
      }
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

  // TorchRL's TanhModule: low + (high - low) * (tanh(x) + 1) / 2 per key, in float32 as Python
  // computes it with float32 bounds.
  void tanh_module(const tdpolicy::Module&, const nn::TensorDictModuleBase& m, const std::string& path) {
    const auto& module = built_as<nn::TanhModuleImpl>(m, path);
    if (!heads.empty()) {
      throw NotLowerable(absl::StrCat(path, ": a TanhModule after the probabilistic module is not lowered"));
    }
    const auto& o = module.options();
    std::vector<int> outs;
    for (size_t i = 0; i < o.in_keys().size(); ++i) {
      Op op{Op::kTanhBox};
      op.in = find(o.in_keys()[i], path);
      op.out_w = slots[op.in].width;
      const auto& [low, high] = o.bounds()[i];
      if (low.scalar_type() != at::kFloat || high.scalar_type() != at::kFloat) {
        throw NotLowerable(absl::StrCat(path, ": TanhModule bounds of dtype ", c10::toString(low.scalar_type()), "/",
                                        c10::toString(high.scalar_type()), " (the plan computes in float32)"));
      }
      if (low.dim() > 1 || high.dim() > 1 || (low.numel() != 1 && low.numel() != op.out_w) ||
          (high.numel() != 1 && high.numel() != op.out_w)) {
        throw NotLowerable(absl::StrCat(path, ": TanhModule bounds that are not one value or one per element of ",
                                        o.in_keys()[i].to_string()));
      }
      op.w = put(low.expand({op.out_w}));
      op.w2 = put((high - low).expand({op.out_w}));
      op.clamp = o.clamp();
      op.out = add_temp(op.out_w);
      ops.push_back(op);
      outs.push_back(op.out);
    }
    // Every input is read before any output is written (an out_key may be another in_key).
    for (size_t i = 0; i < outs.size(); ++i) output(outs[i], o.out_keys()[i]);
    description.push_back(absl::StrCat(path, ": fused (TanhModule", o.clamp() ? ", clamp" : "", ")"));
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
      distributional_q_value(q, path);
      return;
    }
    Op op{Op::kQValue};
    op.in = find(q.options().action_value_key(), path);
    op.in_w = slots[op.in].width;
    if (slots[op.in].shape.size() != 1 || op.in_w > kMaxEvent) {
      throw NotLowerable(absl::StrCat(path, ": action values that are not a vector of at most ", kMaxEvent));
    }
    if (const auto& mask_key = q.options().action_mask_key()) {
      // LibTorch's where(mask, values, lowest): here a bool input of one flag per action (what the
      // spec's validation lets through), which the plan reads as 0 / 1 floats.
      op.mask = find_or_none(*mask_key);
      if (op.mask < 0) find(*mask_key, path);  // the error naming the key
      const Slot& mask = slots[op.mask];
      if (!mask.boolean || mask.shape != std::vector<int64_t>{op.in_w}) {
        throw NotLowerable(absl::StrCat(path, ": a ", q.type_name(), "'s action mask ", mask_key->to_string(),
                                        " of per-environment shape [", absl::StrJoin(mask.shape, ", "), "]",
                                        mask.boolean ? "" : " that is not a bool input", "; over ", op.in_w,
                                        " actions it takes a bool input of per-environment shape [", op.in_w, "]"));
      }
    }
    op.one_hot = q.options().action_space() == nn::ActionSpace::kOneHot;
    const std::vector<NestedKey>& keys = q.out_keys_source();
    op.out = op.one_hot ? add_slot(keys[0], op.in_w, {op.in_w}, /*integer=*/true)
                        : add_slot(keys[0], 1, {}, /*integer=*/true);
    // Unmasked, the action values pass through: the slot read is the one written back; masked,
    // LibTorch writes the masked values there.
    if (op.mask >= 0) op.masked = add_slot(keys[1], op.in_w, {op.in_w});
    op.out2 = add_slot(keys[2], 1, {1});
    ops.push_back(op);
    const std::string mask =
        op.mask < 0 ? "" : absl::StrCat(", mask ", policy::key_string(*q.options().action_mask_key()));
    description.push_back(
        absl::StrCat(path, ": fused (QValue, ", nn::to_string(q.options().action_space()), mask, ")"));
  }

  // With a support: the logits [atoms, actions] (a vector of atoms * actions per row), their
  // log-softmax over the atoms (masked), each action's expected value under the support, and the
  // greedy action of those, as LibTorch's QValueModule; no chosen action value.
  void distributional_q_value(const nn::QValueModuleImpl& q, const std::string& path) {
    Op op{Op::kQValue};
    op.atoms = q.options().support().size(0);
    op.in = find_agents(q.options().action_value_key(), path);
    const Slot& values = slots[op.in];
    if (values.shape.size() != 2 || values.shape[0] != op.atoms || values.shape[1] > kMaxEvent) {
      throw NotLowerable(absl::StrCat(path, ": a ", q.type_name(), " over ", q.options().action_value_key().to_string(),
                                      " of per-environment shape [", absl::StrJoin(values.shape, ", "),
                                      "]; the plan takes [", op.atoms, " atoms, at most ", kMaxEvent, " actions]"));
    }
    op.in_w = values.width;
    op.out_w = values.shape[1];
    op.w = put(q.options().support());
    if (const auto& mask_key = q.options().action_mask_key()) {
      // LibTorch's where(mask, values, lowest) over [B, atoms, actions]: a mask of per-environment
      // shape [1, actions] broadcasts over the atoms, [atoms, actions] masks each value. One of
      // [actions] is [B, actions], which LibTorch broadcasts against the batch dim, not per row.
      op.mask = find_or_none(*mask_key);
      if (op.mask < 0) find(*mask_key, path);  // the error naming the key
      const Slot& mask = slots[op.mask];
      const bool broadcast = mask.shape == std::vector<int64_t>{1, op.out_w};
      if (!mask.boolean || !(broadcast || mask.shape == std::vector<int64_t>{op.atoms, op.out_w})) {
        throw NotLowerable(absl::StrCat(path, ": a ", q.type_name(), "'s action mask ", mask_key->to_string(),
                                        " of per-environment shape [", absl::StrJoin(mask.shape, ", "), "]",
                                        mask.boolean ? "" : " that is not a bool input", "; over [", op.atoms, ", ",
                                        op.out_w, "] values it takes a bool input of per-environment shape [1, ",
                                        op.out_w, "] (or [", op.atoms, ", ", op.out_w,
                                        "]), which LibTorch broadcasts over each row's atoms"));
      }
      op.mask_w = mask.width;
    }
    op.one_hot = q.options().action_space() == nn::ActionSpace::kOneHot;
    const std::vector<NestedKey>& keys = q.out_keys_source();
    op.expected = add_temp(op.out_w);
    op.out = op.one_hot ? add_slot(keys[0], op.out_w, {op.out_w}, /*integer=*/true)
                        : add_slot(keys[0], 1, {}, /*integer=*/true);
    op.masked = add_slot(keys[1], op.in_w, {op.atoms, op.out_w});
    ops.push_back(op);
    const std::string mask =
        op.mask < 0 ? "" : absl::StrCat(", mask ", policy::key_string(*q.options().action_mask_key()));
    description.push_back(absl::StrCat(path, ": fused (DistributionalQValue, ", op.atoms, " atoms, ",
                                       nn::to_string(q.options().action_space()), mask, ")"));
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
        {tdpolicy::Module::kTanh, &Impl::tanh_module},
        {tdpolicy::Module::kLstm, &Impl::recurrent_module},
        {tdpolicy::Module::kGru, &Impl::recurrent_module},
    };
    if (spec.kind_case() == tdpolicy::Module::KIND_NOT_SET) throw SpecMismatch(path);
    if (spec.projections_size() > 0) return projected(spec, m, path);
    for (const auto& [kind, lowering] : kLowerings) {
      if (kind == spec.kind_case()) return (this->*lowering)(spec, m, path);
    }
    throw NotLowerable(absl::StrCat(path, ": a ", m.type_name(), " (no fused kernel for it)"));
  }

  // safe=True onto Bounded specs (a SafeModule around a non-probabilistic module): the module's
  // ops, then a clamp of each projected slot into [low, high], which is TorchRL's projection
  // whether or not the value was already in the box (clamping a value inside it changes nothing).
  void projected(const tdpolicy::Module& spec, const nn::TensorDictModuleBase& m, const std::string& path) {
    auto* safe = dynamic_cast<const nn::SafeModuleImpl*>(&m);
    if (safe == nullptr) {
      throw NotLowerable(absl::StrCat(path, ".projections: a ", m.type_name(),
                                      "'s safe=True projections (only Bounded ones around a network are lowered)"));
    }
    tdpolicy::Module inner = spec;
    inner.clear_projections();
    module(inner, *safe->module(), path);
    for (const nn::SpecProjection& projection : safe->projections()) {
      const nn::TensorSpec& box = projection.spec;
      const int s = find(projection.key, path);
      if (box.kind() != nn::TensorSpec::Kind::kBounded || box.dtype() != at::kFloat ||
          box.low().scalar_type() != at::kFloat || box.high().scalar_type() != at::kFloat ||
          (box.low().numel() != 1 && box.low().numel() != slots[s].width) ||
          (box.high().numel() != 1 && box.high().numel() != slots[s].width) || box.low().dim() > 1 ||
          box.high().dim() > 1) {
        throw NotLowerable(absl::StrCat(path, ".projections: the projection of ", projection.key.to_string(), " onto ",
                                        box.to_string(), " (only float32 Bounded ones are lowered)"));
      }
      Op op{Op::kClampBox};
      op.in = s;
      op.out = s;
      op.out_w = slots[s].width;
      op.w = put(box.low().expand({op.out_w}));
      op.w2 = put(box.high().expand({op.out_w}));
      ops.push_back(op);
      description.push_back(
          absl::StrCat(path, ": fused (clamp of ", projection.key.to_string(), " into its Bounded spec)"));
    }
  }

  void lower(const policy::Policy& policy) {
    const policy::Signature& signature = policy.signature;
    // Every input gets a slot first, so that a module the plan cannot run is what the error names.
    std::string input_problem;
    for (size_t i = 0; i < signature.inputs.size(); ++i) {
      const policy::TensorSignature& in = signature.inputs[i];
      // Besides float32 vectors: a recurrent state [num_layers, hidden_size], an is_init and bool
      // vectors (action masks), both passed in as 0 / 1 floats, which only the recurrent and the
      // masked categorical lowerings read.
      const bool vector =
          in.shape.size() == 1 && (in.dtype == at::kFloat || in.dtype == at::kDouble || in.dtype == at::kBool);
      const bool state = in.state && in.dtype == at::kFloat;
      // [n_agents, features] per environment, held flat: only a multi_agent_mlp reads it (find());
      // a bool one only as a distributional q_value's mask.
      const bool agents = in.shape.size() == 2 && (in.dtype == at::kFloat || in.dtype == at::kBool);
      const bool is_init = in.optional && in.dtype == at::kBool && in.numel_per_env() == 1;
      if (!vector && !state && !is_init && !agents) {
        input_problem = absl::StrCat("inputs[", i, "] (", in.name, "): the plan takes float32 vectors");
        continue;
      }
      inputs.push_back(add_slot(in.key, in.numel_per_env(), in.shape));
      slots.back().float64 = in.dtype == at::kDouble;  // only a to_dtype may read it (find())
      slots.back().boolean = in.dtype == at::kBool;
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
      if (slots[s].float64) throw NotLowerable(absl::StrCat("outputs: \"", out.name, "\" is a float64 input"));
      if (slots[s].boolean) throw NotLowerable(absl::StrCat("outputs: \"", out.name, "\" is a bool input"));
      outputs.push_back(s);
    }
    if (outputs.size() > kMaxDestinations) throw NotLowerable("more than 16 output keys");
    action = !heads.empty() ? heads[0].sample : outputs.empty() ? inputs[0] : outputs[0];
    fuse_activations();
    for (const Slot& s : slots) {
      slot_offset.push_back(scratch_per_tile);
      // Rounded to 16 floats: every slot's rows start 64-byte aligned relative to the scratch.
      scratch_per_tile += (kTile * s.width + 15) / 16 * 16;
    }
    // The heads' work space, three [kTile, width] arrays: a Gaussian head's normals and
    // log-densities; a categorical head's masked logits, log-probabilities and masses.
    int64_t head_width = 0;
    for (const Head& h : heads) {
      if (h.kind == HeadKind::kNormal || h.kind == HeadKind::kIndependentNormal || h.kind == HeadKind::kTanhNormal ||
          h.kind == HeadKind::kCategorical || h.kind == HeadKind::kOneHotCategorical) {
        head_width = std::max(head_width, h.width);
      }
    }
    head_scratch = scratch_per_tile;
    scratch_per_tile += 3 * kTile * head_width;
  }

  // A Linear followed by an activation in place on its output becomes one op: the activation
  // runs in the kernel's epilogue, on the accumulators before they are stored (nothing reads
  // the pre-activation values: the activation overwrites them).
  void fuse_activations() {
    std::vector<Op> fused;
    for (const Op& op : ops) {
      if (op.kind == Op::kActivation && op.in == op.out && !fused.empty() && fused.back().kind == Op::kLinear &&
          fused.back().out == op.in && fused.back().activation == Activation::kIdentity) {
        fused.back().activation = op.activation;
        continue;
      }
      fused.push_back(op);
    }
    ops = std::move(fused);
  }

  // ---- running ------------------------------------------------------------------------------

  void run_ops(float* scratch, int64_t rows) const {
    auto at = [&](int s) { return scratch + slot_offset[s]; };
    for (const Op& op : ops) {
      switch (op.kind) {
        case Op::kLinear:
          linear(at(op.in), rows, op.in_w, arena.data() + op.w, op.b >= 0 ? arena.data() + op.b : nullptr, op.out_w,
                 at(op.out), op.activation);
          break;
        case Op::kLayerNorm:
          if (op.in != op.out) std::copy(at(op.in), at(op.in) + rows * op.out_w, at(op.out));
          layer_norm_as_libtorch(at(op.out), rows, op.out_w, arena.data() + op.w, arena.data() + op.b, op.eps);
          break;
        case Op::kLayerActivation:
          if (op.in != op.out) std::copy(at(op.in), at(op.in) + rows * op.out_w, at(op.out));
          activate_layer(op.layer_activation, at(op.out), rows * op.out_w);
          break;
        case Op::kActivation:
          activate(op.activation, at(op.out), rows * op.out_w);
          break;
        case Op::kMapping:
          map_values(op.mapping, at(op.in), at(op.out), rows * op.out_w);
          break;
        case Op::kSplitNormal: {
          const float* x = at(op.in);
          float* loc = at(op.out);
          float* scale = at(op.out2);
          const int64_t d = op.out_w;
          for (int64_t r = 0; r < rows * op.agents; ++r) {
            for (int64_t j = 0; j < d; ++j) {
              loc[r * d + j] = x[r * 2 * d + j];
              scale[r * d + j] = x[r * 2 * d + d + j];
            }
          }
          const int64_t n = rows * op.agents * d;
          map_values(op.mapping, scale, scale, n);
          for (int64_t i = 0; i < n; ++i) scale[i] = std::max(scale[i], op.lb);
          break;
        }
        case Op::kAddScale: {
          // loc is the input itself; each row's scale the same stored row.
          const int64_t d = op.out_w;
          std::copy(at(op.in), at(op.in) + rows * d, at(op.out));
          float* scale = at(op.out2);
          for (int64_t r = 0; r < rows; ++r) std::copy(arena.data() + op.w, arena.data() + op.w + d, scale + r * d);
          break;
        }
        case Op::kObservationNorm: {
          const float* x = at(op.in);
          float* y = at(op.out);
          const float* loc = arena.data() + op.w;
          const float* scale = arena.data() + op.b;
          const int64_t d = op.out_w;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < d; ++j) {
              // TorchRL's expressions: (x - loc) / scale, or x * scale + loc (two roundings).
              const float v = x[r * d + j];
              float out = op.standard_normal ? (v - loc[j]) / scale[j] : v * scale[j] + loc[j];
              y[r * d + j] = std::min(std::max(out, -op.clip), op.clip);
            }
          }
          break;
        }
        case Op::kClampBox: {
          float* y = at(op.out);
          const float* low = arena.data() + op.w;
          const float* high = arena.data() + op.w2;
          const int64_t d = op.out_w;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < d; ++j) y[r * d + j] = std::min(std::max(y[r * d + j], low[j]), high[j]);
          }
          break;
        }
        case Op::kTanhBox: {
          const float* x = at(op.in);
          float* y = at(op.out);
          const float* low = arena.data() + op.w;
          const float* range = arena.data() + op.w2;
          const int64_t d = op.out_w;
          const float lim = 1.0f - 1e-6f;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < d; ++j) {
              float t = std::tanh(x[r * d + j]);
              if (op.clamp) t = std::min(std::max(t, -lim), lim);
              y[r * d + j] = low[j] + range[j] * (t + 1.0f) / 2.0f;
            }
          }
          break;
        }
        case Op::kQValue: {
          if (op.atoms > 0) {
            run_distributional_q_value(op, rows, arena.data() + op.w, at(op.in),
                                       op.mask >= 0 ? at(op.mask) : nullptr, at(op.masked), at(op.expected),
                                       at(op.out));
            break;
          }
          const float* values = at(op.in);
          float* action = at(op.out);
          float* chosen = at(op.out2);
          const int64_t n = op.in_w;
          if (op.mask >= 0) {
            // Masked-out actions get float32's lowest value (torch.finfo.min), as LibTorch's where.
            const float* mask = at(op.mask);
            float* masked = at(op.masked);
            for (int64_t r = 0; r < rows; ++r) {
              for (int64_t k = 0; k < n; ++k) {
                masked[r * n + k] = mask[r * n + k] != 0.0f ? values[r * n + k] : std::numeric_limits<float>::lowest();
              }
            }
            values = masked;
          }
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
        case Op::kCopyColumns: {
          const float* x = at(op.in) + op.in_off;
          float* y = at(op.out) + op.out_off;
          for (int64_t r = 0; r < rows; ++r) {
            std::copy(x + r * op.in_w, x + r * op.in_w + op.out_w, y + r * op.out_stride);
          }
          break;
        }
        case Op::kResetRows: {
          const float* is_init = at(op.in);
          float* y = at(op.out);
          for (int64_t r = 0; r < rows; ++r) {
            if (is_init[r] != 0.0f) std::fill(y + r * op.out_w, y + (r + 1) * op.out_w, 0.0f);
          }
          break;
        }
        case Op::kZero:
          std::fill(at(op.out), at(op.out) + rows * op.out_w, 0.0f);
          break;
      }
    }
  }

  // The four random words of Philox block `block` for (call, row) (philox.h's philox_counter).
  static Philox4x32::Counter draw(const Philox4x32& rng, const RandomStream& stream, uint64_t row, uint32_t block) {
    return rng(philox_counter(stream.call, row, block));
  }

  std::invalid_argument nothing_to_draw(const Head& head, int64_t row) const {
    return std::invalid_argument(absl::StrCat(head.path, ": row ", row, " of the mask ",
                                              slots[head.mask].key.to_string(),
                                              " leaves no class with a probability above 0, so ", head.name,
                                              " has nothing to draw (a mask must allow at least one class per row)"));
  }

  // Throws nothing_to_draw for the first row of a masked head's mask (an input, 0 / 1 floats)
  // that allows no class: checked before any tile runs, so such a call writes no output. (With a
  // finite neg_inf such a row is a uniform draw over every class, as in LibTorch.)
  void check_masks(const float* const* given, int64_t batch) const {
    for (const Head& h : heads) {
      if (h.mask < 0 || std::isfinite(h.neg_inf)) continue;
      const float* mask = given[std::find(inputs.begin(), inputs.end(), h.mask) - inputs.begin()];
      for (int64_t r = 0; r < batch; ++r) {
        const float* row = mask + r * h.mask_width;
        if (std::all_of(row, row + h.mask_width, [](float m) { return m == 0; })) throw nothing_to_draw(h, r);
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
        const float* mask = head.mask >= 0 ? at(head.mask) : nullptr;
        float uniform[kTile];  // each row's draw, on the vector units (kernels.h)
        if (random) philox_uniforms(stream.seed, stream.call, first_row, rows, head.block0, uniform);
        // The rows' logits: as given, or masked (a masked head's probs, if given, become logits).
        const float* given = at(head.p0);
        float* tile_logits = scratch + head_scratch;
        float* tile_log_p = tile_logits + kTile * d;
        float* tile_mass = tile_log_p + kTile * d;
        if (mask != nullptr) {
          for (int64_t r = 0; r < rows; ++r) {
            mask_row(head, given + r * d, mask + r * head.mask_width, d, tile_logits + r * d);
          }
          given = tile_logits;
        }
        // From logits, the tile's log-softmax on the vector units (kernels.h): each exp(x - max)
        // is also the class's mass for the draw (0 for a masked -inf, NaN for NaN). A row whose
        // every class a finite neg_inf (-1e9) masks has mass 1 each: LibTorch draws from it
        // uniformly too.
        const bool from_probs = head.from_probs && mask == nullptr;
        int64_t drawn[kTile];  // each row's class under RANDOM
        if (!from_probs) {
          log_softmax(given, rows, d, tile_log_p, tile_mass);
          if (random) draw_classes(tile_mass, rows, d, uniform, drawn);
        }
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = given + r * d;
          // Normalized log-probabilities (the distribution's logits), as Categorical keeps them.
          const float* logits = tile_log_p + r * d;
          if (from_probs) {
            double sum = 0;
            for (int64_t k = 0; k < d; ++k) sum += row[k];
            const float eps = std::numeric_limits<float>::epsilon();
            float* normalized = tile_log_p + r * d;
            for (int64_t k = 0; k < d; ++k) {
              normalized[k] = std::log(std::min(std::max(static_cast<float>(row[k] / sum), eps), 1.0f - eps));
            }
            if (random) {
              double mass[kMaxEvent];  // each class's probability
              for (int64_t k = 0; k < d; ++k) mass[k] = std::exp(static_cast<double>(normalized[k]));
              draw_classes<0>(mass, 1, d, uniform + r, drawn + r);
            }
          }
          int64_t choice = 0;
          if (random) {
            choice = drawn[r];
            // Nothing to draw (run() refuses a mask row without a class before any tile; here the
            // logits are NaN); LibTorch's multinomial raises for it too.
            if (choice < 0 && mask != nullptr) throw nothing_to_draw(head, first_row + r);
            if (choice < 0) choice = 0;
          } else {
            // argmax of the probabilities: the first maximal logit.
            for (int64_t k = 1; k < d; ++k) {
              if (row[k] > row[choice]) choice = k;
            }
          }
          if (head.kind == HeadKind::kOneHotCategorical && !random) {
            // The mode as LibTorch's (logits == logits.max(-1)): every maximal class when tied,
            // none when the maximum is NaN (a masked row that allows no class).
            float top = logits[0];
            for (int64_t k = 1; k < d; ++k) {
              if (std::isnan(logits[k]) || logits[k] > top) top = logits[k];
            }
            for (int64_t k = 0; k < d; ++k) sample[r * d + k] = logits[k] == top ? 1.0f : 0.0f;
          } else if (head.kind == HeadKind::kOneHotCategorical) {
            for (int64_t k = 0; k < d; ++k) sample[r * d + k] = k == choice ? 1.0f : 0.0f;
          } else {
            sample[r] = static_cast<float>(choice);
          }
          if (want_log_prob) lp[r] = mask != nullptr ? masked_log_prob(head, logits, d, choice) : logits[choice];
        }
        return;
      }
      case HeadKind::kDelta: {
        const float* p = at(head.p0);
        for (int64_t i = 0; i < rows * d; ++i) sample[i] = p[i];
        if (want_log_prob) {
          // The sample is the parameter itself: always inside Delta's tolerance.
          for (int64_t r = 0; r < rows * head.agents; ++r) lp[r] = std::numeric_limits<float>::infinity();
        }
        return;
      }
      case HeadKind::kTanhDelta: {
        // TanhDelta's ops in its order, in float32: the Delta at (param + half_range) + low, its
        // value squashed as tanh, clamped when safe, then half_range * t + centre. Every interaction
        // type the plan runs (random draws the Delta) gives that value.
        const float* p = at(head.p0);
        const float* half_range = arena.data() + head.tanh_delta_bounds;
        const float* low = half_range + d;
        const float* centre = low + d;
        const float lim = 1.0f - 1e-6f;
        const float atol = static_cast<float>(head.atol), rtol = static_cast<float>(head.rtol);
        const int64_t event = d / head.agents;  // an agent's values: one log-prob each
        for (int64_t r = 0; r < rows; ++r) {
          bool equal = true, nan = false;
          for (int64_t j = 0; j < d; ++j) {
            const float loc = (p[r * d + j] + half_range[j]) + low[j];
            float t = std::tanh(loc);
            if (head.safe_tanh) t = std::min(std::max(t, -lim), lim);
            const float y = half_range[j] * t + centre[j];
            sample[r * d + j] = y;
            // log_prob(y) inverts the map and asks the Delta whether that is its point: +inf when
            // every element is within atol + rtol * |loc| (a saturated tanh does not invert back),
            // else -inf; the Jacobian's finite terms do not change an infinity. Without `safe` a
            // tanh rounded to +-1 inverts to an infinity, whose Jacobian term is infinite too (or
            // NaN): LibTorch's sum is NaN there, as it is for a NaN param.
            float x = (y - centre[j]) / half_range[j];
            if (head.safe_tanh) x = std::min(std::max(x, -lim), lim);
            const float pre = std::atanh(x);
            nan = nan || !std::isfinite(pre);
            equal = equal && std::fabs(pre - loc) < atol + rtol * std::fabs(loc);
            if (want_log_prob && (j + 1) % event == 0) {
              const float inf = std::numeric_limits<float>::infinity();
              lp[r * head.agents + j / event] = nan ? std::numeric_limits<float>::quiet_NaN() : equal ? inf : -inf;
              equal = true;
              nan = false;
            }
          }
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
        // Tensor bounds: one (half range, low, centre, log |half range|) per element, else numbers.
        const float* bound = head.tanh_normal_bounds >= 0 ? arena.data() + head.tanh_normal_bounds : nullptr;
        const bool bounded = bound != nullptr || head.low != -1.0 || head.high != 1.0;
        float half = static_cast<float>((head.high - head.low) / 2);
        float shift = static_cast<float>((head.high + head.low) / 2);
        float low = static_cast<float>(head.low);
        double log_half = std::log(std::abs((head.high - head.low) / 2));
        auto bounds_of = [&](int64_t j) {
          if (bound == nullptr) return;
          half = bound[j];
          low = bound[d + j];
          shift = bound[2 * d + j];
          log_half = bound[3 * d + j];
        };
        auto loc_of = [&](int64_t r, int64_t j) {
          float loc = locs[r * d + j];
          if (head.tanh_loc) {
            loc = std::tanh(loc / head.upscale) * head.upscale;
            if (tanh_head && bounded) loc = loc + half + low;
          }
          return loc;
        };
        const int64_t event = d / head.agents;  // an agent's values: one log-prob each
        if (random) {
          // On the vector units (kernels.h): the tile's normals, then x = loc + eps * scale, the
          // sample and its log-density, over all of the tile's values at once where every value
          // has the same bounds, else value by value over the rows.
          float* eps = scratch + head_scratch;
          float* values = want_log_prob ? (per_element ? lp : eps + kTile * d) : nullptr;
          philox_normals(stream.seed, stream.call, first_row, rows, head.block0, d, eps);
          GaussianDraw g;
          g.tanh = tanh_head;
          g.safe_tanh = head.safe_tanh;
          auto set_bounds = [&] {
            if (!tanh_head || !bounded) return;
            g.half = half;
            g.shift = shift;
            g.log_half = static_cast<float>(log_half);
          };
          if (bound == nullptr && !head.tanh_loc) {
            set_bounds();
            gaussian_draw(g, locs, scales, eps, rows * d, sample, values);
          } else {
            float loc[kTile], scale[kTile], e[kTile], x[kTile], v[kTile];
            for (int64_t j = 0; j < d; ++j) {
              bounds_of(j);
              set_bounds();
              for (int64_t r = 0; r < rows; ++r) {
                loc[r] = loc_of(r, j);
                scale[r] = scales[r * d + j];
                e[r] = eps[r * d + j];
              }
              gaussian_draw(g, loc, scale, e, rows, x, values != nullptr ? v : nullptr);
              for (int64_t r = 0; r < rows; ++r) {
                sample[r * d + j] = x[r];
                if (values != nullptr) values[r * d + j] = v[r];
              }
            }
          }
          if (want_log_prob && !per_element) {
            // Summed over each event in double, as the values come.
            for (int64_t r = 0; r < rows; ++r) {
              double total = 0;
              for (int64_t j = 0; j < d; ++j) {
                total += values[r * d + j];
                if ((j + 1) % event == 0) {
                  lp[r * head.agents + j / event] = static_cast<float>(total);
                  total = 0;
                }
              }
            }
          }
          return;
        }
        const float lim = static_cast<float>(1.0 - 1e-6);
        for (int64_t r = 0; r < rows; ++r) {
          double total = 0;
          for (int64_t j = 0; j < d; ++j) {
            bounds_of(j);
            const float loc = loc_of(r, j);
            const float scale = scales[r * d + j];
            // The mean: a TanhNormal's action is std::tanh's, as LibTorch's, and is scored from
            // the action through atanh as LibTorch's log_prob(action) does (which magnifies any
            // error near +-1).
            float y = loc;
            if (tanh_head) {
              y = std::tanh(loc);
              if (head.safe_tanh) y = std::min(std::max(y, -lim), lim);
              if (bounded) y = shift == 0.0f ? y * half : y * half + shift;
            }
            sample[r * d + j] = y;
            if (!want_log_prob) continue;
            double pre = loc;
            if (tanh_head) {
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
              if ((j + 1) % event == 0) {
                lp[r * head.agents + j / event] = static_cast<float>(total);
                total = 0;
              }
            }
          }
        }
        return;
      }
      case HeadKind::kNone:
        return;
    }
  }
};

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
    case HeadKind::kTanhDelta:
      // Its mean has no closed form, so LibTorch (and TorchRL) average draws; every draw is the
      // Delta's squashed point, which the plan writes. No median: LibTorch raises (no icdf).
      ok = type != T::kMedian;
      break;
  }
  if (ok) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(h.path, ": ", h.name, " under interaction type ",
                                                    std::string(nn::to_string(type)),
                                                    " has no closed form here (LibTorch's path raises or estimates it)"));
}

}  // namespace

FusedPlan::FusedPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  Impl& p = *impl_;
  if (p.inputs.size() != 1) {
    std::vector<std::string> keys;
    for (int s : p.inputs) keys.push_back(p.slots[s].key.to_string());
    p.flat = absl::FailedPreconditionError(absl::StrCat("the flat API takes one input; the policy reads ", keys.size(),
                                                        " (", absl::StrJoin(keys, ", "), "): use act()"));
  } else if (p.composite) {
    p.flat = absl::FailedPreconditionError(absl::StrCat(
        p.head_path, ": a composite distribution writes one sample per part; the flat API takes one: use act()"));
  }
  for (int t = 0; t < kInteractionTypes; ++t) {
    using T = nn::InteractionType;
    const auto type = static_cast<T>(t);
    absl::Status& status = p.checks[t];
    if (!p.egreedy_path.empty() && type == T::kRandom) {
      status = absl::FailedPreconditionError(
          absl::StrCat(p.egreedy_path,
                       ": egreedy under interaction type random draws from LibTorch's generator (torch.rand, "
                       "randint, multinomial), which the plan's Philox stream does not reproduce"));
    } else if (p.composite && type == T::kMedian) {
      status = absl::FailedPreconditionError(absl::StrCat(
          p.head_path,
          ": a composite distribution under interaction type median has no closed form here (LibTorch's path raises)"));
    } else {
      for (const Head& h : p.heads) {
        if (status = check_head(h, type); !status.ok()) break;
      }
    }
  }
}

const absl::Status& FusedPlan::check(nn::InteractionType type) const {
  const int t = static_cast<int>(type);
  if (t < 0 || t >= kInteractionTypes) {
    static const absl::Status* const unknown =
        new absl::Status(absl::InvalidArgumentError("an interaction type outside InteractionType's values"));
    return *unknown;
  }
  return impl_->checks[t];
}

nn::InteractionType FusedPlan::default_interaction_type() const { return impl_->default_type; }
const std::vector<int>& FusedPlan::input_slots() const { return impl_->inputs; }
const std::vector<int>& FusedPlan::output_slots() const { return impl_->outputs; }
int FusedPlan::find_slot(const NestedKey& key) const { return impl_->find_or_none(key); }
int FusedPlan::slot_count() const { return static_cast<int>(impl_->slots.size()); }
const FusedPlan::Slot& FusedPlan::slot(int index) const { return impl_->slots[index]; }
const std::vector<std::string>& FusedPlan::description() const { return impl_->description; }

const absl::Status& FusedPlan::flat_status() const { return impl_->flat; }
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
  bool want_log_prob = false;
  for (int i = 0; i < count; ++i) {
    const int s = destinations[i].slot;
    want_log_prob |= s == p.log_prob_sum;
    for (const Head& h : p.heads) want_log_prob |= s == h.log_prob;
  }
  if (type == nn::InteractionType::kRandom) p.check_masks(inputs, batch);
  // Tiles are independent (a row's draws depend on its index, not on who computes it), so a
  // large batch is spread over LibTorch's intra-op threads, as LibTorch spreads its own products;
  // each thread has its own scratch. Inside another parallel region, or on one thread, the
  // calling thread runs them all.
  auto run_tiles = [&](int64_t begin, int64_t end) {
    float* scratch = thread_scratch(p.scratch_per_tile);
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t first = tile * kTile;
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
  };
  const int64_t tiles = (batch + kTile - 1) / kTile;
  if (tiles > kTilesPerThread && at::get_num_threads() > 1 && !at::in_parallel_region()) {
    at::parallel_for(0, tiles, kTilesPerThread, run_tiles);
  } else {
    run_tiles(0, tiles);
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
