#include "samples/agents/ppo.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <torch/autograd.h>
#include <torch/nn/init.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "sdk/actor/actor.h"
#include "sdk/distributions/composite_distribution.h"
#include "sdk/distributions/composite_lp_aggregate.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/transforms.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_sequential.h"

namespace tdp::agents {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// [B, ...] -> [B]: a per-environment log-prob or entropy, summing event dims (a Normal over a
// [B, 1] action scores [B, 1]; a Categorical already gives [B]).
at::Tensor per_sample(const at::Tensor& t, int64_t batch) {
  if (t.dim() == 1) return t;
  return t.reshape({batch, -1}).sum(1);
}

// Log-prob of the actions stored in `td`, and the entropy (closed form where the distribution
// has one, else the estimate -log_prob(action), as for a TanhNormal).
struct Scored {
  at::Tensor log_prob;  // [B]
  at::Tensor entropy;   // [B]
  // [B]: the entropy weighted per part (EntropyWeights), what the loss adds; undefined when every
  // part has the same weight (the loss then weighs `entropy`).
  at::Tensor bonus;
};

// The weight of each action part's entropy in the loss: PpoConfig's part_entropy_coefs, else
// entropy_coef, times the boost of the current iteration.
struct EntropyWeights {
  double scale = 1.0;
  double coef = 0.0;
  const std::map<std::string, double>* parts = nullptr;

  double of(const NestedKey& key) const {
    if (parts != nullptr) {
      if (auto it = parts->find(key.join(".")); it != parts->end()) return scale * it->second;
    }
    return scale * coef;
  }
  bool uniform() const { return parts == nullptr || parts->empty(); }
};

class Scorer {
 public:
  explicit Scorer(const nn::ProbabilisticTensorDictSequentialImpl& actor)
      : actor_(actor), sample_keys_(actor.dist_sample_keys()) {}

  Scored score(const TensorDict& td, bool with_entropy, const EntropyWeights& weights = {}) {
    const int64_t batch = td.batch_size()[0];
    // The distribution that scores the stored actions. With one probabilistic module it is
    // get_dist(). With several (return_composite: autoregressive heads, a later part computed
    // from an earlier sample) it is get_dist_given_samples(): the joint over all parts, each
    // conditioned on the stored earlier samples, so log_prob is log p(a1) + log p(a2 | a1) and
    // the entropy H(a1) + H(a2 | a1 stored). (tensordict's get_dist would re-draw a1 and score
    // a2 under that draw: not the probability of the action taken.)
    const nn::AnyDistribution dist =
        actor_.return_composite() ? actor_.get_dist_given_samples(td) : actor_.get_dist(td);
    Scored out;
    if (dist.is_composite()) {
      // One summed log-prob per environment: the joint probability of all action parts.
      dist::CompositeLpAggregateGuard aggregate(true, /*thread_local_only=*/true);
      out.log_prob = per_sample(std::get<at::Tensor>(dist.composite()->log_prob(td.clone(false))), batch);
      if (with_entropy && weights.uniform()) {
        out.entropy = per_sample(std::get<at::Tensor>(dist.composite()->entropy()), batch);
      } else if (with_entropy) {
        const TensorDict parts = dist.composite()->entropy_composite(1, /*include_sum=*/false);
        for (const NestedKey& key : sample_keys_) {
          const at::Tensor e = per_sample(parts.get(dist::add_suffix(key, "_entropy")), batch);
          out.entropy = out.entropy.defined() ? out.entropy + e : e;
          out.bonus = out.bonus.defined() ? out.bonus + weights.of(key) * e : weights.of(key) * e;
        }
      }
      return out;
    }
    out.log_prob = per_sample(dist.distribution()->log_prob(td.get(sample_keys_.at(0))), batch);
    if (with_entropy) {
      if (has_entropy_) {
        try {
          out.entropy = per_sample(dist.distribution()->entropy(), batch);
        } catch (const std::exception&) {
          has_entropy_ = false;  // no closed form (TanhNormal): estimate from the sample
        }
      }
      if (!has_entropy_) out.entropy = -out.log_prob;
      if (!weights.uniform()) out.bonus = weights.of(sample_keys_.at(0)) * out.entropy;
    }
    return out;
  }

