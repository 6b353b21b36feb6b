// Gymnasium's v5 MuJoCo locomotion tasks in C++, batched: HalfCheetah-v5, Hopper-v5,
// Walker2d-v5, Ant-v5 and Humanoid-v5 with Gymnasium's default keyword arguments (gymnasium/envs/mujoco/
// *_v5.py): the same model files, frame skips, reward terms, health rules, observation layouts
// and reset noise. Every task is truncated after 1000 steps, as gymnasium.make registers them.
//
//   tdp::env::Hopper env(tdp::env::EnvOptions(/*num_envs=*/8));
//   tdp::TensorDict td = env.reset(/*seed=*/0);            // "observation" [8, 11]
//   td.set("action", at::zeros({8, 3}));
//   tdp::TensorDict out = env.step(td);                    // terminated once the hopper falls
//
// Per task (nq, nv, nu; observation):
// - HalfCheetah-v5 (9, 9, 6; 17 = qpos[1:], qvel): reward forward velocity - 0.1 |a|^2; never
//   terminates. Reset noise U(-0.1, 0.1) on qpos, 0.1 N(0, 1) on qvel.
// - Hopper-v5 (6, 6, 3; 11 = qpos[1:], clip(qvel, -10, 10)): reward forward velocity + 1 if
//   healthy - 1e-3 |a|^2; terminates when unhealthy: z <= 0.7, |angle| >= 0.2 or any of
//   (qpos, qvel)[2:] outside (-100, 100). Reset noise U(-5e-3, 5e-3) on both.
// - Walker2d-v5 (9, 9, 6; 17 = qpos[1:], clip(qvel, -10, 10)): as Hopper with z in (0.8, 2) and
//   angle in (-1, 1), model walker2d_v5.xml.
// - Ant-v5 (15, 14, 8; 105 = qpos[2:], qvel, clip(cfrc_ext[1:], -1, 1)): reward torso x velocity
//   + 1 if healthy - 0.5 |a|^2 - 5e-4 |clip(cfrc_ext, -1, 1)|^2; terminates when unhealthy: the
//   state is not finite or the torso z leaves [0.2, 1]. Reset noise U(-0.1, 0.1) on qpos, 0.1
//   N(0, 1) on qvel. Caches the torso's xy and cfrc_ext in the state row (mujoco_env.h).
// - Humanoid-v5 (24, 23, 17; 348 = qpos[2:], qvel, cinert[1:], cvel[1:], qfrc_actuator[6:],
//   cfrc_ext[1:]): reward 1.25 x velocity of the mass centre + 5 if healthy - 0.1 |ctrl|^2 -
//   min(5e-7 |cfrc_ext|^2, 10); terminates when the torso z leaves (1, 2). Reset noise
//   U(-1e-2, 1e-2) on both. Caches the mass centre's xy, cinert, cvel, qfrc_actuator and
//   cfrc_ext in the state row.
#pragma once

#include "samples/envs/mujoco_env.h"

namespace tdp::env {

class HalfCheetah : public MujocoEnv {
 public:
  explicit HalfCheetah(const EnvOptions& options);

 protected:
  void observe_row(const Row& row, double* out) const override;
  Outcome outcome(const Row& before, const Row& after, const float* action) const override;
};

// Hopper-v5 and Walker2d-v5: one body of rules, two models and health ranges.
class PlanarWalker : public MujocoEnv {
 protected:
  struct HealthRanges {
    double min_z, max_z, min_angle, max_angle;
    bool check_state;  // Hopper also bounds (qpos, qvel)[2:] to (-100, 100)
  };
  PlanarWalker(Task task, HealthRanges health, const EnvOptions& options);

  void observe_row(const Row& row, double* out) const override;
  Outcome outcome(const Row& before, const Row& after, const float* action) const override;

 private:
  bool is_healthy(const Row& row) const;
  HealthRanges health_;
};

class Hopper : public PlanarWalker {
 public:
  explicit Hopper(const EnvOptions& options);
};

class Walker2d : public PlanarWalker {
 public:
  explicit Walker2d(const EnvOptions& options);
};

class Ant : public MujocoEnv {
 public:
  explicit Ant(const EnvOptions& options);

 protected:
  void observe_row(const Row& row, double* out) const override;
  Outcome outcome(const Row& before, const Row& after, const float* action) const override;
  void cache(const mjData_* data, double* cached) const override;

 private:
  int64_t nbody_;
};

class Humanoid : public MujocoEnv {
 public:
  explicit Humanoid(const EnvOptions& options);

 protected:
  void observe_row(const Row& row, double* out) const override;
  Outcome outcome(const Row& before, const Row& after, const float* action) const override;
  void cache(const mjData_* data, double* cached) const override;

 private:
  double total_mass_ = 0;
};

}  // namespace tdp::env
