// Specs the actor tests share, freshly initialized from a seed: a small categorical policy (an
// MLP's logits, then a categorical head writing its sample and log-prob) and a recurrent one (a
// GRU cell carrying "hidden" between calls).
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

inline constexpr const char* kRecurrent = R"pb(
  name: "test_gru" version: "1" init_seed: 5
  inputs { key: "observation" shape: [4] }
  inputs { key: "hidden" shape: [8] }
  output_keys: ["action"]
  module { sequential {
    modules { overwrite_keys: ["hidden"]
              network { in_keys: ["observation", "hidden"] out_keys: ["hidden"]
                        network { gru_cell { input_size: 4 hidden_size: 8 } } } }
    modules { network { in_keys: ["hidden"] out_keys: ["action"]
                        network { linear { in_features: 8 out_features: 2 } } } } } }
)pb";

}  // namespace tdp::actor::test_specs