 private:
  const nn::ProbabilisticTensorDictSequentialImpl& actor_;
  std::vector<NestedKey> sample_keys_;
  bool has_entropy_ = true;
};

absl::StatusOr<std::shared_ptr<nn::ProbabilisticTensorDictSequentialImpl>> probabilistic_root(
    const policy::Policy& policy) {
  auto actor = std::dynamic_pointer_cast<nn::ProbabilisticTensorDictSequentialImpl>(policy.module);
  if (actor == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PPO needs a probabilistic_sequential policy (its get_dist scores actions); policy '",
        policy.spec.name(), "' has a different top module"));
  }
  return actor;
}

// The trained parameters as views of one contiguous tensor, so that the gradient-norm clip and
// Adam run a few kernels per step instead of a dozen per parameter tensor: on networks this small
// each LibTorch kernel call costs more than its arithmetic, and Adam over 12 tensors was about
// half of an update's calls. Both are elementwise (the clip's norm is over all gradients
// anyway), so the numbers are the per-tensor ones.
class FlatParameters {
 public:
  explicit FlatParameters(const std::vector<at::Tensor>& params) : params_(params) {
    int64_t total = 0;
    for (const at::Tensor& p : params_) {
      if (p.options().dtype() != params_[0].options().dtype() || p.device() != params_[0].device()) {
        throw std::invalid_argument("PPO trains parameters of one dtype on one device");
      }
      total += p.numel();
    }
    flat_ = at::empty({total}, params_[0].options().requires_grad(false));
    int64_t offset = 0;
    at::NoGradGuard no_grad;
    for (at::Tensor& p : params_) {
      at::Tensor view = flat_.narrow(0, offset, p.numel()).view(p.sizes());
      view.copy_(p);
      p.set_data(view);  // the module's parameter now lives in flat_
      offset += p.numel();
    }
  }

  // The one tensor the optimizer updates; its gradient is gathered by gather_grad().
  const at::Tensor& flat() const { return flat_; }

  void zero_grad() {
    for (at::Tensor& p : params_) p.mutable_grad().reset();
  }

  // After backward(): every parameter's gradient, concatenated (zeros where one got none).
  void gather_grad() {
    std::vector<at::Tensor> grads;
    grads.reserve(params_.size());
    for (const at::Tensor& p : params_) {
      grads.push_back(p.grad().defined() ? p.grad().reshape(-1) : at::zeros({p.numel()}, p.options()));
    }
    flat_.mutable_grad() = at::cat(grads);
  }

 private:
  std::vector<at::Tensor> params_;
  at::Tensor flat_;
};

// Gymnasium's RunningMeanStd (wrappers/utils.py): the mean and population variance of every
// batch given to update(), combined in float64 by the parallel algorithm; count starts at 1e-4.
// Plain loops over doubles: it is updated on every environment step, where a dozen LibTorch
// kernel calls on an [1, 11] tensor would cost more than the step itself.
class RunningMeanStd {
 public:
  explicit RunningMeanStd(int64_t dim) : mean_(dim, 0.0), var_(dim, 1.0) {}

