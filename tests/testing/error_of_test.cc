// error_of: the message of the expected exception; a missing or different exception fails.
#include "tests/testing/error_of.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tdp::test_util {
namespace {

TEST(ErrorOf, ReturnsTheMessage) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { throw std::invalid_argument("bad value"); }), "bad value");
  EXPECT_EQ(error_of<std::exception>([] { throw std::out_of_range("too far"); }), "too far");
}

TEST(ErrorOf, NoExceptionOrAnotherTypeFails) {
  EXPECT_NONFATAL_FAILURE(error_of<std::invalid_argument>([] {}), "expected an exception");
  EXPECT_NONFATAL_FAILURE(error_of<std::invalid_argument>([] { throw std::out_of_range("too far"); }),
                          "threw another exception type: too far");
}

}  // namespace
}  // namespace tdp::test_util
