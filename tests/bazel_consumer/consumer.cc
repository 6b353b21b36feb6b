// A program in another Bazel workspace that uses tdpolicy through @tdpolicy: it loads a policy
// with the C++ Actor and with the C API, acts on the same observations, and checks that both
// agree (random draws from the same seed). Exit status 0 when they do; 1 with the error otherwise.
//   ../../bazelw run //:consumer -- SPEC     (default: tdpolicy's policies/cartpole_categorical.pbtxt)
#include <ATen/ATen.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/c/tdp_c.h"
#include "sdk/tensordict/tensordict.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: consumer SPEC\n";
    return 2;
  }
  const std::string spec = argv[1];
  const int64_t batch = 4;  // random draws from the same seed: the same actions either way
  std::vector<float> obs = {0.01f, 0.2f, -0.03f, 0.1f, -0.2f, 0.0f, 0.05f, -0.4f,
                            0.3f,  0.1f, 0.02f,  0.0f, 0.0f,  -0.1f, -0.04f, 0.2f};

  auto actor = tdp::actor::Actor::load(spec, tdp::actor::ActorOptions().seed(5));
  if (!actor.ok()) {
    std::cerr << "consumer: " << actor.status() << "\n";
    return 1;
  }
  tdp::TensorDict td({{"observation", at::from_blob(obs.data(), {batch, 4}, at::kFloat)}}, {batch});
  at::Tensor cpp_action = (*actor)->act(td, tdp::nn::InteractionType::kRandom).get("action");

  tdp_actor_options* options = nullptr;
  tdp_actor* c_actor = nullptr;
  tdp_options_create(&options);
  tdp_options_set_seed(options, 5);
  tdp_status status = tdp_actor_load(spec.c_str(), options, &c_actor);
  tdp_options_free(options);
  if (status != TDP_OK) {
    std::cerr << "consumer: " << tdp_last_error() << "\n";
    return 1;
  }
  std::vector<int64_t> c_action(batch);
  tdp_input in[] = {{"observation", TDP_FLOAT32, obs.data(), obs.size()}};
  tdp_output out[] = {{"action", TDP_INT64, c_action.data(), c_action.size()}};
  status = tdp_actor_act(c_actor, batch, in, 1, out, 1, TDP_INTERACTION_RANDOM);
  tdp_actor_free(c_actor);
  if (status != TDP_OK) {
    std::cerr << "consumer: " << tdp_last_error() << "\n";
    return 1;
  }
  if (!at::equal(cpp_action, at::from_blob(c_action.data(), {batch}, at::kLong))) {
    std::cerr << "consumer: the C++ Actor and the C API disagree: " << cpp_action << " vs " << c_action[0] << "...\n";
    return 1;
  }
  std::cout << "consumer: " << spec << " through @tdpolicy: actions";
  for (int64_t a : c_action) std::cout << " " << a;
  std::cout << " (C++ Actor and C API agree)\n";
  return 0;
}
