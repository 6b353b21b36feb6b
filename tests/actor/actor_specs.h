// Specs the actor tests share: a small categorical policy (an MLP's logits, then a categorical
// head writing its sample and log-prob), freshly initialized from a seed.
#pragma once

namespace tdp::actor::test_specs {

inline constexpr const char* kCategorical = R"pb(
  name: "test_categorical" version: "1" init_seed: 3
  inputs { key: "observation" shape: [4] }
  output_keys: ["action", "action_log_prob"]
  module { probabilistic_sequential {
    modules { network { in_keys: ["observation"] out_keys: ["logits"]
                        network { mlp { in_features: 4 hidden_sizes: [16] out_features: 2 } } } }
    modules { probabilistic { in_keys: ["logits"] out_keys: ["action"] distribution: "categorical"
                              return_log_prob: true } } } }
)pb";

}  // namespace tdp::actor::test_specs
