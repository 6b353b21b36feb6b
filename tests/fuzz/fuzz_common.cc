#include "tests/fuzz/fuzz_common.h"

#include <ATen/ATen.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/tensor_proto.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::fuzz {

void check(bool ok, const char* condition, const std::string& message, const char* file, int line) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s: %s\n", file, line, condition, message.c_str());
  std::abort();
}

policy::Limits fuzz_limits() {
  policy::Limits limits;
  limits.max_spec_bytes = int64_t{16} << 20;
  limits.max_input_bytes = int64_t{16} << 20;
  limits.max_tensor_elements = int64_t{1} << 20;
  limits.max_total_elements = int64_t{1} << 22;
  return limits;
}

policy::LoadOptions fuzz_load_options() {
  policy::LoadOptions options;
  options.limits = fuzz_limits();
  options.run_self_tests = true;
  return options;
}

void check_error(const absl::Status& status, const std::string& source, const std::string& other_source) {
  TDP_FUZZ_CHECK(!status.ok(), "expected an error");
  TDP_FUZZ_CHECK(!status.message().empty(), "an error Status without a message");
  const bool named = status.message().find(source) != absl::string_view::npos ||
                     (!other_source.empty() && status.message().find(other_source) != absl::string_view::npos);
  TDP_FUZZ_CHECK(named, "the error does not name its source \"" + source + "\": " + std::string(status.message()));
  // build_policy's last resort, for an exception nothing on the way turned into a Status with a
  // field path: reaching it means the validator let through what the builder then refused. Matched
  // as the message's start: other errors quote the input, which may contain the same words (the
  // JSON fuzzer wrote them into a base64 value, and the parser's error echoed it).
  TDP_FUZZ_CHECK(!absl::StartsWith(status.message(), absl::StrCat(source, ": cannot load the policy: ")),
                 "the error is the loader's generic fallback, not a field path: " + std::string(status.message()));
}

void run_policy(const policy::Policy& policy) {
  // One intra-op thread: run.sh fuzzes a target per core, and the idle OpenMP workers of a
  // second thread spun for a tenth of the time, taken from the other target.
  static const bool one_thread = [] {
    at::set_num_threads(1);
    return true;
  }();
  (void)one_thread;
  c10::InferenceMode inference;
  TensorDict td(std::vector<int64_t>{2});
  // The loader computed the signature, so every declared key parses, every dtype is known and
  // the inputs fit in one TensorDict.
  for (const policy::TensorSignature& input : policy.signature.inputs) {
    std::vector<int64_t> shape{2};
    shape.insert(shape.end(), input.shape.begin(), input.shape.end());
    td.set(input.key, at::zeros(shape, at::TensorOptions().dtype(input.dtype)));
  }
  for (auto type : {nn::InteractionType::kDeterministic, nn::InteractionType::kMode, nn::InteractionType::kMedian,
                    nn::InteractionType::kMean, nn::InteractionType::kRandom}) {
    nn::InteractionTypeGuard guard(type);
    TensorDict copy = td.clone();
    try {
      policy.module->forward(copy);
    } catch (const std::exception&) {
      // allowed: module code throws with a message naming the key (the Actor makes it a Status)
    }
  }
}

}  // namespace tdp::fuzz
