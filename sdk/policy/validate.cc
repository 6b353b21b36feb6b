// validate_spec: the spec's top level (inputs, output_keys, CUDA graph settings, parameters, self
// tests) here; the module tree, walked in execution order, by each module's kind
// (sdk/policy/kinds/), so that wiring mistakes surface with the field that causes them before
// anything is built.
#include <absl/strings/str_cat.h>

#include <utility>
#include <vector>

#include "sdk/policy/cuda_graph_settings.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy {
namespace {

bool validate(const tdpolicy::PolicySpec& spec, kinds::ValidationContext& context) {
  for (int i = 0; i < spec.inputs_size(); ++i) {
    const auto& input = spec.inputs(i);
    const std::string path = absl::StrCat("inputs[", i, "]");
    auto key = context.key_at(input.key(), path + ".key");
    if (!key) return false;
    for (int64_t size : input.shape()) {
      if (size < 0) return context.fail(path + ".shape", absl::StrCat("negative size ", size));
    }
    // A binary or JSON spec can carry any number in an enum field (proto3 enums are open).
    if (input.dtype() != tdpolicy::DTYPE_UNSPECIFIED && !scalar_type(input.dtype())) {
      return context.fail(path + ".dtype", absl::StrCat("unknown dtype ", static_cast<int>(input.dtype())),
                          "one of FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT64, INT32, INT16, INT8, UINT8, BOOL; "
                          "FLOAT32 when unset");
    }
    if (!context.declared(input.shape(), path + ".shape", "the per-env shape")) return false;
    if (context.is_written(*key)) {
      return context.fail(path + ".key", absl::StrCat("input \"", input.key(), "\" is declared twice"));
    }
    context.declare_input(*key, path, std::vector<int64_t>(input.shape().begin(), input.shape().end()));
  }
  if (!spec.has_module()) {
    return context.fail("module", "the spec has no module", "add `module { sequential { ... } }`");
  }
  if (!context.module(spec.module(), "module")) return false;
  for (int i = 0; i < spec.output_keys_size(); ++i) {
    const std::string path = absl::StrCat("output_keys[", i, "]");
    auto key = context.key_at(spec.output_keys(i), path);
    if (!key) return false;
    if (!context.is_written(*key)) {
      return context.fail(path, absl::StrCat("output \"", spec.output_keys(i), "\" is never written"),
                          absl::StrCat("written keys: ", context.written_list()));
    }
  }
  if (spec.has_cuda_graph()) {
    const auto& graph = spec.cuda_graph();
    std::vector<int64_t> buckets(graph.batch_buckets().begin(), graph.batch_buckets().end());
    if (auto problem = check_cuda_graph_settings(graph.warmup() == 0 ? kDefaultCudaGraphWarmup : graph.warmup(), buckets)) {
      return context.fail("cuda_graph." + problem->field, problem->message);
    }
  }
  if (spec.has_parameters() && !spec.parameters_file().empty()) {
    return context.fail("parameters_file", "parameters are both embedded and in a file", "keep one of the two");
  }
  if (!spec.parameters_file().empty() && !context.inside_folder(spec.parameters_file(), "parameters_file")) return false;
  // Declared tensor sizes, before anything reads their bytes or allocates them.
  for (int i = 0; i < spec.parameters().tensors_size(); ++i) {
    const auto& named = spec.parameters().tensors(i);
    if (!context.declared(named.tensor().shape(),
                          absl::StrCat("parameters.tensors[", i, "] (\"", named.name(), "\").tensor.shape"),
                          "the parameter")) {
      return false;
    }
  }
  // Self-test entries are keys of the policy's TensorDicts (inputs, outputs, samples,
  // log-probs): each must parse before the self test reads it.
  for (int t = 0; t < spec.self_tests_size(); ++t) {
    const auto& test = spec.self_tests(t);
    const std::string path = absl::StrCat("self_tests[", t, "]");
    for (const auto& [field, entries] :
         {std::pair{".inputs", &test.inputs()}, std::pair{".expected_outputs", &test.expected_outputs()},
          std::pair{".actions", &test.actions()}, std::pair{".expected_log_probs", &test.expected_log_probs()}}) {
      for (int i = 0; i < entries->size(); ++i) {
        if (!context.key_at(entries->Get(i).name(), absl::StrCat(path, field, "[", i, "].name"))) return false;
        if (!context.declared(entries->Get(i).tensor().shape(), absl::StrCat(path, field, "[", i, "].tensor.shape"),
                              "the tensor")) {
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

absl::Status validate_spec(const tdpolicy::PolicySpec& spec, const std::string& source, const LoadOptions& options) {
  kinds::ValidationContext context(source, options);
  if (validate(spec, context)) return absl::OkStatus();
  return context.error();
}

}  // namespace tdp::policy