  // x: [n, dim], any floating dtype.
  void update(const at::Tensor& x) {
    const int64_t dim = static_cast<int64_t>(mean_.size());
    const at::Tensor rows = x.to(at::kDouble).reshape({-1, dim}).contiguous();
    const int64_t n = rows.size(0);
    if (n == 0) return;
    const double* data = rows.data_ptr<double>();
    const double total = count_ + static_cast<double>(n);
    for (int64_t j = 0; j < dim; ++j) {
      double batch_mean = 0;
      for (int64_t i = 0; i < n; ++i) batch_mean += data[i * dim + j];
      batch_mean /= static_cast<double>(n);
      double batch_var = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double d = data[i * dim + j] - batch_mean;
        batch_var += d * d;
      }
      batch_var /= static_cast<double>(n);
      const double delta = batch_mean - mean_[j];
      const double m2 = var_[j] * count_ + batch_var * n + delta * delta * (count_ * n / total);
      mean_[j] += delta * (n / total);
      var_[j] = m2 / total;
    }
    count_ = total;
  }

  // (x - mean) / sqrt(var + epsilon), clamped to [-clip, clip] when clip > 0: Gymnasium's
  // NormalizeObservation (then CleanRL's clip), computed in float64; x: [n, dim] -> float32.
  at::Tensor normalize(const at::Tensor& x, double clip, double epsilon = 1e-8) const {
    const int64_t dim = static_cast<int64_t>(mean_.size());
    const at::Tensor rows = x.to(at::kDouble).reshape({-1, dim}).contiguous();
    at::Tensor out = at::empty({rows.size(0), dim}, at::kFloat);
    const double* in = rows.data_ptr<double>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < rows.size(0); ++i) {
      for (int64_t j = 0; j < dim; ++j) {
        double v = (in[i * dim + j] - mean_[j]) / std::sqrt(var_[j] + epsilon);
        if (clip > 0) v = std::clamp(v, -clip, clip);
        o[i * dim + j] = static_cast<float>(v);
      }
    }
    return out;
  }

  at::Tensor mean() const { return at::tensor(mean_, at::kDouble); }
  // sqrt(var + epsilon): what Gymnasium's normalizing wrappers divide by.
  at::Tensor std(double epsilon = 1e-8) const { return (at::tensor(var_, at::kDouble) + epsilon).sqrt(); }

 private:
  std::vector<double> mean_, var_;
  double count_ = 1e-4;
};

// The policy's ObservationNorm, which normalize_observations keeps up to date: exactly one,
// standardizing.
absl::StatusOr<std::shared_ptr<nn::ObservationNormImpl>> observation_norm_of(
    const nn::ProbabilisticTensorDictSequentialImpl& actor, const std::string& policy_name) {
  std::vector<std::shared_ptr<nn::ObservationNormImpl>> found;
  // torch::nn::Module::modules(): every submodule (the sequence's own modules() lists its steps).
  for (const auto& module : static_cast<const torch::nn::Module&>(actor).modules(/*include_self=*/false)) {
    if (auto norm = std::dynamic_pointer_cast<nn::ObservationNormImpl>(module)) found.push_back(norm);
  }
  if (found.size() != 1 || !found[0]->options().standard_normal()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "normalize_observations needs the policy to hold one ObservationNorm network with standard_normal "
        "(whose loc and scale PPO sets); policy '",
        policy_name, "' holds ", found.size(), found.size() == 1 ? " without standard_normal" : ""));
  }
  return found[0];
}

// CleanRL's layer_init: orthogonal weights with `gain` for the last weight matrix of `module` and
// sqrt(2) for the others, zero biases; other parameters (a state-independent log-std) are left.
void orthogonal_init(torch::nn::Module& module, double last_gain) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> weights;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor p = item.value();
    if (p.dim() == 2) {
      weights.push_back(p);
    } else if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      p.zero_();
    }
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    torch::nn::init::orthogonal_(weights[i], i + 1 == weights.size() ? last_gain : std::sqrt(2.0));
  }
}

double mean_of(const std::deque<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (double v : values) sum += v;
  return sum / values.size();
}

