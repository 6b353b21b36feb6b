// TensorDicts in tests: building one from a literal list of entries, and its keys as strings
// for gmock matchers.
//
//   TensorDict td = make_td({{"x", torch::zeros({2, 3})}}, {2});
//   EXPECT_THAT(key_strings(td.keys()), UnorderedElementsAre("'x'", "'y'"));
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "sdk/tensordict/tensordict.h"

namespace tdp::test_util {

inline TensorDict make_td(std::initializer_list<std::pair<NestedKey, Entry>> entries,
                          std::vector<int64_t> batch_size = {}) {
  return TensorDict(std::vector<std::pair<NestedKey, Entry>>(entries), std::move(batch_size));
}

// Each key as NestedKey::to_string() prints it ("'a'", "('a', 'b')").
inline std::vector<std::string> key_strings(const std::vector<NestedKey>& keys) {
  std::vector<std::string> out;
  for (const NestedKey& key : keys) out.push_back(key.to_string());
  return out;
}

}  // namespace tdp::test_util
