// BatchedEnv: N copies of one simulator stepped together, reading actions from and writing
// observations to TensorDicts (batch_size [N]). A simulator implements it by describing its
// state as one [N, state_dim] tensor and giving three functions of it (initial_state, observe,
// transition); the SDK's own (samples/envs: CartPole, Pendulum, Goal, the MuJoCo tasks) derive
// from it, and agents, collectors and `rollout` size their networks from its specs and drive it.
//
//   tdp::env::CartPole env(tdp::env::EnvOptions(/*num_envs=*/64));
//   tdp::TensorDict td = env.reset(/*seed=*/0);                 // td["observation"]: [64, 4]
//   td.set("action", at::randint(2, {64}, at::kLong));           // the policy's choice
//   tdp::TensorDict out = env.step(td);                          // next observation, reward, ...
//   at::Tensor done = out.get("done");                           // [64, 1] bool: episodes that ended
//
// Contract of step(), for every environment i of the batch:
// - "reward" [N, 1] float32, "terminated" [N, 1] bool (the task ended: a value of 0 follows),
//   "truncated" [N, 1] bool (the time limit cut the episode; bootstrap from the value of the
//   final observation). Both can be true on the same step, as in Gym's TimeLimit. "done" [N, 1]
//   bool is terminated or truncated, as TorchRL's environments write it.
// - Finished environments reset themselves inside step (auto-reset): "observation" holds the
//   first observation of the next episode for them, and the next observation for the others.
//   "final_observation" always holds the observation the step reached before any reset (for
//   unfinished environments it is the same tensor as "observation"), so an agent bootstraps a
//   truncated episode from final_observation and continues acting on observation.
// - Actions are read from the keys of action_spec(); a missing key, a wrong dtype or shape, or
//   a discrete action out of range throws std::invalid_argument naming the key, what was
//   expected and what was given. Continuous actions are clipped to their bounds (as Gym does).
//
// Randomness: each BatchedEnv owns one torch generator (never the global one). reset(seed)
// reseeds it; initial states of later episodes are drawn from it, so a run is reproducible
// given the seed, N and the actions. Episodes of different environments share that stream.
//
// Every tensor step() and reset() return is the caller's: writing into it leaves the
// environments untouched. State is kept in EnvOptions::dtype (float32 by default, float64 to
// follow Gym's own float64 arithmetic); observations and rewards are in
// EnvOptions::observation_dtype (float32 by default). CPU only.
// Thread safety: none; one thread steps an environment at a time (an environment may step its
// copies on threads of its own inside step()).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::env {

// Options shared by every BatchedEnv, chained in LibTorch's style:
//   EnvOptions(64).dtype(at::kDouble).max_episode_steps(100)
struct EnvOptions {
  explicit EnvOptions(int64_t num_envs) : num_envs_(num_envs) {}

  EnvOptions& num_envs(int64_t n) { num_envs_ = n; return *this; }
  // float32 (default) or float64: the precision of the simulated state.
  EnvOptions& dtype(at::ScalarType t) { dtype_ = t; return *this; }
  // 0 keeps the environment's own limit (CartPole 500, Pendulum 200, Goal 50, MuJoCo 1000).
  EnvOptions& max_episode_steps(int64_t n) { max_episode_steps_ = n; return *this; }
  // float32 (default, what policies take) or float64: the dtype of observations and rewards.
  // float64 with a float64 state gives Gymnasium's own float64 outputs, for exact comparisons.
  EnvOptions& observation_dtype(at::ScalarType t) { observation_dtype_ = t; return *this; }

  int64_t num_envs() const { return num_envs_; }
  at::ScalarType dtype() const { return dtype_; }
  int64_t max_episode_steps() const { return max_episode_steps_; }
  at::ScalarType observation_dtype() const { return observation_dtype_; }

 private:
  int64_t num_envs_;
  at::ScalarType dtype_ = at::kFloat;
  int64_t max_episode_steps_ = 0;
  at::ScalarType observation_dtype_ = at::kFloat;
};

