// Skip-existing mode: while it is on, a tensordict module whose out_keys are all present in
// the input TensorDict returns it untouched instead of recomputing them (Python's
// tensordict.nn.set_skip_existing / skip_existing). It lets a rollout reuse values that an
// earlier stage already wrote, e.g. a value estimate computed once per batch.
//
//   {
//     tdp::nn::SkipExistingGuard guard(true);        // like `with set_skip_existing(True):`
//     policy(td);                                     // modules whose outputs exist are skipped
//   }                                                 // previous mode restored here
//   tdp::nn::SkipExistingGuard only({"value"}, /*thread_local_=*/true);  // this thread, one key
//
// Rules (as in tensordict): a module is skipped when the mode is on, every one of its
// out_keys is in the TensorDict, and none of its out_keys is also one of its in_keys (a module
// that updates a key in place must always run). With a list of keys, a module is skipped only
// if, in addition, all its out_keys are in that list.
// A global guard changes the mode for every thread that has no thread-local guard active; a
// thread-local guard changes it for its own thread only and wins over the global mode there.
// Guards nest and restore what they replaced, so destroy them in reverse order (RAII does).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sdk/tensordict/nested_key.h"

namespace tdp::nn {

class SkipExistingMode {
 public:
  // Off: modules always run.
  SkipExistingMode() = default;
  SkipExistingMode(bool on) : on_(on) {}  // NOLINT: implicit, like Python's True/False
  // On, restricted to these keys.
  SkipExistingMode(std::vector<NestedKey> keys)  // NOLINT
      : on_(true), keys_(std::move(keys)) {}
  SkipExistingMode(std::initializer_list<NestedKey> keys)  // NOLINT
      : on_(true), keys_(std::vector<NestedKey>(keys)) {}

  bool is_on() const { return on_; }
  explicit operator bool() const { return on_; }
  // The keys that may be reused, when the mode is restricted to a list.
  const std::optional<std::vector<NestedKey>>& keys() const { return keys_; }
  // Whether a module with these keys may skip, given which of out_keys the input holds.
  bool allows(const std::vector<NestedKey>& in_keys, const std::vector<NestedKey>& out_keys) const;

  std::string to_string() const;  // False, True or ['a', ('b', 'c')]
  friend bool operator==(const SkipExistingMode& a, const SkipExistingMode& b) {
    return a.on_ == b.on_ && a.keys_ == b.keys_;
  }
  friend bool operator!=(const SkipExistingMode& a, const SkipExistingMode& b) { return !(a == b); }

 private:
  bool on_ = false;
  std::optional<std::vector<NestedKey>> keys_;
};

// The mode in effect for the calling thread: its innermost thread-local guard, else the
// innermost global guard, else off.
SkipExistingMode skip_existing();

// True when the calling thread's mode is on. Cheaper than skip_existing() (no copy); modules
// call it on every forward.
bool skip_existing_enabled();

class SkipExistingGuard {
 public:
  explicit SkipExistingGuard(SkipExistingMode mode, bool thread_local_ = false);
  SkipExistingGuard(std::initializer_list<NestedKey> keys, bool thread_local_ = false)
      : SkipExistingGuard(SkipExistingMode(keys), thread_local_) {}
  ~SkipExistingGuard();
  SkipExistingGuard(const SkipExistingGuard&) = delete;
  SkipExistingGuard& operator=(const SkipExistingGuard&) = delete;

 private:
  SkipExistingMode mode_;
  bool thread_local_;
  const SkipExistingMode* previous_thread_mode_ = nullptr;
  std::optional<SkipExistingMode> previous_global_mode_;
};

}  // namespace tdp::nn
