// ASSERT_OK, EXPECT_OK and ASSERT_OK_AND_ASSIGN: pass on OK, fail with the status otherwise, and
// assign the value.
#include "tests/testing/status_matchers.h"

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace tdp::test_util {
namespace {

absl::StatusOr<std::unique_ptr<int>> make_int(int value) {
  if (value < 0) return absl::InvalidArgumentError("negative value");
  return std::make_unique<int>(value);
}

TEST(StatusMatchers, PassOnOk) {
  EXPECT_OK(absl::OkStatus());
  ASSERT_OK(absl::OkStatus());
  EXPECT_OK(make_int(1));
  ASSERT_OK(make_int(1)) << "context";
}

TEST(StatusMatchers, AssignMovesTheValueOut) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<int> value, make_int(3));
  EXPECT_EQ(*value, 3);
  ASSERT_OK_AND_ASSIGN(value, make_int(4));  // assigns an existing variable
  EXPECT_EQ(*value, 4);
}

TEST(StatusMatchers, FailuresShowTheExpressionAndTheStatus) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(absl::NotFoundError("no such file")),
                          "absl::NotFoundError(\"no such file\") is not OK: NOT_FOUND: no such file");
  EXPECT_FATAL_FAILURE(ASSERT_OK(make_int(-1)), "make_int(-1) is not OK: INVALID_ARGUMENT: negative value");
}

void assign_negative(bool* reached) {
  ASSERT_OK_AND_ASSIGN(auto value, make_int(-2));
  *reached = value != nullptr;
}

TEST(StatusMatchers, AssignFailsAndReturnsBeforeUsingTheValue) {
  static bool reached = false;
  EXPECT_FATAL_FAILURE(assign_negative(&reached), "make_int(-2) is not OK: INVALID_ARGUMENT: negative value");
  EXPECT_FALSE(reached);
}

}  // namespace
}  // namespace tdp::test_util
