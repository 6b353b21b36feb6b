// error_of<E>(fn): runs `fn`, expects it to throw E, and returns the message, so a test can
// compare an error text exactly. A missing or different exception fails the test.
//
//   EXPECT_EQ(tdp::test_util::error_of<tdp::KeyError>([&] { td.get("c"); }),
//             "key 'c' not found in TensorDict with keys ['a', 'b']");
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace tdp::test_util {

template <typename Exception, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Exception& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace tdp::test_util
