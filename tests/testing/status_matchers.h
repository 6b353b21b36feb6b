// Assertions on absl::Status and absl::StatusOr<T>: a failed load or parse fails the test with
// the status in the message, instead of aborting the process on a dereference.
//
//   ASSERT_OK(tdp::policy::save_policy(policy, path));
//   EXPECT_OK(validate_spec(spec, "t.pbtxt")) << "with the params sub-TensorDict";
//   ASSERT_OK_AND_ASSIGN(tdp::policy::Policy policy, tdp::policy::load_policy(path));
//   ASSERT_OK_AND_ASSIGN(auto actor, tdp::actor::Actor::load(path));  // std::unique_ptr<Actor>
//
// ASSERT_OK and ASSERT_OK_AND_ASSIGN return from the current function, which must return void
// (as every gtest ASSERT_ does); ASSERT_OK_AND_ASSIGN declares or assigns `lhs` in the
// enclosing scope, so it is a statement of its own. EXPECT_OK and ASSERT_OK take more context
// with <<.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <gtest/gtest.h>

#include <utility>

namespace tdp::test_util {
namespace status_internal {

inline const absl::Status& status_of(const absl::Status& status) { return status; }

template <typename T>
const absl::Status& status_of(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// gtest predicate-formatter: success when the Status (or StatusOr's status) is OK.
template <typename T>
::testing::AssertionResult IsOk(const char* expression, const T& value) {
  const absl::Status& status = status_of(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expression << " is not OK: " << status;
}

}  // namespace status_internal
}  // namespace tdp::test_util

#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::tdp::test_util::status_internal::IsOk, expr)
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::tdp::test_util::status_internal::IsOk, expr)

#define TDP_STATUS_MATCHERS_CONCAT_INNER(a, b) a##b
#define TDP_STATUS_MATCHERS_CONCAT(a, b) TDP_STATUS_MATCHERS_CONCAT_INNER(a, b)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  TDP_ASSERT_OK_AND_ASSIGN_IMPL(TDP_STATUS_MATCHERS_CONCAT(tdp_status_or_, __LINE__), lhs, expr)

#define TDP_ASSERT_OK_AND_ASSIGN_IMPL(status_or, lhs, expr)                                       \
  auto status_or = (expr);                                                                        \
  GTEST_ASSERT_(::tdp::test_util::status_internal::IsOk(#expr, status_or), GTEST_FATAL_FAILURE_); \
  lhs = std::move(status_or).value()