absl::StatusOr<PpoResult> train(env::BatchedEnv& env, policy::Policy& policy, const PpoConfig& config,
                                const std::function<void(const IterationStats&)>& on_iteration) {
  auto root = probabilistic_root(policy);
  if (!root.ok()) return root.status();
  const std::shared_ptr<nn::ProbabilisticTensorDictSequentialImpl> actor = *std::move(root);
  const auto obs_specs = env.observation_spec();
  if (obs_specs.size() != 1 || !(obs_specs[0].key == NestedKey("observation"))) {
    return absl::InvalidArgumentError(
        absl::StrCat("PPO needs one flat \"observation\" entry; ", env.name(), " has another layout"));
  }
  const int64_t obs_dim = obs_specs[0].numel();
  const std::vector<NestedKey> sample_keys = actor->dist_sample_keys();
  for (const auto& [name, coef] : config.part_entropy_coefs) {
    if (std::none_of(sample_keys.begin(), sample_keys.end(), [&](const NestedKey& k) { return k.join(".") == name; })) {
      return absl::InvalidArgumentError(absl::StrCat("part_entropy_coefs names '", name, "', which policy '",
                                                     policy.spec.name(), "' does not sample (its parts: ",
                                                     keys_to_string(sample_keys), ")"));
    }
  }
  Scorer scorer(*actor);
  // Rollouts act through an Actor over the module being trained, as a simulator would: on the
  // fused CPU plan when the policy lowers to one (sdk/fused), else on LibTorch. The plan runs on
  // its own copy of the weights, refreshed after each update. It draws from its own Philox
  // stream seeded by config.seed, so a run stays reproducible.
  actor::Actor rollout_actor(policy, actor::ActorOptions()
                                         .seed(config.seed)
                                         .interaction_type(nn::InteractionType::kRandom)
                                         .return_all_entries(true));

  std::shared_ptr<nn::ObservationNormImpl> observation_norm;
  if (config.normalize_observations) {
    auto norm = observation_norm_of(*actor, policy.spec.name());
    if (!norm.ok()) return norm.status();
    observation_norm = *std::move(norm);
  }
  // Gymnasium's NormalizeObservation, as CleanRL wraps each environment in it: every observation
  // (the first, each step's, and the last one of an episode before the reset) updates the
  // statistics, then is normalized with them. So the rollout's observations are normalized as they
  // arrive and stored normalized; while training, the policy's ObservationNorm is the identity
  // (loc 0, scale 1: its clip leaves an already clipped input as it is), and it gets the final
  // statistics when training ends, so the saved policy is fed raw observations.
  RunningMeanStd observation_stats(obs_dim);
  const double observation_clip =
      observation_norm != nullptr ? observation_norm->options().clip().value_or(0.0) : 0.0;
  auto observe = [&](const at::Tensor& raw) {
    if (observation_norm == nullptr) return raw;
    observation_stats.update(raw);
    return observation_stats.normalize(raw, observation_clip).view(raw.sizes());
  };
  if (observation_norm != nullptr) {
    observation_norm->set_statistics(at::zeros_like(observation_norm->loc), at::ones_like(observation_norm->scale));
  }
  auto write_observation_stats = [&] {
    if (observation_norm == nullptr) return;
    observation_norm->set_statistics(observation_stats.mean().to(at::kFloat).view(observation_norm->loc.sizes()),
                                     observation_stats.std().to(at::kFloat).view(observation_norm->scale.sizes()));
  };

  at::manual_seed(config.seed);  // the critic's initialization
  nn::TensorDictModule critic(
      nn::Mlp(nn::MlpOptions(obs_dim, config.value_hidden_sizes, 1).activation("tanh")),
      nn::TensorDictModuleOptions({"observation"}, {"state_value"}));
  if (config.orthogonal_init) {
    orthogonal_init(*actor, /*last_gain=*/0.01);
    orthogonal_init(*critic, /*last_gain=*/1.0);
  }
  // The critic reads the observations the policy reads (normalized when normalize_observations).
  auto value_of = [&](const at::Tensor& obs) {
    TensorDict td({{"observation", obs}}, {obs.size(0)});
    return critic->forward(td).get("state_value").squeeze(-1);
  };
  RunningMeanStd return_stats(1);
  at::Tensor discounted_return = at::zeros({config.num_envs}, at::kDouble);

  std::vector<at::Tensor> params = actor->parameters();
  for (const auto& p : critic->parameters()) params.push_back(p);
  FlatParameters flat(params);
  torch::optim::Adam optimizer({flat.flat()}, torch::optim::AdamOptions(config.learning_rate).eps(1e-5));

  at::Generator gen = at::detail::createCPUGenerator(config.seed);
  const int64_t N = config.num_envs;
  const int64_t T = config.steps_per_rollout;
  const int64_t B = config.batch_size();
  const int64_t iterations = config.num_iterations();

  PpoResult result;
  const auto start = Clock::now();
  at::Tensor obs;
  {
    at::NoGradGuard no_grad;
    obs = observe(env.reset(config.seed).get("observation"));
  }
  // The rollout actor runs on a copy of the weights: one refresh for the initialization and the
  // identity normalization.
  if (config.orthogonal_init || observation_norm) {
    if (absl::Status s = rollout_actor.refresh_parameters(); !s.ok()) return s;
  }
  at::Tensor running_return = at::zeros({N}, at::kDouble);
  std::deque<double> recent;
  int64_t episodes = 0;

  for (int64_t iter = 1; iter <= iterations; ++iter) {
    const double frac = 1.0 - static_cast<double>(iter - 1) / iterations;
    const double lr = config.anneal_learning_rate ? config.learning_rate * frac : config.learning_rate;
    const double clip = config.anneal_clip ? config.clip_epsilon * frac : config.clip_epsilon;
    EntropyWeights entropy_weights;
    entropy_weights.coef = config.entropy_coef;
    entropy_weights.parts = &config.part_entropy_coefs;
    if (config.entropy_boost_fraction > 0) {
      const double progress = static_cast<double>(iter - 1) / (config.entropy_boost_fraction * iterations);
      entropy_weights.scale = 1.0 + (config.entropy_boost - 1.0) * std::max(0.0, 1.0 - progress);
    }
    for (auto& group : optimizer.param_groups()) {
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    }

    // ---- rollout --------------------------------------------------------------------------
    // Each step only acts and steps the environments; the log-probs of the drawn actions and the
    // values of the visited states are computed after it, in one batched call each (the
    // parameters do not change during a rollout, so they are the same numbers).
    std::vector<at::Tensor> obs_buf, reward_buf, done_buf;
    std::vector<std::vector<at::Tensor>> action_buf(sample_keys.size());
    {
      at::NoGradGuard no_grad;
      for (int64_t t = 0; t < T; ++t) {
        const TensorDict step_td = rollout_actor.act(TensorDict({{"observation", obs}}, {N}));
        TensorDict out = env.step(step_td);

        at::Tensor reward = out.get("reward").reshape({N}).to(at::kDouble);
        const at::Tensor terminated = out.get("terminated").reshape({N});
        const at::Tensor truncated = out.get("truncated").reshape({N});
        const at::Tensor done = out.get("done").reshape({N});
        // The episode's last observation counts before the reset's (the order in which a wrapped
        // Gymnasium environment sees them); only truncated ones are read again, to bootstrap.
        at::Tensor final_obs;
        if (observation_norm != nullptr || config.bootstrap_truncated) {
          const bool any_done = done.any().item<bool>();
          if (any_done) {
            const at::Tensor idx = done.nonzero().squeeze(1);
            final_obs = observe(out.get("final_observation").index_select(0, idx));
          }
        }
        const at::Tensor next_obs = observe(out.get("observation"));

        running_return += reward;
        if (done.any().item<bool>()) {
          const at::Tensor finished = running_return.masked_select(done);
          const auto* r = finished.data_ptr<double>();
          for (int64_t i = 0; i < finished.numel(); ++i) {
            recent.push_back(r[i]);
            result.episode_returns.push_back({result.env_steps + (t + 1) * N, r[i]});
            if (static_cast<int64_t>(recent.size()) > config.recent_episodes) recent.pop_front();
            ++episodes;
          }
          running_return.masked_fill_(done, 0.0);
        }

        at::Tensor scaled = reward;
        if (config.normalize_rewards) {
          discounted_return = discounted_return * config.gamma * (1.0 - terminated.to(at::kDouble)) + reward;
          return_stats.update(discounted_return.unsqueeze(1));
          scaled = (reward / return_stats.std()).clamp(-config.reward_clip, config.reward_clip);
        }
        scaled = (scaled * config.reward_scale).to(at::kFloat);
        // A time limit is not the end of the task: bootstrap from the value of the state the
        // step reached (final_observation), as if the episode went on.
        const at::Tensor cut = truncated & terminated.logical_not();
        if (config.bootstrap_truncated && cut.any().item<bool>()) {
          // final_obs holds the done environments' rows, in order.
          at::Tensor final_value = at::zeros({N});
          final_value.index_copy_(0, done.nonzero().squeeze(1), value_of(final_obs));
          scaled = scaled + config.gamma * final_value * cut.to(at::kFloat);
        }

        obs_buf.push_back(obs);
        for (size_t k = 0; k < sample_keys.size(); ++k) {
          if (!step_td.contains(sample_keys[k])) {
            throw std::invalid_argument(absl::StrCat("the policy wrote no sample under ", sample_keys[k].to_string()));
          }
          action_buf[k].push_back(step_td.get(sample_keys[k]));
        }
        reward_buf.push_back(scaled);
        done_buf.push_back(done.to(at::kFloat));
        obs = next_obs;
      }
    }
    result.env_steps += B;
    const at::Tensor b_obs = at::stack(obs_buf).reshape({B, obs_dim});
    std::vector<at::Tensor> b_actions;
    for (auto& steps : action_buf) {
      at::Tensor a = at::stack(steps);  // [T, N, ...]
      std::vector<int64_t> shape = {B};
      for (int64_t d = 2; d < a.dim(); ++d) shape.push_back(a.size(d));
      b_actions.push_back(a.reshape(shape));
    }
    at::Tensor b_logp, values, last_value;
    {
      at::NoGradGuard no_grad;
      TensorDict batch({{"observation", b_obs}}, {B});
      for (size_t k = 0; k < sample_keys.size(); ++k) batch.set(sample_keys[k], b_actions[k]);
      b_logp = scorer.score(batch, false).log_prob;
      values = value_of(b_obs).reshape({T, N});
      last_value = value_of(obs);
    }

    // ---- GAE ------------------------------------------------------------------------------
    std::vector<at::Tensor> adv_steps(T);
    at::Tensor gae = at::zeros({N});
    for (int64_t t = T - 1; t >= 0; --t) {
      const at::Tensor next_value = t == T - 1 ? last_value : values[t + 1];
      const at::Tensor not_done = 1.0 - done_buf[t];
      const at::Tensor delta = reward_buf[t] + config.gamma * next_value * not_done - values[t];
      gae = delta + config.gamma * config.gae_lambda * not_done * gae;
      adv_steps[t] = gae;
    }
    const at::Tensor advantages = at::stack(adv_steps).reshape({B});
    const at::Tensor returns = advantages + values.reshape({B});

    // ---- update ---------------------------------------------------------------------------
    double sum_pg = 0, sum_v = 0, sum_ent = 0, sum_kl = 0, sum_clip = 0;
    int64_t updates = 0;
    for (int64_t epoch = 0; epoch < config.epochs; ++epoch) {
      const at::Tensor perm = at::randperm(B, gen, at::kLong);
      for (int64_t begin = 0; begin + config.minibatch_size <= B; begin += config.minibatch_size) {
        const at::Tensor idx = perm.slice(0, begin, begin + config.minibatch_size);
        const int64_t M = config.minibatch_size;
        TensorDict mb({{"observation", b_obs.index_select(0, idx)}}, {M});
        for (size_t k = 0; k < sample_keys.size(); ++k) mb.set(sample_keys[k], b_actions[k].index_select(0, idx));
        const at::Tensor old_logp = b_logp.index_select(0, idx);
        at::Tensor adv = advantages.index_select(0, idx);
        if (config.normalize_advantages && M > 1) adv = (adv - adv.mean()) / (adv.std() + 1e-8);

        const Scored scored = scorer.score(mb, true, entropy_weights);
        const at::Tensor log_ratio = scored.log_prob - old_logp;
        const at::Tensor ratio = log_ratio.exp();
        const at::Tensor pg_loss =
            -at::min(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv).mean();
        // The critic learns on what it is evaluated on: the rollout's stored (normalized)
        // observations.
        const at::Tensor v = value_of(mb.get("observation"));
        const at::Tensor target = returns.index_select(0, idx);
        at::Tensor v_loss = 0.5 * (v - target).pow(2).mean();
        if (config.clip_value_loss) {
          const at::Tensor old_v = values.reshape({B}).index_select(0, idx);
          const at::Tensor v_clipped = old_v + (v - old_v).clamp(-clip, clip);
          v_loss = 0.5 * at::max((v - target).pow(2), (v_clipped - target).pow(2)).mean();
        }
        const at::Tensor entropy = scored.entropy.mean();
        const at::Tensor bonus =
            scored.bonus.defined() ? scored.bonus.mean() : entropy_weights.scale * config.entropy_coef * entropy;
        const at::Tensor loss = pg_loss + config.value_coef * v_loss - bonus;

        flat.zero_grad();
        loss.backward();
        flat.gather_grad();
        if (config.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(flat.flat(), config.max_grad_norm);
        optimizer.step();

        at::NoGradGuard no_grad;
        sum_pg += pg_loss.item<double>();
        sum_v += v_loss.item<double>();
        sum_ent += entropy.item<double>();
        sum_kl += ((ratio - 1) - log_ratio).mean().item<double>();
        sum_clip += ((ratio - 1).abs() > clip).to(at::kFloat).mean().item<double>();
        ++updates;
      }
    }
    // The rollout actor acts on a copy of the weights.
    if (absl::Status s = rollout_actor.refresh_parameters(); !s.ok()) return s;

    IterationStats stats;
    stats.iteration = iter;
    stats.env_steps = result.env_steps;
    stats.wall_seconds = seconds_since(start);
    stats.mean_episode_return = mean_of(recent);
    stats.episodes = episodes;
    stats.policy_loss = sum_pg / updates;
    stats.value_loss = sum_v / updates;
    stats.entropy = sum_ent / updates;
    stats.approx_kl = sum_kl / updates;
    stats.clip_fraction = sum_clip / updates;
    stats.learning_rate = lr;
    stats.clip_epsilon = clip;
    {
      const at::Tensor flat_values = values.reshape({B});
      const double var_returns = returns.var().item<double>();
      stats.explained_variance =
          var_returns > 0 ? 1.0 - (returns - flat_values).var().item<double>() / var_returns : 0.0;
    }
    result.iterations.push_back(stats);
    if (on_iteration) on_iteration(stats);
    if (!std::isnan(config.stop_at_return) && static_cast<int64_t>(recent.size()) >= config.recent_episodes &&
        stats.mean_episode_return >= config.stop_at_return) {
      result.stopped_early = true;
      break;
    }
  }
  write_observation_stats();
  result.wall_seconds = seconds_since(start);
  return result;
}

}  // namespace

