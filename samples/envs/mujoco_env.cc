#include "samples/envs/mujoco_env.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gymnasium_assets.h>
#include <mujoco/mujoco.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tdp::env {
namespace {

std::string assets_directory() {
  const char* override_dir = std::getenv("TDP_MUJOCO_ASSETS");
  return override_dir != nullptr && *override_dir != '\0' ? override_dir : kGymnasiumMujocoAssets;
}

void check_joint_tensor(const std::string& env, const char* what, const at::Tensor& t, int64_t rows,
                        int64_t cols) {
  if (t.dim() != 2 || t.size(0) != rows || t.size(1) != cols || !at::isFloatingType(t.scalar_type())) {
    throw std::invalid_argument(env + ".state_from: " + what + " must be a floating tensor of shape [" +
                                std::to_string(rows) + ", " + std::to_string(cols) + "], got " +
                                c10::toString(t.scalar_type()) + " of shape " + shape_to_string(t.sizes()));
  }
}

}  // namespace

MujocoEnv::MujocoEnv(Task task, const EnvOptions& options)
    // MuJoCo computes in double: a float32 state would round the physics between steps.
    : BatchedEnv(EnvOptions(options).dtype(at::kDouble), /*default_max_episode_steps=*/1000),
      task_(std::move(task)),
      model_path_((std::filesystem::path(assets_directory()) / task_.model_file).string()) {
  char error[1000] = "";
  model_ = mj_loadXML(model_path_.c_str(), nullptr, error, sizeof(error));
  if (model_ == nullptr) {
    throw std::runtime_error(task_.name + ": cannot load the MuJoCo model " + model_path_ + ": " + error +
                             " (the model files are Gymnasium's: ./bazelw installs gymnasium into the venv; "
                             "TDP_MUJOCO_ASSETS names another directory)");
  }
  if (model_->na != 0) {
    // Actuator activations would be state too; none of Gymnasium's locomotion tasks has any.
    throw std::runtime_error(task_.name + ": " + model_path_ + " has actuator activations (na = " +
                             std::to_string(model_->na) + "), which MujocoEnv's state does not hold");
  }
  nq_ = model_->nq;
  nv_ = model_->nv;
  nu_ = model_->nu;
  if (nu_ > kMaxActuators) {
    throw std::runtime_error(task_.name + ": " + model_path_ + " has " + std::to_string(nu_) + " actuators, more than " +
                             std::to_string(kMaxActuators));
  }
  for (int64_t j = 0; j < nu_; ++j) {
    low_.push_back(static_cast<float>(model_->actuator_ctrlrange[2 * j]));
    high_.push_back(static_cast<float>(model_->actuator_ctrlrange[2 * j + 1]));
  }
  data_.reserve(num_envs());
  for (int64_t i = 0; i < num_envs(); ++i) {
    mjData* data = mj_makeData(model_);
    if (data == nullptr) throw std::runtime_error(task_.name + ": mj_makeData failed");
    data_.push_back(data);
  }
}

MujocoEnv::~MujocoEnv() {
  for (mjData* data : data_) mj_deleteData(data);
  if (model_ != nullptr) mj_deleteModel(model_);
}

at::Tensor MujocoEnv::init_qpos() const {
  return at::from_blob(model_->qpos0, {nq_}, at::kDouble).clone();
}

double MujocoEnv::dt() const { return model_->opt.timestep * task_.frame_skip; }

std::vector<EntrySpec> MujocoEnv::observation_spec() const {
  EntrySpec spec;
  spec.key = "observation";
  spec.shape = {task_.observation_dim};
  spec.dtype = observation_dtype();
  spec.low.assign(task_.observation_dim, -std::numeric_limits<double>::infinity());
  spec.high.assign(task_.observation_dim, std::numeric_limits<double>::infinity());
  return {spec};
}

std::vector<EntrySpec> MujocoEnv::action_spec() const {
  EntrySpec spec;
  spec.key = "action";
  spec.shape = {nu_};
  spec.dtype = at::kFloat;
  // Gymnasium's action space: the ctrlrange, as float32.
  spec.low.assign(low_.begin(), low_.end());
  spec.high.assign(high_.begin(), high_.end());
  return {spec};
}

void MujocoEnv::cache(const mjData* /*data*/, double* /*cached*/) const {}

void MujocoEnv::load(const double* row, mjData* data) const {
  mju_copy(data->qpos, row, nq_);
  mju_copy(data->qvel, row + nq_, nv_);
  mju_copy(data->qacc_warmstart, row + nq_ + nv_, nv_);
}

void MujocoEnv::store(const mjData* data, double* row) const {
  mju_copy(row, data->qpos, nq_);
  mju_copy(row + nq_, data->qvel, nv_);
  mju_copy(row + nq_ + nv_, data->qacc_warmstart, nv_);
  cache(data, row + nq_ + 2 * nv_);
}

