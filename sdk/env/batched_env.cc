#include "sdk/env/batched_env.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

namespace tdp::env {
namespace {

// Environments never need gradients: running their ops below the autograd and view-tracking
// dispatch keys cuts the per-operation overhead that dominates at small N. Unlike
// InferenceMode, the tensors made here are ordinary ones that agents may feed to autograd.
using BelowAutograd = at::AutoDispatchBelowADInplaceOrView;

// The smallest and the largest value of an integer tensor, in one pass (a reduction and two
// item() calls cost more than a fast simulator's step).
std::pair<int64_t, int64_t> value_range(const at::Tensor& values) {
  const at::Tensor flat = values.contiguous();
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  AT_DISPATCH_INTEGRAL_TYPES(flat.scalar_type(), "value_range", [&] {
    const scalar_t* v = flat.const_data_ptr<scalar_t>();
    for (int64_t i = 0; i < flat.numel(); ++i) {
      lo = std::min<int64_t>(lo, v[i]);
      hi = std::max<int64_t>(hi, v[i]);
    }
  });
  return {lo, hi};
}

}  // namespace

int64_t EntrySpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

BatchedEnv::BatchedEnv(const EnvOptions& options, int64_t default_max_episode_steps)
    : num_envs_(options.num_envs()),
      max_episode_steps_(options.max_episode_steps() > 0 ? options.max_episode_steps()
                                                         : default_max_episode_steps),
      dtype_(options.dtype()),
      observation_dtype_(options.observation_dtype()),
      generator_(at::detail::createCPUGenerator()) {
  if (num_envs_ < 1) {
    throw std::invalid_argument("EnvOptions: num_envs must be at least 1, got " +
                                std::to_string(num_envs_));
  }
  if (dtype_ != at::kFloat && dtype_ != at::kDouble) {
    throw std::invalid_argument(std::string("EnvOptions: dtype must be float32 or float64, got ") +
                                c10::toString(dtype_));
  }
  if (observation_dtype_ != at::kFloat && observation_dtype_ != at::kDouble) {
    throw std::invalid_argument(std::string("EnvOptions: observation_dtype must be float32 or float64, got ") +
                                c10::toString(observation_dtype_));
  }
  if (options.max_episode_steps() < 0) {
    throw std::invalid_argument("EnvOptions: max_episode_steps must be >= 0 (0: the default), got " +
                                std::to_string(options.max_episode_steps()));
  }
}

at::TensorOptions BatchedEnv::state_options() const { return at::TensorOptions().dtype(dtype_); }

at::Tensor BatchedEnv::observation_of(const at::Tensor& state) const {
  at::Tensor observed = observe(state);
  if (observed.scalar_type() != observation_dtype_) return observed.to(observation_dtype_);
  // A tensor that nothing else holds (neither its handle nor its memory: not a view of the
  // state, not kept by the environment) is already the caller's own.
  if (observed.use_count() == 1 && observed.storage().use_count() == 1) return observed;
  // Else a copy; a contiguous one by memcpy (a third of what Tensor::clone costs, which at small
  // N is more than a fast simulator's whole step).
  if (!observed.is_contiguous()) return observed.clone();
  at::Tensor copy = at::empty(observed.sizes(), observed.options());
  std::memcpy(copy.data_ptr(), observed.const_data_ptr(), observed.nbytes());
  return copy;
}

TensorDict BatchedEnv::observation_td(const at::Tensor& observation) const {
  TensorDict td({num_envs_});
  td.set("observation", observation);
  return td;
}

TensorDict BatchedEnv::reset(uint64_t seed) {
  BelowAutograd below_autograd;
  generator_.set_current_seed(seed);
  state_ = initial_state(num_envs_);
  steps_ = at::zeros({num_envs_}, at::kLong);
  return observation_td(observation_of(state_));
}

TensorDict BatchedEnv::reset_to(const at::Tensor& state) {
  BelowAutograd below_autograd;
  if (state.dim() != 2 || state.size(0) != num_envs_ || state.size(1) != state_dim() ||
      !at::isFloatingType(state.scalar_type())) {
    throw std::invalid_argument(name() + ".reset_to: state must be a floating tensor of shape [" +
                                std::to_string(num_envs_) + ", " + std::to_string(state_dim()) +
                                "], got " + c10::toString(state.scalar_type()) + " of shape " +
                                shape_to_string(state.sizes()));
  }
  // A copy: the caller keeps its tensor, and state_ must never alias a caller's memory.
  state_ = state.to(dtype_, /*non_blocking=*/false, /*copy=*/true);
  steps_ = at::zeros({num_envs_}, at::kLong);
  return observation_td(observation_of(state_));
}

TensorDict BatchedEnv::reset(const at::Tensor& env_mask) {
  BelowAutograd below_autograd;
  if (!state_.defined()) {
    throw std::logic_error(name() + ".reset(env_mask): call reset(seed) or reset_to() first");
  }
  if (env_mask.scalar_type() != at::kBool || env_mask.dim() != 1 ||
      env_mask.size(0) != num_envs_) {
    throw std::invalid_argument(name() + ".reset(env_mask): env_mask must be bool of shape [" +
                                std::to_string(num_envs_) + "], got " +
                                c10::toString(env_mask.scalar_type()) + " of shape " +
                                shape_to_string(env_mask.sizes()));
  }
  at::Tensor mask = env_mask.unsqueeze(1);
  state_ = at::where(mask, initial_state(num_envs_), state_);
  steps_ = steps_.masked_fill(env_mask, 0);
  return observation_td(observation_of(state_));
}

void BatchedEnv::check_actions(const TensorDict& action_td) const {
  for (const EntrySpec& spec : action_spec_) {
    std::vector<int64_t> expected_shape{num_envs_};
    expected_shape.insert(expected_shape.end(), spec.shape.begin(), spec.shape.end());
    auto expected = [&] {
      return std::string(c10::toString(spec.dtype)) + " of shape " + shape_to_string(expected_shape);
    };
    if (!action_td.contains(spec.key) || action_td.is_tensordict(spec.key)) {
      throw std::invalid_argument(name() + ".step: missing action " + spec.key.to_string() +
                                  " (expected " + expected() + "); the TensorDict has keys " +
                                  keys_to_string(action_td.keys(/*include_nested=*/true)));
    }
    const at::Tensor action = action_td.get(spec.key);
    if (action.scalar_type() != spec.dtype || action.sizes() != c10::IntArrayRef(expected_shape)) {
      throw std::invalid_argument(name() + ".step: action " + spec.key.to_string() +
                                  " must be " + expected() + ", got " +
                                  c10::toString(action.scalar_type()) + " of shape " +
                                  shape_to_string(action.sizes()));
    }
    if (spec.is_discrete()) {
      const auto [lo, hi] = value_range(action);
      if (lo < 0 || hi >= spec.num_categories) {
        throw std::invalid_argument(name() + ".step: action " + spec.key.to_string() +
                                    " must lie in [0, " + std::to_string(spec.num_categories) +
                                    "), got values from " + std::to_string(lo) + " to " +
                                    std::to_string(hi));
      }
    }
  }
}

TensorDict BatchedEnv::step(const TensorDict& action_td) {
  BelowAutograd below_autograd;
  if (!state_.defined()) {
    throw std::logic_error(name() + ".step: call reset(seed) first");
  }
  if (action_spec_.empty()) {
    action_spec_ = action_spec();  // fixed for the environment's life
    for (const EntrySpec& spec : action_spec_) {
      if (spec.is_discrete() && !at::isIntegralType(spec.dtype, /*includeBool=*/false)) {
        throw std::logic_error(name() + ".action_spec: discrete action " + spec.key.to_string() + " has dtype " +
                               c10::toString(spec.dtype) + "; expected an integer dtype");
      }
    }
  }
  check_actions(action_td);
  Transition t = transition(state_, action_td);
  if (t.terminated.scalar_type() != at::kBool || t.terminated.sizes() != c10::IntArrayRef{num_envs_, 1}) {
    throw std::logic_error(name() + ".transition gave terminated " + c10::toString(t.terminated.scalar_type()) +
                           " of shape " + shape_to_string(t.terminated.sizes()) + "; expected bool of shape [" +
                           std::to_string(num_envs_) + ", 1]");
  }
  const at::Tensor terminated = t.terminated.contiguous();
  // The step counts, the time limit and which episodes ended, in one pass over the
  // environments (as tensor operations they would cost more than a fast simulator's step).
  // steps_ is never handed out (episode_steps() copies), so updating it in place is safe.
  at::Tensor truncated = at::empty({num_envs_, 1}, at::kBool);
  at::Tensor done = at::empty({num_envs_, 1}, at::kBool);
  int64_t* steps = steps_.data_ptr<int64_t>();
  const bool* terminal = terminated.const_data_ptr<bool>();
  bool* cut = truncated.data_ptr<bool>();
  bool* ended = done.data_ptr<bool>();
  bool any_done = false;
  for (int64_t i = 0; i < num_envs_; ++i) {
    cut[i] = ++steps[i] >= max_episode_steps_;
    ended[i] = terminal[i] || cut[i];
    any_done = any_done || ended[i];
  }
  at::Tensor final_observation = observation_of(t.next_state);
  at::Tensor observation = final_observation;
  // The common step, with no episode ending, skips the draw and the select.
  if (any_done) {
    state_ = at::where(done, initial_state(num_envs_), t.next_state);
    steps_.masked_fill_(done.squeeze(1), 0);
    observation = observation_of(state_);
  } else {
    state_ = t.next_state;
  }
  TensorDict out({num_envs_});
  out.set("observation", observation)
      .set("final_observation", final_observation)
      .set("reward", t.reward.scalar_type() == observation_dtype_ ? t.reward : t.reward.to(observation_dtype_))
      .set("done", done)
      .set("terminated", terminated)
      .set("truncated", truncated);
  return out;
}

at::Tensor BatchedEnv::episode_steps() const {
  if (!steps_.defined()) throw std::logic_error(name() + ".episode_steps: call reset(seed) first");
  return steps_.clone();
}

at::Tensor BatchedEnv::state() const {
  if (!state_.defined()) throw std::logic_error(name() + ".state: call reset(seed) first");
  return state_.clone();
}

}  // namespace tdp::env
