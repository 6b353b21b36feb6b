// Internal to sdk/policy (a `srcs` header: never installed). ValidationContext: what
// validate_spec keeps while it walks the module tree in execution order (which keys exist and,
// where it can tell, their per-environment shapes; the declared elements and the draws so far;
// the first problem), and the checks every kind's validation shares, each failing with the field
// path that causes the problem.
//
//   ValidationContext context(source, options);
//   std::optional<Shape> shape = context.read(spec.in_keys(0), path + ".in_keys[0]");
//   if (!shape || !context.positive(mlp.in_features(), kind_path + ".in_features")) return false;
//   return context.write(spec.out_keys(0), path + ".out_keys[0]", with_last(*shape, 8), overwrites);
//   ...
//   absl::Status status = context.error();   // "<source>: <field path>: <message> (hint: ...)"
#pragma once

#include <absl/status/status.h>
#include <google/protobuf/repeated_field.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/limits.h"
#include "sdk/policy/policy.h"
#include "sdk/tensordict/nested_key.h"

namespace tdp::policy::kinds {

// `shape` with its last dim replaced by `last` (appended to a scalar; [last] when unknown).
Shape with_last(const Shape& shape, int64_t last);

class ValidationContext {
 public:
  ValidationContext(std::string source, const LoadOptions& options)
      : source_(std::move(source)), options_(options), limits_(options.limits) {}

  // The first problem (OK while there is none).
  const absl::Status& error() const { return error_; }
  // Records the first problem as "<source>: <path>: <message> (hint: <hint>)"; returns false so
  // callers can `return context.fail(...)`.
  bool fail(const std::string& path, const std::string& message, const std::string& hint = "");

  // Validates `spec` and its children by its kind's entry, after its overwrite_keys; nesting is
  // bounded (64 modules deep).
  bool module(const tdpolicy::Module& spec, const std::string& path);

  // ---- keys -------------------------------------------------------------------------------
  std::optional<NestedKey> key_at(const std::string& text, const std::string& path);
  // A read: the key must be a declared input or written earlier. Its shape, else nothing after fail().
  std::optional<Shape> read(const std::string& text, const std::string& path);
  // A write ("_" writes nothing): an error when the key exists and is not in `overwrites`, or
  // when one tensor of `shape` would not fit (fits_one_tensor).
  bool write(const std::string& text, const std::string& path, Shape shape, const std::set<NestedKey>& overwrites);
  bool is_written(const NestedKey& key) const { return written_.count(key) > 0; }
  // A declared input: `by` its field path.
  void declare_input(const NestedKey& key, const std::string& by, Shape shape) {
    written_[key] = {by, std::move(shape)};
  }
  // The entries written at `key` or under it (a composite's parameters are the leaves of a
  // sub-TensorDict), with their shapes.
  std::vector<std::pair<const NestedKey*, const Shape*>> written_at_or_under(const NestedKey& key) const;
  // `["a", "b"]`: every key written so far, for hints.
  std::string written_list() const;

  // ---- allocation bounds --------------------------------------------------------------------
  // Every tensor a call makes is bounded like one declared tensor (not counted in the declared
  // total): its per-env elements, times the draws of the probabilistic modules before it with
  // num_samples (a per-call allocation the spec decides). A cat of many inputs, a one_hot of a
  // large input or an MLP after 2^20 draws is an error here, not at the first call. A shape not
  // known here counts as one element per env, and so does a dim of size 0: a reduction over it
  // (a categorical over 0 classes) leaves a tensor of all the other dims (found by the fuzzer:
  // 2^20 draws over logits [32, 8, 0] made a 2 GB log-sum-exp).
  // `extra_draws` multiplies the draws: a call's own estimate draws, named in the message by the
  // option they come from.
  bool fits_one_tensor(const Shape& per_env, const std::string& path, const std::string& what, double extra_draws = 1,
                       const char* extra_draws_from = "");
  // From here on every tensor has `n` more draws (num_samples) in front of the batch.
  void add_draws(double n) { draws_ *= n; }
  // Sizes come from untrusted files: a layer too large to allocate must be an error, not an
  // allocation that the kernel kills the process for. One network's weights count as one tensor
  // against limits.max_tensor_elements, and every declared element against max_total_elements.
  bool allocatable(double weights, const std::string& path);
  // Counts `elements` (a double: products of untrusted sizes overflow int64) against both limits.
  bool count(double elements, const std::string& path, const std::string& what, const std::string& unit);
  // A declared shape (an input's, a parameter's, a self-test tensor's): no negative size, and
  // its elements counted.
  bool declared(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& path,
                const std::string& what);
  // The declared elements counted so far.
  double declared_elements() const { return total_; }

  // ---- fields -------------------------------------------------------------------------------
  bool positive(int64_t value, const std::string& path);
  bool finite(double value, const std::string& path);
  // A NormalParamExtractor's or AddStateIndependentNormalScale's lower bound on the scale.
  bool scale_lower_bound(bool has, double value, const std::string& path);
  // A tdp::nn::mappings() name, with finite numbers in a biased_softplus_<bias>[_<min_val>].
  bool mapping_known(const std::string& name, const std::string& path);
  // A file named by the spec must stay in the spec's folder: a spec from someone else must not
  // read /etc/passwd or ../../secrets into a tensor.
  bool inside_folder(const std::string& file, const std::string& path);
  // A known input shape's last dim must be the layer's `expected` size (`what` names it).
  bool check_last_dim(const Shape& shape, int64_t expected, const std::string& path, const std::string& what);
  // The network reads `in` keys and writes `out` ones (`kind`: "an mlp").
  bool arity(const NetworkSite& site, int in, int out, const char* kind);

 private:
  struct Written {
    std::string by;  // the field path of the writer, or of the declared input
    Shape shape;
  };

  std::string source_;
  const LoadOptions& options_;
  const Limits& limits_;
  double total_ = 0;  // declared elements so far
  double draws_ = 1;  // the num_samples of the probabilistic modules so far, multiplied
  absl::Status error_;
  std::map<NestedKey, Written> written_;
  int depth_ = 0;
};

}  // namespace tdp::policy::kinds
