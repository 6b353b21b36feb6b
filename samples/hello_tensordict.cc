// A first look at tdpolicy's TensorDict: build a nested batch of observations, slice it,
// stack it, and print each step the way Python's tensordict prints it.
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <iostream>

#include "sdk/tensordict/tensordict.h"

int main() {
  at::manual_seed(0);
  constexpr int64_t kEnvs = 4;

  // One simulator step for 4 environments: an observation, and a nested "next" entry.
  tdp::TensorDict step({{"observation", at::randn({kEnvs, 3})},
                        {"action", at::zeros({kEnvs, 1}, at::kLong)},
                        {{"next", "reward"}, at::ones({kEnvs, 1})},
                        {{"next", "done"}, at::zeros({kEnvs, 1}, at::kBool)}},
                       /*batch_size=*/{kEnvs});
  std::cout << "A step of " << kEnvs << " environments:\n" << step << "\n\n";

  // Batch indexing slices every entry at once, nested ones included.
  tdp::TensorDict first_two = step.index({at::indexing::Slice(0, 2)});
  std::cout << "The first two environments:\n" << first_two << "\n\n";

  // Stacking steps gives a trajectory with a time dimension in front.
  tdp::TensorDict trajectory = tdp::TensorDict::stack({step, step.clone(), step.clone()}, 0);
  std::cout << "Three steps stacked into a trajectory:\n" << trajectory << "\n\n";
  std::cout << "reward at t=2, env=1: " << trajectory.get({"next", "reward"}).index({2, 1}).item<float>()
            << "\n";
  return 0;
}