absl::StatusOr<at::Tensor> action_log_prob(const policy::Policy& policy, const TensorDict& td) {
  auto actor = probabilistic_root(policy);
  if (!actor.ok()) return actor.status();
  try {
    at::NoGradGuard no_grad;
    return Scorer(**actor).score(td, /*with_entropy=*/false).log_prob;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("action_log_prob: ", e.what()));
  }
}

int64_t PpoConfig::num_iterations() const {
  const int64_t batch = batch_size();
  return batch > 0 ? std::max<int64_t>(1, total_env_steps / batch) : 0;
}

absl::Status validate_config(const PpoConfig& c, int64_t env_num_envs) {
  auto bad = [](const std::string& message) { return absl::InvalidArgumentError("PpoConfig: " + message); };
  if (c.num_envs <= 0) return bad(absl::StrCat("num_envs must be positive, got ", c.num_envs));
  if (c.num_envs != env_num_envs) {
    return bad(absl::StrCat("num_envs is ", c.num_envs, " but the environment runs ", env_num_envs));
  }
  if (c.steps_per_rollout <= 0) return bad(absl::StrCat("steps_per_rollout must be positive, got ", c.steps_per_rollout));
  if (c.total_env_steps <= 0) return bad(absl::StrCat("total_env_steps must be positive, got ", c.total_env_steps));
  if (c.epochs <= 0) return bad(absl::StrCat("epochs must be positive, got ", c.epochs));
  if (c.minibatch_size <= 0) return bad(absl::StrCat("minibatch_size must be positive, got ", c.minibatch_size));
  if (c.minibatch_size > c.batch_size()) {
    return bad(absl::StrCat("minibatch_size ", c.minibatch_size, " is larger than the batch (num_envs ",
                            c.num_envs, " x steps_per_rollout ", c.steps_per_rollout, " = ", c.batch_size(),
                            ")"));
  }
  if (!(c.gamma >= 0 && c.gamma <= 1)) return bad(absl::StrCat("gamma must be in [0, 1], got ", c.gamma));
  if (!(c.gae_lambda >= 0 && c.gae_lambda <= 1)) {
    return bad(absl::StrCat("gae_lambda must be in [0, 1], got ", c.gae_lambda));
  }
  if (!(c.clip_epsilon > 0)) return bad(absl::StrCat("clip_epsilon must be positive, got ", c.clip_epsilon));
  if (!(c.learning_rate > 0)) return bad(absl::StrCat("learning_rate must be positive, got ", c.learning_rate));
  if (!(c.entropy_coef >= 0)) return bad(absl::StrCat("entropy_coef must be >= 0, got ", c.entropy_coef));
  for (const auto& [key, coef] : c.part_entropy_coefs) {
    if (!(coef >= 0)) return bad(absl::StrCat("part_entropy_coefs[", key, "] must be >= 0, got ", coef));
  }
  if (!(c.entropy_boost >= 0)) return bad(absl::StrCat("entropy_boost must be >= 0, got ", c.entropy_boost));
  if (!(c.entropy_boost_fraction >= 0 && c.entropy_boost_fraction <= 1)) {
    return bad(absl::StrCat("entropy_boost_fraction must be in [0, 1], got ", c.entropy_boost_fraction));
  }
  if (!(c.value_coef >= 0)) return bad(absl::StrCat("value_coef must be >= 0, got ", c.value_coef));
  if (!(c.reward_scale > 0)) return bad(absl::StrCat("reward_scale must be positive, got ", c.reward_scale));
  if (!(c.reward_clip > 0)) return bad(absl::StrCat("reward_clip must be positive, got ", c.reward_clip));
  if (c.recent_episodes <= 0) return bad(absl::StrCat("recent_episodes must be positive, got ", c.recent_episodes));
  return absl::OkStatus();
}

