// JSON <-> TensorDict: how the `tdp` command line reads a policy's inputs and prints what it
// computed. A JSON object maps names to tensors written as nested lists of numbers (booleans for
// BOOL inputs); a nested key ("next/observation" in a spec) is a nested object. The batch size is
// not written anywhere: it is what the tensors have in front of the per-env shape the spec
// declares, and every input must agree on it.
//
//   // signature inputs: "observation" float32 [3]; "next/reward" float32 [1]
//   absl::StatusOr<tdp::TensorDict> td = tdp::cli::tensordict_from_json(
//       R"({"observation": [[0.1, 0.2, 0.3], [1, 2, 3]], "next": {"reward": [[0.5], [1]]}})",
//       policy.signature.inputs);                         // batch_size [2]
//   absl::StatusOr<std::string> json = tdp::cli::tensordict_to_json(*td);
//
// Numbers go through JSON's doubles: integers beyond 2^53 do not survive. Non-finite floats are
// the strings "NaN", "Infinity" and "-Infinity", as protobuf's JSON mapping writes them; both
// directions accept them.
#pragma once

#include <absl/status/statusor.h>

#include <string>
#include <vector>

#include "sdk/policy/limits.h"
#include "sdk/policy/signature.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::cli {

// Parses `json`, a JSON object holding exactly the declared `inputs` (nested keys as nested
// objects), into a TensorDict whose batch_size is the dims each tensor has before its declared
// shape. Each tensor gets its declared dtype. Errors name the key and
// what was expected: a missing or undeclared key, a ragged list, a shape that does not end with
// the declared one, batch dims that differ between inputs, a value that is not a number (or not
// an integer / boolean / in range for the dtype). With `state_optional`, the recurrent state
// inputs may be left out (the actor supplies them when absent). JSON
// nested deeper than limits.max_json_depth (arrays and objects together) is an error before
// anything is parsed; the conversion is linear in the input's size.
//
// The deepest JSON protobuf's parser reads (objects and arrays together); a larger
// max_json_depth is treated as this.
inline constexpr int64_t kMaxJsonDepth = 50;

absl::StatusOr<TensorDict> tensordict_from_json(const std::string& json,
                                                const std::vector<policy::TensorSignature>& inputs,
                                                bool state_optional = false, const policy::Limits& limits = {});

// Writes every entry of `td` in insertion order: tensors as nested lists (a 0-dim tensor as a
// bare number), nested TensorDicts as nested objects. Floats print as the shortest decimal that
// reads back bit-exactly (Python's repr: 0.1, at most 17 significant digits for float64 and 9
// for narrower floats, which print as float32); integers as integers; bools as true/false. One entry per line, each tensor on one line. Complex and quantized
// tensors are an error naming the key.
absl::StatusOr<std::string> tensordict_to_json(const TensorDict& td);

}  // namespace tdp::cli
