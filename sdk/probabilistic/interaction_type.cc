#include "sdk/probabilistic/interaction_type.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>

#include <array>
#include <atomic>
#include <stdexcept>
#include <string>

namespace tdp::nn {
namespace {

constexpr std::array<std::pair<InteractionType, std::string_view>, 5> kNames = {{
    {InteractionType::kMode, "mode"},
    {InteractionType::kMedian, "median"},
    {InteractionType::kMean, "mean"},
    {InteractionType::kRandom, "random"},
    {InteractionType::kDeterministic, "deterministic"},
}};

// Encoded as an int so the process-wide value is one lock-free atomic: -1 means none.
constexpr int kNone = -1;
int encode(std::optional<InteractionType> type) { return type ? static_cast<int>(*type) : kNone; }
std::optional<InteractionType> decode(int value) {
  if (value == kNone) return std::nullopt;
  return static_cast<InteractionType>(value);
}

std::atomic<int> process_wide{kNone};

struct ThreadSetting {
  bool is_set = false;
  int value = kNone;
};
thread_local ThreadSetting thread_setting;

}  // namespace

InteractionType interaction_type_from_str(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(absl::string_view(name.data(), name.size()));
  for (const auto& [type, type_name] : kNames) {
    if (lower == type_name) return type;
  }
  throw std::invalid_argument(absl::StrCat("unknown InteractionType '", std::string(name),
                                           "'; expected one of mode, median, mean, random, deterministic"));
}

std::string_view to_string(InteractionType type) {
  for (const auto& [candidate, name] : kNames) {
    if (candidate == type) return name;
  }
  return "unknown";
}

std::optional<InteractionType> interaction_type() {
  if (thread_setting.is_set) return decode(thread_setting.value);
  return decode(process_wide.load(std::memory_order_relaxed));
}

InteractionTypeGuard::InteractionTypeGuard(std::optional<InteractionType> type, bool thread_local_only)
    : thread_local_only_(thread_local_only) {
  if (thread_local_only_) {
    previous_was_set_ = thread_setting.is_set;
    previous_ = decode(thread_setting.value);
    thread_setting = {true, encode(type)};
  } else {
    previous_was_set_ = true;
    previous_ = decode(process_wide.exchange(encode(type), std::memory_order_relaxed));
  }
}

InteractionTypeGuard::~InteractionTypeGuard() {
  if (thread_local_only_) {
    thread_setting = {previous_was_set_, encode(previous_)};
  } else {
    process_wide.store(encode(previous_), std::memory_order_relaxed);
  }
}

}  // namespace tdp::nn
