// GeneratorGuard: chooses the random stream that probabilistic modules draw from in the
// calling thread, for modules that have no generator of their own (no `generator`/`seed`
// option and no `generator_key` entry). Without a guard they draw from LibTorch's default
// generator. This is how an actor gives each simulator thread its own reproducible stream
// without changing the modules it shares.
//
//   at::Generator mine = at::detail::createCPUGenerator(/*seed=*/7);
//   {
//     tdp::nn::GeneratorGuard scope(mine);
//     policy->forward(td);                 // samples from `mine`
//   }
#pragma once

#include <ATen/core/Generator.h>

#include <optional>

namespace tdp::nn {

// The generator of the innermost GeneratorGuard alive in this thread, if any.
std::optional<at::Generator> scoped_generator();

class GeneratorGuard {
 public:
  explicit GeneratorGuard(at::Generator generator);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  std::optional<at::Generator> previous_;
};

}  // namespace tdp::nn
