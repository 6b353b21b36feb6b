// Policy specs: reading a tdpolicy.PolicySpec (text, binary or JSON), validating it before any
// tensor runs, building its module tree with its parameters, and the reverse: exporting a
// module tree built in C++ to a spec plus parameters. Errors are absl::Status values naming the
// file, the field path (module.sequential.modules[2].probabilistic.in_keys[0]) and a hint.
//
//   absl::StatusOr<tdp::policy::Policy> policy = tdp::policy::load_policy("policies/cartpole_categorical.pbtxt");
//   if (!policy.ok()) { std::cerr << policy.status() << "\n"; return 1; }
//   tdp::TensorDict td({{"observation", at::randn({8, 4})}}, {8});
//   policy->module->forward(td);                       // writes the spec's output_keys
//   for (const auto& out : policy->signature.outputs) std::cout << out.name << "\n";
//   absl::Status saved = tdp::policy::save_policy(*policy, "/tmp/cartpole.pb");   // one binary file
//
// Loading never crashes on bad input: every problem becomes a Status (fuzzed in the tests).
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/policy/limits.h"
#include "sdk/policy/signature.h"
#include "tdpolicy/spec.pb.h"

namespace tdp::policy {

enum class SpecFormat { kText, kBinary, kJson };

// A loaded policy: its spec (parameters moved out into the module), the module tree, and its
// signature (signature.h), computed once by build_policy. A Policy assembled by hand gets its
// signature from compute_signature(spec, *module).
struct Policy {
  tdpolicy::PolicySpec spec;
  std::shared_ptr<nn::TensorDictModuleBase> module;
  Signature signature;
};

// The format a path's extension names: .pbtxt/.textproto/.txt text, .json JSON, .pb/.binpb/.bin
// binary; anything else is guessed from the content.
SpecFormat format_for_path(const std::string& path);

// Parses `content`; `source` names it in errors (a file name). Nesting deeper than
// limits.max_nesting_depth is an error before the parser runs.
absl::StatusOr<tdpolicy::PolicySpec> parse_spec(const std::string& content, SpecFormat format,
                                               const std::string& source, const Limits& limits = {});
// Reads a regular file of at most limits.max_spec_bytes (read_bounded_file) and parses it in
// the format its extension names (else the one its content shows).
absl::StatusOr<tdpolicy::PolicySpec> read_spec(const std::string& path, const Limits& limits = {});
// Writes `spec` in the format the path names.
absl::Status write_spec(const tdpolicy::PolicySpec& spec, const std::string& path);

struct LoadOptions {
  // Recompute the spec's self_tests and fail when an output differs.
  bool run_self_tests = false;
  // File sizes, nesting and element counts, checked before anything is allocated (limits.h).
  Limits limits;
  // parameters_file, torchscript.file and aoti_package.file name files inside the spec's folder: an absolute path
  // or a ".." level is an error unless this is set (`tdp --allow_outside_files`).
  bool allow_outside_files = false;
  // A NaN or infinite parameter value is an error naming the parameter unless this is set; then
  // it is a warning on the SDK logger (`tdp --allow_non_finite_parameters`).
  bool allow_non_finite_parameters = false;
};

// The checks that need no tensors: unknown names (distributions, activations, mappings,
// interaction types, distribution kwargs), keys read before anything writes them, declared shapes
// that do not fit a layer, keys written twice without overwrite_keys, declared outputs nobody
// writes, values out of their domain (scale_lb <= 0, low >= high, non-finite mapping biases),
// file paths outside the spec's folder, and options.limits on declared element counts.
absl::Status validate_spec(const tdpolicy::PolicySpec& spec, const std::string& source,
                           const LoadOptions& options = {});

// read_spec + validate_spec + build_policy; relative files (parameters_file, TorchScript files)
// are read next to the spec. Never throws: every failure, from LibTorch and protobuf included,
// is a Status naming the file.
absl::StatusOr<Policy> load_policy(const std::string& path, const LoadOptions& options = {});
// Builds the module tree and loads its parameters (embedded, from parameters_file under
// `base_dir`, or initialized from init_seed). Validates first. An allocation that fails is a
// ResourceExhausted status that is_out_of_memory() recognizes (a spec over a loader limit is
// ResourceExhausted too, without it).
absl::StatusOr<Policy> build_policy(const tdpolicy::PolicySpec& spec, const std::string& source,
                                    const std::string& base_dir, const LoadOptions& options = {});

// True for the status of a load that ran out of memory (the C API's TDP_OUT_OF_MEMORY).
bool is_out_of_memory(const absl::Status& status);

// The spec of a module tree built in C++ from the kinds a spec can name (TensorDictSequential,
// TensorDictModule around Mlp, torch::nn::Linear, GruCell, LstmCell, MappingModule,
// NormalParamExtractor or AddStateIndependentNormalScale, ProbabilisticTensorDictModule with a
// registry distribution, ProbabilisticTensorDictSequential), with its parameters embedded.
// `header` supplies name, version, description, inputs and output_keys. Anything else is an
// error naming the module.
absl::StatusOr<tdpolicy::PolicySpec> export_spec(const nn::TensorDictModuleBase& module,
                                                const tdpolicy::PolicySpec& header);

struct SaveOptions {
  // Embed the parameters in the spec (one self-contained file) or write them to
  // `<path>.params.pb` next to it.
  bool embed_parameters = true;
};
// Exports `policy.module` with `policy.spec`'s header and writes it to `path`.
absl::Status save_policy(const Policy& policy, const std::string& path, const SaveOptions& options = {});

// Recomputes every self test of `policy.spec` and reports the first mismatch.
absl::Status run_self_tests(const Policy& policy, const std::string& source);

}  // namespace tdp::policy
