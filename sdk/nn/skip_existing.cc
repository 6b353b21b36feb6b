#include "sdk/nn/skip_existing.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace tdp::nn {
namespace {

// The global mode changes rarely (guards) and is read on every module call, so readers first
// check an atomic flag and only take the mutex when the mode is on.
std::mutex global_mutex;
SkipExistingMode global_mode;  // guarded by global_mutex
std::atomic<bool> global_on{false};

// Points at the SkipExistingGuard::mode_ of this thread's innermost thread-local guard.
thread_local const SkipExistingMode* thread_mode = nullptr;

bool contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

}  // namespace

bool SkipExistingMode::allows(const std::vector<NestedKey>& in_keys,
                              const std::vector<NestedKey>& out_keys) const {
  if (!on_) return false;
  for (const NestedKey& key : out_keys) {
    if (contains(in_keys, key)) return false;
    if (keys_ && !contains(*keys_, key)) return false;
  }
  return true;
}

std::string SkipExistingMode::to_string() const {
  if (!on_) return "False";
  if (!keys_) return "True";
  return keys_to_string(*keys_);
}

SkipExistingMode skip_existing() {
  if (thread_mode != nullptr) return *thread_mode;
  if (!global_on.load(std::memory_order_acquire)) return SkipExistingMode();
  std::lock_guard<std::mutex> lock(global_mutex);
  return global_mode;
}

bool skip_existing_enabled() {
  if (thread_mode != nullptr) return thread_mode->is_on();
  return global_on.load(std::memory_order_acquire);
}

SkipExistingGuard::SkipExistingGuard(SkipExistingMode mode, bool thread_local_)
    : mode_(std::move(mode)), thread_local_(thread_local_) {
  if (thread_local_) {
    previous_thread_mode_ = thread_mode;
    thread_mode = &mode_;
    return;
  }
  std::lock_guard<std::mutex> lock(global_mutex);
  previous_global_mode_ = global_mode;
  global_mode = mode_;
  global_on.store(mode_.is_on(), std::memory_order_release);
}

SkipExistingGuard::~SkipExistingGuard() {
  if (thread_local_) {
    thread_mode = previous_thread_mode_;
    return;
  }
  std::lock_guard<std::mutex> lock(global_mutex);
  global_mode = *previous_global_mode_;
  global_on.store(global_mode.is_on(), std::memory_order_release);
}

}  // namespace tdp::nn
