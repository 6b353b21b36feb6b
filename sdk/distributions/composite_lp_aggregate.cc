#include "sdk/distributions/composite_lp_aggregate.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tdp::dist {
namespace {

// Encodes std::optional<bool> in one atomic: -1 unset, 0 false, 1 true.
constexpr int8_t kUnset = -1;

int8_t encode(std::optional<bool> mode) { return mode ? static_cast<int8_t>(*mode) : kUnset; }
std::optional<bool> decode(int8_t value) {
  if (value == kUnset) return std::nullopt;
  return value == 1;
}

// Python's strtobool, as tensordict parses the variable.
std::optional<bool> from_environment() {
  const char* raw = std::getenv("COMPOSITE_LP_AGGREGATE");
  if (raw == nullptr) return std::nullopt;
  std::string value(raw);
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* t : {"y", "yes", "t", "true", "on", "1"}) {
    if (value == t) return true;
  }
  for (const char* f : {"n", "no", "f", "false", "off", "0"}) {
    if (value == f) return false;
  }
  throw std::invalid_argument("COMPOSITE_LP_AGGREGATE='" + std::string(raw) +
                              "' is not a truth value; use 1/0, true/false, yes/no or on/off");
}

std::atomic<int8_t>& process_mode() {
  // Read once, like tensordict's module-level default.
  static std::atomic<int8_t> mode{encode(from_environment())};
  return mode;
}

thread_local int8_t t_thread_mode = kUnset;

}  // namespace

std::optional<bool> composite_lp_aggregate_mode() {
  if (t_thread_mode != kUnset) return decode(t_thread_mode);
  return decode(process_mode().load());
}

bool composite_lp_aggregate() { return composite_lp_aggregate_mode().value_or(false); }

void set_composite_lp_aggregate(std::optional<bool> mode) {
  if (mode) {
    process_mode().store(encode(mode));
  } else {
    process_mode().store(encode(from_environment()));
  }
}

CompositeLpAggregateGuard::CompositeLpAggregateGuard(bool mode, bool thread_local_only)
    : thread_local_only_(thread_local_only) {
  if (thread_local_only_) {
    previous_ = decode(t_thread_mode);
    t_thread_mode = encode(mode);
  } else {
    previous_ = decode(process_mode().exchange(encode(mode)));
  }
}

CompositeLpAggregateGuard::~CompositeLpAggregateGuard() {
  if (thread_local_only_) {
    t_thread_mode = encode(previous_);
  } else {
    process_mode().store(encode(previous_));
  }
}

}  // namespace tdp::dist
