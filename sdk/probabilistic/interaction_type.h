// InteractionType: how a probabilistic module turns its distribution into a value (a random
// sample, the mode, the mean, ...), and the scopes that choose it, as tensordict's
// `InteractionType`, `interaction_type()` and `set_interaction_type`.
//
//   using tdp::nn::InteractionType;
//   {
//     tdp::nn::InteractionTypeGuard explore(InteractionType::kRandom);   // like `with set_interaction_type("random"):`
//     actor->forward(td);                                                 // samples
//   }
//   auto evaluate = tdp::nn::set_interaction_type(InteractionType::kMode, [&] { return actor->forward(td); });
//
// Outside any scope interaction_type() is empty and each module uses its
// default_interaction_type. A guard sets the process-wide value by default; with
// `thread_local_only` it sets a value for the calling thread alone, which wins over the
// process-wide one in that thread (so simulator threads can explore and evaluate side by side).
// Guards restore what they replaced when they end, so they nest.
#pragma once

#include <optional>
#include <string_view>
#include <utility>

namespace tdp::nn {

enum class InteractionType {
  kMode,
  kMedian,
  kMean,
  kRandom,
  // The distribution's deterministic_sample (falls back on mode or mean where it has none).
  kDeterministic,
};

// "mode", "median", "mean", "random", "deterministic", in any case. Unknown names throw
// std::invalid_argument listing the valid ones.
InteractionType interaction_type_from_str(std::string_view name);
// The lower-case name, as Python's InteractionType values.
std::string_view to_string(InteractionType type);

// The type in force for the calling thread: its thread-local setting if any, else the
// process-wide one; empty outside any scope.
std::optional<InteractionType> interaction_type();

class InteractionTypeGuard {
 public:
  // An empty `type` clears the setting inside the scope (as set_interaction_type(None)).
  explicit InteractionTypeGuard(std::optional<InteractionType> type, bool thread_local_only = false);
  ~InteractionTypeGuard();
  InteractionTypeGuard(const InteractionTypeGuard&) = delete;
  InteractionTypeGuard& operator=(const InteractionTypeGuard&) = delete;

 private:
  bool thread_local_only_;
  // What this guard replaced: for the thread-local slot, "unset" differs from "set to none".
  bool previous_was_set_;
  std::optional<InteractionType> previous_;
};

// Wraps `fn` so that every call runs inside InteractionTypeGuard(type): the decorator form.
template <typename Fn>
auto set_interaction_type(std::optional<InteractionType> type, Fn fn, bool thread_local_only = false) {
  return [type, thread_local_only, fn = std::move(fn)](auto&&... args) mutable {
    InteractionTypeGuard guard(type, thread_local_only);
    return fn(std::forward<decltype(args)>(args)...);
  };
}

}  // namespace tdp::nn
