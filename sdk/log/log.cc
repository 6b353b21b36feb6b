#include "sdk/log/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace tdp {

std::shared_ptr<spdlog::logger> logger() {
  // A function-local static makes creation thread-safe and keeps the hot path to one load.
  static const std::shared_ptr<spdlog::logger> instance = [] {
    if (auto existing = spdlog::get(kLoggerName)) return existing;
    try {
      return spdlog::stderr_color_mt(kLoggerName);
    } catch (const spdlog::spdlog_ex&) {
      // Another thread (or package) registered the name between get() and creation.
      return spdlog::get(kLoggerName);
    }
  }();
  return instance;
}

}  // namespace tdp
