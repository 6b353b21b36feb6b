// The tdpolicy logger: one named spdlog logger ("tdpolicy") that every SDK package writes
// its warnings to, so an application silences, redirects or raises the SDK's messages in one
// place instead of finding std::cout calls scattered through library code.
//
//   tdp::logger()->warn("reset_parameters_recursive found nothing to reset");
//   tdp::logger()->set_level(spdlog::level::err);      // silence SDK warnings
//   spdlog::get("tdpolicy")->flush();                       // same logger, by name
//
// The logger is created on first use (thread-safe) and registered with spdlog under
// kLoggerName; an application that registers its own logger of that name first keeps it.
#pragma once

#include <spdlog/logger.h>

#include <memory>

namespace tdp {

inline constexpr const char* kLoggerName = "tdpolicy";

// The SDK logger (stderr, colored) or the one the application registered under kLoggerName.
std::shared_ptr<spdlog::logger> logger();

}  // namespace tdp