at::Tensor MujocoEnv::state_from(const at::Tensor& qpos, const at::Tensor& qvel) {
  check_joint_tensor(name(), "qpos", qpos, num_envs(), nq_);
  check_joint_tensor(name(), "qvel", qvel, num_envs(), nv_);
  const at::Tensor q = qpos.to(at::kDouble).contiguous();
  const at::Tensor v = qvel.to(at::kDouble).contiguous();
  at::Tensor state = at::empty({num_envs(), state_dim()}, at::kDouble);
  const double* q_data = q.data_ptr<double>();
  const double* v_data = v.data_ptr<double>();
  double* out = state.data_ptr<double>();
  at::parallel_for(0, num_envs(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      mjData* data = data_[i];
      mj_resetData(model_, data);
      mju_copy(data->qpos, q_data + i * nq_, nq_);
      mju_copy(data->qvel, v_data + i * nv_, nv_);
      mj_forward(model_, data);
      store(data, out + i * state_dim());
    }
  });
  return state;
}

at::Tensor MujocoEnv::initial_state(int64_t n) {
  const double scale = task_.reset_noise_scale;
  at::Tensor qpos = init_qpos().unsqueeze(0) + at::empty({n, nq_}, at::kDouble).uniform_(-scale, scale, generator());
  // Gymnasium's init_qvel is mjData's qvel after mj_makeData: zeros.
  at::Tensor qvel = task_.normal_qvel_noise
                        ? at::empty({n, nv_}, at::kDouble).normal_(0.0, 1.0, generator()) * scale
                        : at::empty({n, nv_}, at::kDouble).uniform_(-scale, scale, generator());
  return state_from(qpos, qvel);
}

at::Tensor MujocoEnv::observe(const at::Tensor& state) const {
  const at::Tensor rows = state.contiguous();
  const int64_t width = task_.observation_dim;
  // Computed in double, as Gymnasium computes it, and stored in the observation dtype.
  at::Tensor observation = at::empty({rows.size(0), width}, observation_dtype());
  const double* in = rows.data_ptr<double>();
  if (observation_dtype() == at::kDouble) {
    double* out = observation.data_ptr<double>();
    for (int64_t i = 0; i < rows.size(0); ++i) observe_row(row_of(in + i * state_dim()), out + i * width);
  } else {
    float* out = observation.data_ptr<float>();
    std::vector<double> row(width);
    for (int64_t i = 0; i < rows.size(0); ++i) {
      observe_row(row_of(in + i * state_dim()), row.data());
      std::copy(row.begin(), row.end(), out + i * width);
    }
  }
  return observation;
}

MujocoEnv::Transition MujocoEnv::transition(const at::Tensor& state, const TensorDict& action_td) {
  const at::Tensor rows = state.contiguous();
  const at::Tensor actions = action_td.get("action").contiguous();
  at::Tensor next_state = at::empty_like(rows);
  at::Tensor reward = at::empty({num_envs(), 1}, observation_dtype());  // the dtype step() returns
  at::Tensor terminated = at::empty({num_envs(), 1}, at::kBool);
  const double* in = rows.data_ptr<double>();
  const float* action = actions.data_ptr<float>();
  double* out = next_state.data_ptr<double>();
  double* reward_double = observation_dtype() == at::kDouble ? reward.data_ptr<double>() : nullptr;
  float* reward_float = observation_dtype() == at::kDouble ? nullptr : reward.data_ptr<float>();
  bool* terminated_out = terminated.data_ptr<bool>();
  at::parallel_for(0, num_envs(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      mjData* data = data_[i];
      const double* before = in + i * state_dim();
      // BatchedEnv's contract, and Gymnasium's ClipAction: the action is clipped to its bounds
      // (in float32, as np.clip on the float32 action) before the step and its control cost.
      float a[kMaxActuators];
      for (int64_t j = 0; j < nu_; ++j) a[j] = std::clamp(action[i * nu_ + j], low_[j], high_[j]);
      load(before, data);
      for (int64_t j = 0; j < nu_; ++j) data->ctrl[j] = a[j];
      for (int k = 0; k < task_.frame_skip; ++k) mj_step(model_, data);
      // Gymnasium computes the contact forces (cfrc_ext) after every step: without a force
      // sensor, mj_step leaves them stale.
      mj_rnePostConstraint(model_, data);
      double* after = out + i * state_dim();
      store(data, after);
      const Outcome o = outcome(row_of(before), row_of(after), a);
      if (reward_double != nullptr) {
        reward_double[i] = o.reward;
      } else {
        reward_float[i] = static_cast<float>(o.reward);
      }
      terminated_out[i] = o.terminated;
    }
  });
  return {std::move(next_state), std::move(reward), std::move(terminated)};
}

}  // namespace tdp::env
