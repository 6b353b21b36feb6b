// Gymnasium's MuJoCo tasks and the C++ ones (samples/envs/mujoco_tasks.h) step for step: every
// reset of gymnasium_mujoco_reference.py is replayed with reset_to(state_from(qpos, qvel)), every
// action is given to both, and the observations, rewards, terminated and truncated flags must be
// equal to 1e-9 in float64. The reference files are made at test time from the venv's
// Gymnasium (gymnasium_reference_test.sh), so the test follows the installed packages.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "samples/envs/mujoco_tasks.h"

namespace tdp::env {
namespace {

constexpr double kTolerance = 1e-9;

std::vector<double> read_reference(const std::string& task) {
  const char* dir = std::getenv("TDP_GYMNASIUM_REFERENCE_DIR");
  if (dir == nullptr) {
    ADD_FAILURE() << "TDP_GYMNASIUM_REFERENCE_DIR is not set (run through gymnasium_reference_test.sh)";
    return {};
  }
  const std::string path = std::string(dir) + "/" + task + ".f64";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  std::vector<double> values(static_cast<size_t>(in.tellg()) / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), values.size() * sizeof(double));
  return values;
}

// Reads the reference stream value by value.
class Reader {
 public:
  explicit Reader(std::vector<double> values) : values_(std::move(values)) {}
  bool done() const { return next_ >= values_.size(); }
  double value() { return values_.at(next_++); }
  at::Tensor row(int64_t n, at::ScalarType dtype = at::kDouble) {
    at::Tensor t = at::empty({1, n}, at::kDouble);
    for (int64_t j = 0; j < n; ++j) t[0][j] = value();
    return t.to(dtype);
  }

 private:
  std::vector<double> values_;
  size_t next_ = 0;
};

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

template <typename Task>
void expect_equal_to_gymnasium(const std::string& task_name) {
  Reader reference(read_reference(task_name));
  if (reference.done()) return;
  const int64_t nq = reference.value(), nv = reference.value(), nu = reference.value();
  const int64_t observation_dim = reference.value(), records = reference.value();
  Task env(EnvOptions(1).observation_dtype(at::kDouble));
  ASSERT_EQ(env.nq(), nq);
  ASSERT_EQ(env.nv(), nv);
  ASSERT_EQ(env.nu(), nu);
  ASSERT_EQ(env.observation_spec()[0].shape, std::vector<int64_t>{observation_dim});

  double worst_observation = 0, worst_reward = 0;
  int64_t steps = 0, resets = 0, terminations = 0, truncations = 0;
  for (int64_t r = 0; r < records; ++r) {
    const double kind = reference.value();
    if (kind == 0.0) {
      const at::Tensor qpos = reference.row(nq), qvel = reference.row(nv);
      const at::Tensor observation = reference.row(observation_dim);
      TensorDict td = env.reset_to(env.state_from(qpos, qvel));
      worst_observation = std::max(worst_observation, max_abs_diff(td.get("observation"), observation));
      ++resets;
      continue;
    }
    ASSERT_EQ(kind, 1.0) << task_name << ": record " << r << " is neither a reset nor a step";
    TensorDict action({1});
    action.set("action", reference.row(nu, at::kFloat));
    const at::Tensor observation = reference.row(observation_dim);
    const double reward = reference.value();
    const bool terminated = reference.value() != 0.0, truncated = reference.value() != 0.0;
    TensorDict out = env.step(action);
    const double observation_diff = max_abs_diff(out.get("final_observation"), observation);
    const double reward_diff = std::abs(out.get("reward").item<double>() - reward);
    ASSERT_LE(observation_diff, kTolerance) << task_name << " step " << steps;
    ASSERT_LE(reward_diff, kTolerance) << task_name << " step " << steps;
    ASSERT_EQ(out.get("terminated").item<bool>(), terminated) << task_name << " step " << steps;
    ASSERT_EQ(out.get("truncated").item<bool>(), truncated) << task_name << " step " << steps;
    worst_observation = std::max(worst_observation, observation_diff);
    worst_reward = std::max(worst_reward, reward_diff);
    terminations += terminated;
    truncations += truncated;
    ++steps;
  }
  EXPECT_LE(worst_observation, kTolerance);
  EXPECT_GE(steps, 1000);
  std::cout << task_name << ": " << steps << " steps, " << resets << " resets (" << terminations
            << " terminated, " << truncations << " truncated); max |obs diff| " << worst_observation
            << ", max |reward diff| " << worst_reward << "\n";
}

TEST(MujocoGymnasium, HalfCheetahEqualsGymnasiumStepForStep) {
  expect_equal_to_gymnasium<HalfCheetah>("HalfCheetah-v5");
}

TEST(MujocoGymnasium, HopperEqualsGymnasiumStepForStep) { expect_equal_to_gymnasium<Hopper>("Hopper-v5"); }

TEST(MujocoGymnasium, Walker2dEqualsGymnasiumStepForStep) {
  expect_equal_to_gymnasium<Walker2d>("Walker2d-v5");
}

TEST(MujocoGymnasium, AntEqualsGymnasiumStepForStep) { expect_equal_to_gymnasium<Ant>("Ant-v5"); }

TEST(MujocoGymnasium, HumanoidEqualsGymnasiumStepForStep) {
  expect_equal_to_gymnasium<Humanoid>("Humanoid-v5");
}

}  // namespace
}  // namespace tdp::env
