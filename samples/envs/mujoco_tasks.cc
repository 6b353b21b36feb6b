#include "samples/envs/mujoco_tasks.h"

#include <mujoco/mujoco.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace tdp::env {
namespace {

// np.sum over n values in NumPy's order (pairwise summation: eight interleaved accumulators for
// blocks of up to 128 values, halves above), in T's arithmetic. Gymnasium's costs are
// np.sum(np.square(x)); on a float32 action NumPy sums in float32, whose rounding depends on
// the order: matching it keeps rewards equal to Gymnasium's, not merely close.
template <typename T>
T numpy_sum(const T* a, int64_t n) {
  if (n < 8) {
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += a[i];
    return sum;
  }
  if (n <= 128) {
    T r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    int64_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    T sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) sum += a[i];
    return sum;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return numpy_sum(a, half) + numpy_sum(a + half, n - half);
}

// weight * np.sum(np.square(action)) for a float32 action: NumPy keeps float32 throughout
// (the Python float weight is cast to float32).
double control_cost(double weight, const float* action, int64_t n) {
  float squares[64];
  if (n > 64) throw std::logic_error("control_cost: more than 64 actuators");
  for (int64_t j = 0; j < n; ++j) squares[j] = action[j] * action[j];
  return static_cast<double>(static_cast<float>(weight) * numpy_sum(squares, n));
}

void require_sizes(const MujocoEnv& env, int64_t nq, int64_t nv, int64_t nu) {
  if (env.nq() != nq || env.nv() != nv || env.nu() != nu) {
    throw std::runtime_error(env.name() + ": " + env.model_path() + " has nq, nv, nu = " +
                             std::to_string(env.nq()) + ", " + std::to_string(env.nv()) + ", " +
                             std::to_string(env.nu()) + "; Gymnasium's model has " + std::to_string(nq) +
                             ", " + std::to_string(nv) + ", " + std::to_string(nu));
  }
}

constexpr double kForwardRewardWeight = 1.0;
constexpr double kHealthyReward = 1.0;

}  // namespace

// ---- HalfCheetah-v5 ----------------------------------------------------------------------------

HalfCheetah::HalfCheetah(const EnvOptions& options)
    : MujocoEnv(MujocoEnv::Task{/*name=*/"HalfCheetah-v5", /*model_file=*/"half_cheetah.xml", /*frame_skip=*/5, /*reset_noise_scale=*/0.1,
                 /*normal_qvel_noise=*/true, /*observation_dim=*/17, /*cached_dim=*/0},
                options) {
  require_sizes(*this, 9, 9, 6);
}

void HalfCheetah::observe_row(const Row& row, double* out) const {
  out = std::copy(row.qpos + 1, row.qpos + nq(), out);
  std::copy(row.qvel, row.qvel + nv(), out);
}

MujocoEnv::Outcome HalfCheetah::outcome(const Row& before, const Row& after, const float* action) const {
  const double x_velocity = (after.qpos[0] - before.qpos[0]) / dt();
  const double forward_reward = kForwardRewardWeight * x_velocity;
  return {forward_reward - control_cost(0.1, action, nu()), false};
}

// ---- Hopper-v5 and Walker2d-v5 -----------------------------------------------------------------

PlanarWalker::PlanarWalker(Task task, HealthRanges health, const EnvOptions& options)
    : MujocoEnv(std::move(task), options), health_(health) {}

void PlanarWalker::observe_row(const Row& row, double* out) const {
  out = std::copy(row.qpos + 1, row.qpos + nq(), out);
  for (int64_t j = 0; j < nv(); ++j) out[j] = std::clamp(row.qvel[j], -10.0, 10.0);
}

bool PlanarWalker::is_healthy(const Row& row) const {
  const double z = row.qpos[1];
  const double angle = row.qpos[2];
  bool healthy = health_.min_z < z && z < health_.max_z && health_.min_angle < angle && angle < health_.max_angle;
  if (health_.check_state) {
    // state_vector()[2:]: qpos[2:] then qvel.
    for (int64_t j = 2; j < nq(); ++j) healthy = healthy && -100.0 < row.qpos[j] && row.qpos[j] < 100.0;
    for (int64_t j = 0; j < nv(); ++j) healthy = healthy && -100.0 < row.qvel[j] && row.qvel[j] < 100.0;
  }
  return healthy;
}