absl::StatusOr<PpoResult> train_ppo(env::BatchedEnv& env, policy::Policy& policy, const PpoConfig& config,
                                    const std::function<void(const IterationStats&)>& on_iteration) {
  if (absl::Status s = validate_config(config, env.num_envs()); !s.ok()) return s;
  if (policy.module == nullptr) return absl::InvalidArgumentError("train_ppo: the policy has no module");
  try {
    return train(env, policy, config, on_iteration);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("PPO on ", env.name(), " with policy '", policy.spec.name(),
                                            "' failed: ", e.what()));
  }
}

std::string episodes_csv(const std::vector<EpisodeReturn>& episodes) {
  std::ostringstream out;
  out << "env_steps,episode_return\n";
  for (const auto& e : episodes) out << absl::StrFormat("%d,%.4f\n", e.env_steps, e.episode_return);
  return out.str();
}

std::string curve_csv(const std::vector<IterationStats>& iterations) {
  std::ostringstream out;
  out << "iteration,env_steps,wall_seconds,mean_episode_return,episodes,policy_loss,value_loss,entropy,"
         "approx_kl,clip_fraction,learning_rate,clip_epsilon,explained_variance\n";
  for (const auto& s : iterations) {
    out << absl::StrFormat("%d,%d,%.3f,%.4f,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", s.iteration,
                           s.env_steps, s.wall_seconds, s.mean_episode_return, s.episodes, s.policy_loss,
                           s.value_loss, s.entropy, s.approx_kl, s.clip_fraction, s.learning_rate,
                           s.clip_epsilon, s.explained_variance);
  }
  return out.str();
}

}  // namespace tdp::agents
