#include "samples/agents/episodes.h"

#include <ATen/Functions.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <cmath>
#include <string>

namespace tdp::agents {

double EpisodeStats::mean_return() const {
  if (returns.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(returns.begin(), returns.end(), 0.0) / static_cast<double>(returns.size());
}

double EpisodeStats::std_return() const {
  if (returns.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  const double mean = mean_return();
  double sum = 0;
  for (double r : returns) sum += (r - mean) * (r - mean);
  return std::sqrt(sum / static_cast<double>(returns.size() - 1));
}

double EpisodeStats::min_return() const {
  if (returns.empty()) return std::numeric_limits<double>::quiet_NaN();
  return *std::min_element(returns.begin(), returns.end());
}

double EpisodeStats::max_return() const {
  if (returns.empty()) return std::numeric_limits<double>::quiet_NaN();
  return *std::max_element(returns.begin(), returns.end());
}

double EpisodeStats::steps_per_second() const {
  return seconds > 0 ? static_cast<double>(env_steps) / seconds : 0.0;
}

EpisodeStats run_episodes(env::BatchedEnv& env, const ActFn& act, int64_t num_episodes, uint64_t seed,
                          const std::function<void(const at::Tensor& done)>& on_done) {
  if (num_episodes <= 0) {
    throw std::invalid_argument("run_episodes: num_episodes must be positive, got " +
                                std::to_string(num_episodes));
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = env.num_envs();
  std::vector<int64_t> quota(n), recorded(n, 0);
  for (int64_t i = 0; i < n; ++i) quota[i] = num_episodes / n + (i < num_episodes % n ? 1 : 0);

  std::vector<NestedKey> observation_keys;
  for (const env::EntrySpec& entry : env.observation_spec()) observation_keys.push_back(entry.key);

  EpisodeStats stats;
  stats.returns.reserve(num_episodes);
  TensorDict observation = env.reset(seed);
  // Returns accumulate as a tensor so that steps where nothing finishes never leave it.
  at::Tensor running = at::zeros({n}, at::kDouble);
  while (static_cast<int64_t>(stats.returns.size()) < num_episodes) {
    TensorDict out = env.step(act(observation));
    stats.env_steps += n;
    running.add_(out.get("reward").reshape({n}).to(at::kDouble));
    const at::Tensor done = out.get("done").reshape({n});
    if (done.any().item<bool>()) {
      const at::Tensor finished = done.contiguous();
      const bool* is_done = finished.data_ptr<bool>();
      const at::Tensor totals = running.contiguous();
      const double* total = totals.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i) {
        if (is_done[i] && recorded[i] < quota[i]) {
          stats.returns.push_back(total[i]);
          ++recorded[i];
        }
      }
      running.masked_fill_(done, 0.0);
    }
    if (on_done) on_done(done);
    observation = out.select(observation_keys);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

EpisodeStats run_episodes(env::BatchedEnv& env, actor::Actor& actor, nn::InteractionType type,
                          int64_t num_episodes, uint64_t seed) {
  // State kept from an earlier run belongs to episodes env.reset(seed) is about to discard.
  actor.reset();
  return run_episodes(
      env, [&](const TensorDict& observation) { return actor.act(observation, type); }, num_episodes, seed,
      [&](const at::Tensor& done) { actor.reset(done); });
}

}  // namespace tdp::agents
