// LogCapture: collects what the SDK logger (sdk/log/log.h) writes while it is alive.
//
//   LogCapture log;
//   module(td);
//   EXPECT_THAT(log.text(), HasSubstr("skipping"));
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <memory>
#include <sstream>
#include <string>

#include "sdk/log/log.h"

namespace tdp::test_util {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)) {
    logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = logger()->sinks();
    for (auto it = sinks.begin(); it != sinks.end(); ++it) {
      if (*it == sink_) {
        sinks.erase(it);
        break;
      }
    }
  }
  std::string text() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace tdp::test_util
