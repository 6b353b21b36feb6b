// libFuzzer entry point for `tdp run`'s JSON input (sdk/cli/json_tensordict.h): the input is
// the JSON text, read against fixed declared inputs of every kind the converter handles (float32
// and float64, nested keys, a 0-dim int64, int8 and bool, and an optional recurrent state),
// under small limits. What parses must convert back: tensordict_to_json of the result, read
// again, gives the same keys, dtypes, shapes and bits (the README's promise that an output entry
// fed back as an input gives the same bits).
#include <google/protobuf/text_format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sdk/cli/json_tensordict.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

const std::vector<tdp::policy::TensorSignature>& inputs() {
  static const auto* declared = [] {
    tdpolicy::PolicySpec spec;
    const bool ok = google::protobuf::TextFormat::ParseFromString(R"(
      inputs { key: "observation" shape: 3 }
      inputs { key: "goal/position" shape: 2 dtype: FLOAT64 }
      inputs { key: "goal/id" dtype: INT64 }
      inputs { key: "mask" shape: 2 dtype: BOOL }
      inputs { key: "small" shape: 1 shape: 1 dtype: INT8 }
      inputs { key: "hidden" shape: 2 dtype: FLOAT16 }
    )", &spec);
    TDP_FUZZ_CHECK(ok, "the fixed inputs do not parse");
    auto parsed = tdp::policy::declared_inputs(spec);
    TDP_FUZZ_CHECK(parsed.ok(), "the fixed inputs are not valid declared inputs");
    auto* out = new std::vector<tdp::policy::TensorSignature>(*std::move(parsed));
    out->back().state = true;  // "hidden": a recurrent state the caller may leave out
    return out;
  }();
  return *declared;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  const bool optional = true;
  auto td = tdp::cli::tensordict_from_json(json, inputs(), optional, tdp::fuzz::fuzz_limits());
  if (!td.ok()) {
    TDP_FUZZ_CHECK(!td.status().message().empty(), "an error Status without a message");
    return 0;
  }
  auto printed = tdp::cli::tensordict_to_json(*td);
  TDP_FUZZ_CHECK(printed.ok(), "a parsed input does not print: " + std::string(printed.status().message()));
  auto again = tdp::cli::tensordict_from_json(*printed, inputs(), optional, tdp::fuzz::fuzz_limits());
  TDP_FUZZ_CHECK(again.ok(), "a printed input does not read back: " + std::string(again.status().message()) +
                                 "\nprinted:\n" + *printed);
  // equal() compares values, and NaN != NaN: compare the bits through the printed form instead.
  auto printed_again = tdp::cli::tensordict_to_json(*again);
  TDP_FUZZ_CHECK(printed_again.ok() && *printed_again == *printed,
                 "printing, reading and printing again differ:\n" + *printed + "\nthen:\n" +
                     (printed_again.ok() ? *printed_again : std::string(printed_again.status().message())));
  TDP_FUZZ_CHECK(again->batch_size() == td->batch_size(), "the batch size changed on the way back");
  return 0;
}