// What one entry of an observation or action holds, per environment (without the batch dim).
struct EntrySpec {
  NestedKey key;
  std::vector<int64_t> shape;  // e.g. {4} for CartPole's observation, {} for its action
  at::ScalarType dtype = at::kFloat;
  // Element-wise bounds for continuous entries (numel(shape) values each; +-inf when
  // unbounded); empty for discrete entries.
  std::vector<double> low;
  std::vector<double> high;
  // For discrete entries (an integer dtype): the values are 0 .. num_categories - 1. 0 for
  // continuous entries.
  int64_t num_categories = 0;

  bool is_discrete() const { return num_categories > 0; }
  // numel(shape): the width of a flat network input or output for this entry.
  int64_t numel() const;
};

class BatchedEnv {
 public:
  virtual ~BatchedEnv() = default;
  BatchedEnv(const BatchedEnv&) = delete;
  BatchedEnv& operator=(const BatchedEnv&) = delete;

  // "CartPole", "Pendulum", "Goal": used in error messages.
  virtual std::string name() const = 0;
  // One entry, key "observation".
  virtual std::vector<EntrySpec> observation_spec() const = 0;
  // The keys step() reads. Fixed for the environment's life (step() reads it once).
  virtual std::vector<EntrySpec> action_spec() const = 0;
  // Width of the simulated state (see state()); each environment documents its layout.
  virtual int64_t state_dim() const = 0;

  int64_t num_envs() const { return num_envs_; }
  int64_t max_episode_steps() const { return max_episode_steps_; }
  at::ScalarType dtype() const { return dtype_; }
  at::ScalarType observation_dtype() const { return observation_dtype_; }

  // Reseeds the generator and starts a new episode in every environment.
  // Returns {"observation"} with batch_size [N].
  TensorDict reset(uint64_t seed);
  // Starts a new episode in the environments where `env_mask` ([N] bool) is true, drawing from
  // the current generator; the others keep their state and step count. Returns every
  // environment's current observation. Needs an earlier reset(seed) or reset_to().
  TensorDict reset(const at::Tensor& env_mask);
  // Advances every environment by one step; see the contract at the top of this file.
  TensorDict step(const TensorDict& action_td);

  // Starts a new episode in every environment from `state` ([N, state_dim()], converted to
  // dtype()): fixed starts for evaluation and for replaying reference trajectories. The
  // generator is left as it is.
  TensorDict reset_to(const at::Tensor& state);

  // Steps taken in each environment's current episode, [N] int64 (a copy).
  at::Tensor episode_steps() const;
  // The simulated state, [N, state_dim] in dtype() (a copy): for tests and debugging.
  at::Tensor state() const;

 protected:
  BatchedEnv(const EnvOptions& options, int64_t default_max_episode_steps);

  // What an environment computes from the actions of one step.
  struct Transition {
    at::Tensor next_state;  // [N, state_dim], dtype()
    at::Tensor reward;      // [N, 1]
    at::Tensor terminated;  // [N, 1] bool
  };
  // `n` fresh initial states, [n, state_dim] in dtype(), drawn from generator().
  virtual at::Tensor initial_state(int64_t n) = 0;
  // The observation of `state`, [N, ...], in any floating dtype: BatchedEnv converts it to
  // observation_dtype() in memory of its own (callers may write into what step() returns).
  virtual at::Tensor observe(const at::Tensor& state) const = 0;
  // One step of the dynamics. Actions have already been checked against action_spec().
  virtual Transition transition(const at::Tensor& state, const TensorDict& action_td) = 0;

  at::Generator& generator() { return generator_; }
  // Tensor options for state tensors.
  at::TensorOptions state_options() const;

 private:
  void check_actions(const TensorDict& action_td) const;
  // observe(state) in observation_dtype(), never aliasing the state.
  at::Tensor observation_of(const at::Tensor& state) const;
  TensorDict observation_td(const at::Tensor& observation) const;

  int64_t num_envs_;
  int64_t max_episode_steps_;
  at::ScalarType dtype_;
  at::ScalarType observation_dtype_;
  at::Generator generator_;
  at::Tensor state_;  // undefined until the first reset
  at::Tensor steps_;  // [N] int64
  std::vector<EntrySpec> action_spec_;  // action_spec(), read at the first step
};

}  // namespace tdp::env