MujocoEnv::Outcome PlanarWalker::outcome(const Row& before, const Row& after, const float* action) const {
  const double x_velocity = (after.qpos[0] - before.qpos[0]) / dt();
  const bool healthy = is_healthy(after);
  const double rewards = kForwardRewardWeight * x_velocity + (healthy ? kHealthyReward : 0.0);
  return {rewards - control_cost(1e-3, action, nu()), !healthy};
}

Hopper::Hopper(const EnvOptions& options)
    : PlanarWalker(MujocoEnv::Task{/*name=*/"Hopper-v5", /*model_file=*/"hopper.xml", /*frame_skip=*/4, /*reset_noise_scale=*/5e-3,
                 /*normal_qvel_noise=*/false, /*observation_dim=*/11, /*cached_dim=*/0},
                   HealthRanges{/*min_z=*/0.7, /*max_z=*/std::numeric_limits<double>::infinity(),
                                /*min_angle=*/-0.2, /*max_angle=*/0.2, /*check_state=*/true},
                   options) {
  require_sizes(*this, 6, 6, 3);
}

Walker2d::Walker2d(const EnvOptions& options)
    : PlanarWalker(MujocoEnv::Task{/*name=*/"Walker2d-v5", /*model_file=*/"walker2d_v5.xml", /*frame_skip=*/4, /*reset_noise_scale=*/5e-3,
                 /*normal_qvel_noise=*/false, /*observation_dim=*/17, /*cached_dim=*/0},
                   HealthRanges{/*min_z=*/0.8, /*max_z=*/2.0, /*min_angle=*/-1.0, /*max_angle=*/1.0,
                                /*check_state=*/false},
                   options) {
  require_sizes(*this, 9, 9, 6);
}

// ---- Ant-v5 ------------------------------------------------------------------------------------

namespace {
constexpr int64_t kAntBodies = 14;  // the world and 13 bodies
constexpr int kAntMainBody = 1;     // the torso: Gymnasium's main_body
}  // namespace

Ant::Ant(const EnvOptions& options)
    : MujocoEnv(MujocoEnv::Task{/*name=*/"Ant-v5", /*model_file=*/"ant.xml", /*frame_skip=*/5, /*reset_noise_scale=*/0.1,
                 /*normal_qvel_noise=*/true, /*observation_dim=*/13 + 14 + (kAntBodies - 1) * 6, /*cached_dim=*/2 + kAntBodies * 6},
                options),
      nbody_(model()->nbody) {
  require_sizes(*this, 15, 14, 8);
  if (nbody_ != kAntBodies) {
    throw std::runtime_error(name() + ": " + model_path() + " has " + std::to_string(nbody_) +
                             " bodies; Gymnasium's ant.xml has " + std::to_string(kAntBodies));
  }
}

void Ant::cache(const mjData* data, double* cached) const {
  // The torso's xy as mjData holds it (after a step: where the last substep's forward pass put
  // it, which is what Gymnasium differentiates) and the contact forces.
  cached[0] = data->xpos[3 * kAntMainBody];
  cached[1] = data->xpos[3 * kAntMainBody + 1];
  std::copy(data->cfrc_ext, data->cfrc_ext + 6 * nbody_, cached + 2);
}

void Ant::observe_row(const Row& row, double* out) const {
  out = std::copy(row.qpos + 2, row.qpos + nq(), out);
  out = std::copy(row.qvel, row.qvel + nv(), out);
  const double* forces = row.cached + 2;
  for (int64_t j = 6; j < 6 * nbody_; ++j) *out++ = std::clamp(forces[j], -1.0, 1.0);
}

MujocoEnv::Outcome Ant::outcome(const Row& before, const Row& after, const float* action) const {
  const double x_velocity = (after.cached[0] - before.cached[0]) / dt();
  bool finite = true;
  for (int64_t j = 0; j < nq(); ++j) finite = finite && std::isfinite(after.qpos[j]);
  for (int64_t j = 0; j < nv(); ++j) finite = finite && std::isfinite(after.qvel[j]);
  const double z = after.qpos[2];
  const bool healthy = finite && 0.2 <= z && z <= 1.0;
  double squares[6 * kAntBodies];
  for (int64_t j = 0; j < 6 * nbody_; ++j) {
    const double force = std::clamp(after.cached[2 + j], -1.0, 1.0);
    squares[j] = force * force;
  }
  const double contact_cost = 5e-4 * numpy_sum(squares, 6 * nbody_);
  const double rewards = x_velocity * kForwardRewardWeight + (healthy ? kHealthyReward : 0.0);
  const double costs = control_cost(0.5, action, nu()) + contact_cost;
  return {rewards - costs, !healthy};
}

