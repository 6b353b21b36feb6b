// MujocoEnv: a BatchedEnv over the MuJoCo physics engine, the base of Gymnasium's v5 locomotion
// tasks in C++ (samples/envs/mujoco_tasks.h: HalfCheetah, Hopper, Walker2d, Ant). Each task loads
// Gymnasium's own model file and steps N copies of it, one mjData per copy, on LibTorch's
// intra-op thread pool (at::set_num_threads sets its size).
//
//   tdp::env::HalfCheetah env(tdp::env::EnvOptions(/*num_envs=*/16));
//   tdp::TensorDict td = env.reset(/*seed=*/0);            // "observation" [16, 17] float32
//   td.set("action", at::zeros({16, 6}));                  // torques, float32
//   tdp::TensorDict out = env.step(td);                    // reward, terminated, truncated, ...
//
// Equal to Gymnasium step for step (tests/envs/mujoco_test.cc checks 1e-9 in float64): the same
// engine build (the venv's mujoco wheel), the same model file, the same frame skip, reward
// terms, termination rules, observation layout and default keyword arguments, and the float32
// arithmetic Gymnasium's control cost does on a float32 action. As every BatchedEnv, a task clips
// actions to their bounds (the actuators' ctrlrange) before the step and its control cost: it
// equals Gymnasium's task under the ClipAction wrapper, which is how PPO recipes (CleanRL's)
// and evaluations run them; without it, an out-of-range action would pay a control cost on
// torque the actuator never applies.
//
// State: one row per environment, float64 whatever EnvOptions::dtype says (MuJoCo's mjtNum):
//   [qpos (nq) | qvel (nv) | qacc_warmstart (nv) | the task's cached quantities]
// The warm start of MuJoCo's constraint solver is part of the state because the next step
// depends on it; a task caches what Gymnasium reads from mjData after a step that is not a
// function of qpos and qvel (Ant: the torso position MuJoCo last computed, the contact forces).
// With it, a step is a pure function of a row and an action, so rows can be reset, copied and
// replayed (reset_to(state_from(qpos, qvel)) starts from a Gymnasium env's state).
//
// Model files are read from Gymnasium's assets directory in the venv the build used, or from
// the directory in the environment variable TDP_MUJOCO_ASSETS.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sdk/env/batched_env.h"

struct mjModel_;
struct mjData_;

namespace tdp::env {

class MujocoEnv : public BatchedEnv {
 public:
  ~MujocoEnv() override;

  std::string name() const override { return task_.name; }
  // "observation": [obs_dim] in observation_dtype(), unbounded.
  std::vector<EntrySpec> observation_spec() const override;
  // "action": [nu] float32, bounded by the actuators' ctrlrange.
  std::vector<EntrySpec> action_spec() const override;
  int64_t state_dim() const override { return 2 * nq_ + 2 * nv_ + task_.cached_dim; }

  int64_t nq() const { return nq_; }
  int64_t nv() const { return nv_; }
  int64_t nu() const { return nu_; }
  // Seconds of simulated time per step: the model's timestep times the frame skip.
  double dt() const;
  // The joint positions a reset adds its noise to, [nq] float64: the model's qpos0 (Gymnasium's
  // init_qpos).
  at::Tensor init_qpos() const;
  // The path of the model file loaded.
  const std::string& model_path() const { return model_path_; }

  // Full states, [num_envs, state_dim()] float64, from joint positions [num_envs, nq] and
  // velocities [num_envs, nv], made as Gymnasium's reset makes them (mj_resetData, set qpos and
  // qvel, mj_forward): reset_to(state_from(qpos, qvel)) continues from a Gymnasium env's state.
  at::Tensor state_from(const at::Tensor& qpos, const at::Tensor& qvel);

 protected:
  // What differs between tasks, besides the functions below.
  struct Task {
    std::string name;          // "HalfCheetah-v5"
    std::string model_file;    // Gymnasium's file name: "half_cheetah.xml"
    int frame_skip = 5;
    double reset_noise_scale = 0.1;
    // qvel noise: scale * N(0, 1) (HalfCheetah, Ant) or U(-scale, scale) (Hopper, Walker2d);
    // qpos noise is always U(-scale, scale).
    bool normal_qvel_noise = false;
    int64_t observation_dim = 0;
    int64_t cached_dim = 0;    // width of the task's cached quantities in a state row
  };
  // What one step of one environment gives.
  struct Outcome {
    double reward = 0.0;
    bool terminated = false;
  };
  // One row of the state, split by its layout.
  struct Row {
    const double* qpos;
    const double* qvel;
    const double* cached;
  };

  MujocoEnv(Task task, const EnvOptions& options);

  const mjModel_* model() const { return model_; }
  // Writes the observation of `row` (observation_dim values).
  virtual void observe_row(const Row& row, double* out) const = 0;
  // The reward and termination of the step from `before` to `after` under `action` (nu values).
  virtual Outcome outcome(const Row& before, const Row& after, const float* action) const = 0;
  // Fills the task's cached quantities (cached_dim values) from mjData after mj_forward or a
  // step; nothing for tasks that cache nothing.
  virtual void cache(const mjData_* data, double* cached) const;

 private:
  at::Tensor initial_state(int64_t n) override;
  at::Tensor observe(const at::Tensor& state) const override;
  Transition transition(const at::Tensor& state, const TensorDict& action_td) override;

  Row row_of(const double* row) const { return {row, row + nq_, row + nq_ + 2 * nv_}; }
  // Copies qpos, qvel and the warm start of `row` into `data`, and back.
  void load(const double* row, mjData_* data) const;
  void store(const mjData_* data, double* row) const;

  Task task_;
  std::string model_path_;
  mjModel_* model_ = nullptr;
  std::vector<mjData_*> data_;  // one per environment: scratch, the state lives in the rows
  static constexpr int64_t kMaxActuators = 64;
  std::vector<float> low_, high_;  // the actuators' ctrlrange
  int64_t nq_ = 0;
  int64_t nv_ = 0;
  int64_t nu_ = 0;
};

}  // namespace tdp::env
