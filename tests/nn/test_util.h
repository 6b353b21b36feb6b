// Helpers shared by the tdp::nn tests.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sdk/log/log.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn::testing {

inline TensorDict make_td(std::initializer_list<std::pair<NestedKey, Entry>> entries,
                          std::vector<int64_t> batch_size = {}) {
  return TensorDict(std::vector<std::pair<NestedKey, Entry>>(entries), std::move(batch_size));
}

// The message of the exception of type E that `f` throws; fails the test if none is thrown.
template <typename E, typename F>
std::string ThrowMessage(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

// Captures what the SDK logger writes while alive.
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

inline std::vector<std::string> key_strings(const std::vector<NestedKey>& keys) {
  std::vector<std::string> out;
  for (const NestedKey& key : keys) out.push_back(key.to_string());
  return out;
}

}  // namespace tdp::nn::testing