// ---- Humanoid-v5 -------------------------------------------------------------------------------

namespace {
constexpr int64_t kHumanoidBodies = 14;  // the world and 13 bodies
// The cached row: the mass centre's xy, then cinert, cvel, qfrc_actuator and cfrc_ext of every
// body as mjData holds them after the step (the last substep's forward pass, which is what
// Gymnasium reads).
constexpr int64_t kCinert = 2, kCvel = kCinert + 10 * kHumanoidBodies, kQfrc = kCvel + 6 * kHumanoidBodies;
constexpr int64_t kHumanoidNv = 23;
constexpr int64_t kCfrc = kQfrc + kHumanoidNv, kHumanoidCached = kCfrc + 6 * kHumanoidBodies;
}  // namespace

Humanoid::Humanoid(const EnvOptions& options)
    : MujocoEnv(MujocoEnv::Task{/*name=*/"Humanoid-v5", /*model_file=*/"humanoid.xml", /*frame_skip=*/5,
                                /*reset_noise_scale=*/1e-2, /*normal_qvel_noise=*/false,
                                /*observation_dim=*/22 + 23 + 13 * 10 + 13 * 6 + 17 + 13 * 6,
                                /*cached_dim=*/kHumanoidCached},
                options) {
  require_sizes(*this, 24, kHumanoidNv, 17);
  if (model()->nbody != kHumanoidBodies) {
    throw std::runtime_error(name() + ": " + model_path() + " has " + std::to_string(model()->nbody) +
                             " bodies; Gymnasium's humanoid.xml has " + std::to_string(kHumanoidBodies));
  }
  for (int64_t b = 0; b < kHumanoidBodies; ++b) total_mass_ += model()->body_mass[b];
}

void Humanoid::cache(const mjData* data, double* cached) const {
  // Gymnasium's mass_center: sum_b body_mass[b] * xipos[b] / sum_b body_mass[b].
  for (int j = 0; j < 2; ++j) {
    double weighted = 0;
    for (int64_t b = 0; b < kHumanoidBodies; ++b) weighted += model()->body_mass[b] * data->xipos[3 * b + j];
    cached[j] = weighted / total_mass_;
  }
  std::copy(data->cinert, data->cinert + 10 * kHumanoidBodies, cached + kCinert);
  std::copy(data->cvel, data->cvel + 6 * kHumanoidBodies, cached + kCvel);
  std::copy(data->qfrc_actuator, data->qfrc_actuator + kHumanoidNv, cached + kQfrc);
  std::copy(data->cfrc_ext, data->cfrc_ext + 6 * kHumanoidBodies, cached + kCfrc);
}

void Humanoid::observe_row(const Row& row, double* out) const {
  out = std::copy(row.qpos + 2, row.qpos + nq(), out);
  out = std::copy(row.qvel, row.qvel + nv(), out);
  out = std::copy(row.cached + kCinert + 10, row.cached + kCvel, out);  // bodies 1.. (not the world)
  out = std::copy(row.cached + kCvel + 6, row.cached + kQfrc, out);
  out = std::copy(row.cached + kQfrc + 6, row.cached + kCfrc, out);      // the actuated joints
  std::copy(row.cached + kCfrc + 6, row.cached + kHumanoidCached, out);
}

MujocoEnv::Outcome Humanoid::outcome(const Row& before, const Row& after, const float* action) const {
  const double x_velocity = (after.cached[0] - before.cached[0]) / dt();
  const double z = after.qpos[2];
  const bool healthy = 1.0 < z && z < 2.0;
  // Gymnasium's control cost reads data.ctrl: the clipped action in float64.
  double ctrl[64];
  for (int64_t j = 0; j < nu(); ++j) ctrl[j] = static_cast<double>(action[j]) * static_cast<double>(action[j]);
  double squares[6 * kHumanoidBodies];
  for (int64_t j = 0; j < 6 * kHumanoidBodies; ++j) squares[j] = after.cached[kCfrc + j] * after.cached[kCfrc + j];
  const double contact_cost = std::min(5e-7 * numpy_sum(squares, 6 * kHumanoidBodies), 10.0);
  const double rewards = 1.25 * x_velocity + (healthy ? 5.0 : 0.0);
  const double costs = 0.1 * numpy_sum(ctrl, nu()) + contact_cost;
  return {rewards - costs, !healthy};
}

}  // namespace tdp::env
