#include "sdk/probabilistic/generator_scope.h"

#include <utility>

namespace tdp::nn {
namespace {
thread_local std::optional<at::Generator> thread_generator;
}  // namespace

std::optional<at::Generator> scoped_generator() { return thread_generator; }

GeneratorGuard::GeneratorGuard(at::Generator generator) : previous_(std::move(thread_generator)) {
  thread_generator = std::move(generator);
}

GeneratorGuard::~GeneratorGuard() { thread_generator = std::move(previous_); }

}  // namespace tdp::nn
