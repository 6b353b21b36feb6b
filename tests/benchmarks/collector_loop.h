// The Collector benchmarks' loop, shared by envs_benchmark (CartPole) and mujoco_benchmark (the
// MuJoCo tasks): `env` and the policy at `spec_path` through a tdp::env::Collector, batches of
// 2048 frames (as the PPO samples collect), the batch's assembly included; items_per_second is
// frames per second.
#pragma once

#include <benchmark/benchmark.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "sdk/actor/actor.h"
#include "sdk/env/batched_env.h"
#include "sdk/env/collector.h"

namespace tdp::env {

inline void collect_batches(benchmark::State& state, std::shared_ptr<BatchedEnv> env, const std::string& spec_path) {
  constexpr int64_t kFramesPerBatch = 2048;
  auto actor =
      actor::Actor::load(spec_path, actor::ActorOptions().seed(0).interaction_type(nn::InteractionType::kRandom));
  if (!actor.ok()) {
    state.SkipWithError(std::string(actor.status().message()).c_str());
    return;
  }
  Collector collector(std::move(env), std::shared_ptr<actor::Actor>(std::move(*actor)),
                      CollectorOptions(kFramesPerBatch));
  for (auto _ : state) {
    std::optional<TensorDict> batch = collector.next();
    benchmark::DoNotOptimize(batch);
  }
  state.SetItemsProcessed(state.iterations() * kFramesPerBatch);
}

}  // namespace tdp::env
