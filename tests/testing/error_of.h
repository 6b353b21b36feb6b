// error_of<E>(fn): runs `fn`, expects it to throw E, and returns the message, so a test can
// compare an error text exactly or match a piece of it. No exception, or one of another type,
// fails the test (naming what was thrown instead) and returns "".
//
//   EXPECT_EQ(tdp::test_util::error_of<tdp::KeyError>([&] { td.get("c"); }),
//             "key 'c' not found in TensorDict with keys ['a', 'b']");
//   EXPECT_THAT(error_of<std::invalid_argument>([&] { env.step(bad); }), HasSubstr("action"));
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace tdp::test_util {

template <typename Exception, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    try {
      fn();
    } catch (const Exception& error) {
      return error.what();
    }
  } catch (const std::exception& error) {
    ADD_FAILURE() << "threw another exception type: " << error.what();
    return "";
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace tdp::test_util
