// validate_spec: walks the module tree in execution order, tracking which keys exist and, where
// it can tell, their per-environment shapes, so that wiring mistakes surface with the field
// that causes them before anything is built.
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "sdk/distributions/registry.h"
#include "sdk/nn/mappings.h"
#include "sdk/nn/networks.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_module.h"
#include "sdk/policy/cuda_graph_settings.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"

namespace tdp::policy {
namespace {

using Shape = std::optional<std::vector<int64_t>>;  // empty: not known statically

class Validator {
 public:
  Validator(std::string source, const LoadOptions& options)
      : source_(std::move(source)), options_(options), limits_(options.limits) {}

  absl::Status run(const tdpolicy::PolicySpec& spec) {
    for (int i = 0; i < spec.inputs_size(); ++i) {
      const auto& input = spec.inputs(i);
      const std::string path = absl::StrCat("inputs[", i, "]");
      auto key = key_at(input.key(), path + ".key");
      if (!key) return error_;
      for (int64_t size : input.shape()) {
        if (size < 0) return failed(path + ".shape", absl::StrCat("negative size ", size));
      }
      // A binary or JSON spec can carry any number in an enum field (proto3 enums are open).
      if (input.dtype() != tdpolicy::DTYPE_UNSPECIFIED && !scalar_type(input.dtype())) {
        return failed(path + ".dtype", absl::StrCat("unknown dtype ", static_cast<int>(input.dtype())),
                      "one of FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT64, INT32, INT16, INT8, UINT8, BOOL; "
                      "FLOAT32 when unset");
      }
      if (!declared(input.shape(), path + ".shape", "the per-env shape")) return error_;
      if (written_.count(*key)) return failed(path + ".key", absl::StrCat("input \"", input.key(), "\" is declared twice"));
      written_[*key] = {path, std::vector<int64_t>(input.shape().begin(), input.shape().end())};
    }
    if (!spec.has_module()) return failed("module", "the spec has no module", "add `module { sequential { ... } }`");
    if (!module(spec.module(), "module")) return error_;
    for (int i = 0; i < spec.output_keys_size(); ++i) {
      const std::string path = absl::StrCat("output_keys[", i, "]");
      auto key = key_at(spec.output_keys(i), path);
      if (!key) return error_;
      if (!written_.count(*key)) {
        return failed(path, absl::StrCat("output \"", spec.output_keys(i), "\" is never written"),
                    absl::StrCat("written keys: ", written_list()));
      }
    }
    if (spec.has_cuda_graph()) {
      const auto& graph = spec.cuda_graph();
      std::vector<int64_t> buckets(graph.batch_buckets().begin(), graph.batch_buckets().end());
      if (auto problem = check_cuda_graph_settings(graph.warmup() == 0 ? kDefaultCudaGraphWarmup : graph.warmup(), buckets)) {
        return failed("cuda_graph." + problem->field, problem->message);
      }
    }
    if (spec.has_parameters() && !spec.parameters_file().empty()) {
      return failed("parameters_file", "parameters are both embedded and in a file", "keep one of the two");
    }
    if (!spec.parameters_file().empty() && !inside_folder(spec.parameters_file(), "parameters_file")) return error_;
    // Declared tensor sizes, before anything reads their bytes or allocates them.
    for (int i = 0; i < spec.parameters().tensors_size(); ++i) {
      const auto& named = spec.parameters().tensors(i);
      if (!declared(named.tensor().shape(), absl::StrCat("parameters.tensors[", i, "] (\"", named.name(), "\").tensor.shape"),
                    "the parameter")) {
        return error_;
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
          if (!key_at(entries->Get(i).name(), absl::StrCat(path, field, "[", i, "].name"))) return error_;
          if (!declared(entries->Get(i).tensor().shape(), absl::StrCat(path, field, "[", i, "].tensor.shape"),
                        "the tensor")) {
            return error_;
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Written {
    std::string by;  // the field path of the writer, or of the declared input
    Shape shape;
  };

  absl::Status failed(const std::string& path, const std::string& message, const std::string& hint = "") {
    fail(path, message, hint);
    return error_;
  }

  // Records the first problem; returns false so callers can `return fail(...)`.
  bool fail(const std::string& path, const std::string& message, const std::string& hint = "") {
    error_ = absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", path, ": ", message, hint.empty() ? "" : absl::StrCat(" (hint: ", hint, ")")));
    return false;
  }

  std::optional<NestedKey> key_at(const std::string& text, const std::string& path) {
    auto key = parse_key(text);
    if (!key.ok()) {
      fail(path, std::string(key.status().message()));
      return std::nullopt;
    }
    return *key;
  }

  // The entries written at `key` or under it: a composite's parameters are the leaves of a
  // sub-TensorDict. The map orders keys by path, so they are the run that starts at `key`.
  std::vector<std::pair<const NestedKey*, const Written*>> written_at_or_under(const NestedKey& key) const {
    std::vector<std::pair<const NestedKey*, const Written*>> found;
    for (auto it = written_.lower_bound(key); it != written_.end() && it->first.starts_with(key); ++it) {
      found.emplace_back(&it->first, &it->second);
    }
    return found;
  }

  std::string written_list() const {
    std::vector<std::string> keys;
    for (const auto& [key, info] : written_) keys.push_back(absl::StrCat("\"", key_string(key), "\""));
    return absl::StrCat("[", absl::StrJoin(keys, ", "), "]");
  }

  // A read: the key must be a declared input or written earlier. Returns its shape.
  std::optional<Shape> read(const std::string& text, const std::string& path) {
    auto key = key_at(text, path);
    if (!key) return std::nullopt;
    auto found = written_.find(*key);
    if (found == written_.end()) {
      // A composite reads a sub-TensorDict ("params") whose leaves earlier modules wrote.
      if (!written_at_or_under(*key).empty()) return Shape(std::nullopt);
      fail(path, absl::StrCat("key \"", text, "\" is read but no earlier module writes it and it is not a declared input"),
           absl::StrCat("declare it under `inputs`, or check the spelling; available: ", written_list()));
      return std::nullopt;
    }
    return found->second.shape;
  }

  bool write(const std::string& text, const std::string& path, Shape shape, const std::set<NestedKey>& overwrites) {
    if (text == "_") return true;
    auto key = key_at(text, path);
    if (!key) return false;
    auto found = written_.find(*key);
    if (found != written_.end() && !overwrites.count(*key)) {
      fail(path, absl::StrCat("key \"", text, "\" is already written by ", found->second.by),
           "list it in this module's overwrite_keys if overwriting it is intended");
      return false;
    }
    if (!fits_one_tensor(shape, path, absl::StrCat("key \"", text, "\""))) return false;
    written_[*key] = {path, std::move(shape)};
    return true;
  }

  // Every tensor a call makes is bounded like one declared tensor (not counted in the declared
  // total): its per-env elements, times the draws of the probabilistic modules before it with
  // num_samples (a per-call allocation the spec decides). A cat of many inputs, a one_hot of a
  // large input or an MLP after 2^20 draws is an error here, not at the first call. A shape not
  // known here counts as one element per env, and so does a dim of size 0: a reduction over it
  // (a categorical over 0 classes) leaves a tensor of all the other dims (found by the fuzzer:
  // 2^20 draws over logits [32, 8, 0] made a 2 GB log-sum-exp).
  // `extra_draws` multiplies the draws: a call's own estimate draws (mean_estimate_fits), named
  // in the message by the option they come from.
  bool fits_one_tensor(const Shape& per_env, const std::string& path, const std::string& what, double extra_draws = 1,
                       const char* extra_draws_from = "") {
    const double draws = draws_ * extra_draws;
    double elements = draws;
    if (per_env) {
      for (int64_t size : *per_env) elements *= static_cast<double>(std::max<int64_t>(size, 1));
    }
    if (elements <= static_cast<double>(limits_.max_tensor_elements)) return true;
    const std::string shape = per_env ? shape_to_string(*per_env) : std::string("[?]");
    std::string draws_from = draws_ == 1 ? "" : "num_samples";
    if (extra_draws != 1) {
      draws_from =
          draws_from.empty() ? std::string(extra_draws_from) : absl::StrCat(draws_from, " x ", extra_draws_from);
    }
    fail(path,
         limit_exceeded(draws == 1 ? absl::StrCat(what, ", of per-env shape ", shape, ",")
                                   : absl::StrCat(what, ", ", saturated_count(draws), " draws (", draws_from,
                                                  ") of per-env shape ", shape, ","),
                        saturated_count(elements), "elements", limits_.max_tensor_elements, "max_tensor_elements"));
    return false;
  }

  // A distribution is built from its parameters with the earlier modules' draws in front, and
  // copies them (a categorical normalizes its logits into a new tensor): each parameter, every
  // leaf of a composite's sub-TensorDict included, is bounded like a written tensor (found by the
  // fuzzer: 65536 draws in front of logits of per-env shape [3, 255] made the next categorical's
  // log-sum-exp a 401 MB tensor).
  bool parameters_fit(const std::string& text, const std::string& path) {
    auto key = key_at(text, path);
    if (!key) return false;
    for (const auto& [written, info] : written_at_or_under(*key)) {
      if (!fits_one_tensor(info->shape, path,
                           absl::StrCat("the distribution's parameter \"", key_string(*written), "\""))) {
        return false;
      }
    }
    return true;
  }

  // MEAN of a distribution without a closed-form mean (tanh_normal) is estimated from
  // n_empirical_estimate draws of its sample (a spec cannot change the default), taken in double:
  // bounded like num_samples draws (found by the text fuzzer: the MEAN of a tanh_normal part over
  // 32,768 dims made [1000, 2, 32768] doubles, 524 MB).
  bool mean_estimate_fits(const Shape& per_env, const std::string& path, const std::string& what) {
    return fits_one_tensor(per_env, path, absl::StrCat(what, " (MEAN is estimated by sampling)"),
                           nn::kDefaultNEmpiricalEstimate, "n_empirical_estimate");
  }

  bool check_last_dim(const Shape& shape, int64_t expected, const std::string& path, const std::string& what) {
    if (!shape || shape->empty() || shape->back() == expected) return true;
    fail(path, absl::StrCat("the input has shape ", shape_to_string(*shape), " but ", what, " is ", expected),
         "make the declared input shape and the layer size agree");
    return false;
  }

  static Shape with_last(const Shape& shape, int64_t last) {
    if (!shape) return std::vector<int64_t>{last};
    std::vector<int64_t> out = *shape;
    if (out.empty()) out.push_back(last); else out.back() = last;
    return out;
  }

  bool arity(const tdpolicy::NetworkModule& network, int in, int out, const std::string& path, const char* kind) {
    if (network.in_keys_size() != in) {
      fail(path + ".in_keys", absl::StrCat(kind, " reads ", in, " key(s), got ", network.in_keys_size()));
      return false;
    }
    if (network.out_keys_size() != out) {
      fail(path + ".out_keys", absl::StrCat(kind, " writes ", out, " key(s), got ", network.out_keys_size()));
      return false;
    }
    return true;
  }

  bool positive(int64_t value, const std::string& path) {
    if (value > 0) return true;
    fail(path, absl::StrCat("must be positive, got ", value));
    return false;
  }

  // Sizes come from untrusted files: a layer too large to allocate must be an error, not an
  // allocation that the kernel kills the process for. One network's weights count as one tensor
  // against limits.max_tensor_elements, and every declared element against max_total_elements.
  bool allocatable(double weights, const std::string& path) {
    return count(weights, path, "the layer sizes make a network that", "weights");
  }

  // Counts `elements` (a double: products of untrusted sizes overflow int64) against both limits.
  bool count(double elements, const std::string& path, const std::string& what, const std::string& unit) {
    if (elements > static_cast<double>(limits_.max_tensor_elements)) {
      fail(path,
           limit_exceeded(what, saturated_count(elements), unit, limits_.max_tensor_elements, "max_tensor_elements"));
      return false;
    }
    total_ += elements;
    if (total_ > static_cast<double>(limits_.max_total_elements)) {
      fail(path, limit_exceeded("the spec (layers, parameters, self tests, inputs)", saturated_count(total_),
                                "declared elements", limits_.max_total_elements, "max_total_elements"));
      return false;
    }
    return true;
  }

  bool declared(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& path, const std::string& what) {
    double elements = 1;
    for (int64_t size : shape) {
      if (size < 0) return fail(path, absl::StrCat("negative size ", size));
      elements *= static_cast<double>(size);
    }
    return count(elements, path, absl::StrCat(what, " ", shape_to_string({shape.data(), static_cast<size_t>(shape.size())})),
                 "elements");
  }

  // A file named by the spec must stay in the spec's folder: a spec from someone else must not
  // read /etc/passwd or ../../secrets into a tensor.
  bool inside_folder(const std::string& file, const std::string& path) {
    if (options_.allow_outside_files) return true;
    const std::string hint = "name a file in the spec's folder, or allow outside files with "
                             "LoadOptions.allow_outside_files or the tdp flag --allow_outside_files";
    if (!file.empty() && file[0] == '/') return fail(path, absl::StrCat("\"", file, "\" is an absolute path"), hint);
    for (absl::string_view level : absl::StrSplit(file, '/')) {
      if (level == "..") return fail(path, absl::StrCat("\"", file, "\" leaves the spec's folder (\"..\")"), hint);
    }
    return true;
  }

  bool finite(double value, const std::string& path) {
    if (std::isfinite(value)) return true;
    return fail(path, absl::StrCat("must be a finite number, got ", value));
  }

  // A NormalParamExtractor's or AddStateIndependentNormalScale's lower bound on the scale.
  bool scale_lower_bound(bool has, double value, const std::string& path) {
    if (!has || (std::isfinite(value) && value > 0)) return true;
    return fail(path, absl::StrCat("the scale's lower bound must be a finite number > 0, got ", value),
                "leave it unset for 1e-4");
  }

  // Distribution kwargs: known to the distribution (its kwargs, validate_args and, for a
  // module's own distribution_kwargs, its parameter names, which become constant tensors),
  // with a value, finite, and low < high / a < b where both are given.
  bool kwargs_known(const google::protobuf::Map<std::string, tdpolicy::Scalar>& kwargs, const std::string& distribution,
                    bool params_allowed, const std::string& path) {
    if (kwargs.empty() || !dist::DistributionRegistry::global().contains(distribution)) return true;
    const dist::DistributionSignature signature = dist::DistributionRegistry::global().signature(distribution);
    std::set<std::string> accepted(signature.kwargs.begin(), signature.kwargs.end());
    accepted.insert("validate_args");
    if (params_allowed) {
      for (const auto& names : signature.param_sets) accepted.insert(names.begin(), names.end());
    }
    std::map<std::string, double> numbers;
    std::set<std::string> names;  // sorted: the first error does not depend on the map's order
    for (const auto& [name, value] : kwargs) names.insert(name);
    for (const std::string& name : names) {
      const tdpolicy::Scalar& value = kwargs.at(name);
      const std::string field = absl::StrCat(path, "[\"", name, "\"]");
      if (!accepted.count(name)) {
        return fail(field, absl::StrCat("distribution \"", distribution, "\" takes no kwarg \"", name, "\""),
                    absl::StrCat("it takes ", absl::StrJoin(accepted, ", ")));
      }
      switch (value.value_case()) {
        case tdpolicy::Scalar::kDoubleValue:
          if (!finite(value.double_value(), field)) return false;
          numbers[name] = value.double_value();
          break;
        case tdpolicy::Scalar::kIntValue:
          numbers[name] = static_cast<double>(value.int_value());
          break;
        case tdpolicy::Scalar::kBoolValue:
          break;
        case tdpolicy::Scalar::VALUE_NOT_SET:
          return fail(field, "the kwarg has no value", "set double_value, int_value or bool_value");
      }
    }
    for (const auto& [low, high] : {std::pair{"low", "high"}, std::pair{"a", "b"}}) {
      if (numbers.count(low) && numbers.count(high) && !(numbers[low] < numbers[high])) {
        return fail(absl::StrCat(path, "[\"", low, "\"]"),
                    absl::StrCat(low, " (", numbers[low], ") must be less than ", high, " (", numbers[high], ")"));
      }
    }
    return true;
  }

  bool network(const tdpolicy::NetworkModule& spec, const std::string& path, const std::set<NestedKey>& overwrites) {
    std::vector<Shape> inputs;
    for (int i = 0; i < spec.in_keys_size(); ++i) {
      auto shape = read(spec.in_keys(i), absl::StrCat(path, ".in_keys[", i, "]"));
      if (!shape) return false;
      inputs.push_back(*shape);
    }
    std::vector<Shape> outputs;
    const auto& net = spec.network();
    const std::string net_path = path + ".network";
    switch (net.kind_case()) {
      case tdpolicy::Network::kMlp: {
        const auto& mlp = net.mlp();
        if (!arity(spec, 1, 1, path, "an mlp")) return false;
        if (!positive(mlp.in_features(), net_path + ".mlp.in_features") ||
            !positive(mlp.out_features(), net_path + ".mlp.out_features")) {
          return false;
        }
        for (int i = 0; i < mlp.hidden_sizes_size(); ++i) {
          if (!positive(mlp.hidden_sizes(i), absl::StrCat(net_path, ".mlp.hidden_sizes[", i, "]"))) return false;
        }
        double weights = 0;
        double width = mlp.in_features();
        for (int64_t size : mlp.hidden_sizes()) {
          weights += (width + 1) * size;
          width = size;
        }
        if (!allocatable(weights + (width + 1) * mlp.out_features(), net_path + ".mlp")) return false;
        double widest = std::max<double>(mlp.in_features(), mlp.out_features());
        for (int64_t size : mlp.hidden_sizes()) widest = std::max<double>(widest, size);
        if (!fits_one_tensor(std::vector<int64_t>{static_cast<int64_t>(widest)}, net_path + ".mlp",
                             "its widest layer")) {
          return false;
        }
        const std::string activation = mlp.activation().empty() ? "tanh" : mlp.activation();
        const auto& names = nn::activation_names();
        if (std::find(names.begin(), names.end(), activation) == names.end()) {
          fail(net_path + ".mlp.activation", absl::StrCat("unknown activation \"", activation, "\""),
               absl::StrCat("one of ", absl::StrJoin(names, ", ")));
          return false;
        }
        if (!check_last_dim(inputs[0], mlp.in_features(), path + ".in_keys[0]", "mlp.in_features")) return false;
        outputs.push_back(with_last(inputs[0], mlp.out_features()));
        break;
      }
      case tdpolicy::Network::kLinear: {
        const auto& linear = net.linear();
        if (!arity(spec, 1, 1, path, "a linear layer")) return false;
        if (!positive(linear.in_features(), net_path + ".linear.in_features") ||
            !positive(linear.out_features(), net_path + ".linear.out_features")) {
          return false;
        }
        if (!allocatable((double(linear.in_features()) + 1) * linear.out_features(), net_path + ".linear")) return false;
        if (!check_last_dim(inputs[0], linear.in_features(), path + ".in_keys[0]", "linear.in_features")) return false;
        outputs.push_back(with_last(inputs[0], linear.out_features()));
        break;
      }
      case tdpolicy::Network::kGruCell:
      case tdpolicy::Network::kLstmCell: {
        const bool gru = net.kind_case() == tdpolicy::Network::kGruCell;
        const auto& cell = gru ? net.gru_cell() : tdpolicy::GruCell();
        const int64_t input_size = gru ? cell.input_size() : net.lstm_cell().input_size();
        const int64_t hidden_size = gru ? cell.hidden_size() : net.lstm_cell().hidden_size();
        const std::string field = net_path + (gru ? ".gru_cell" : ".lstm_cell");
        if (!arity(spec, gru ? 2 : 3, gru ? 1 : 2, path, gru ? "a gru_cell" : "an lstm_cell")) return false;
        if (!positive(input_size, field + ".input_size") || !positive(hidden_size, field + ".hidden_size")) return false;
        if (!allocatable((gru ? 3.0 : 4.0) * hidden_size * (double(input_size) + hidden_size + 2), field)) return false;
        if (!fits_one_tensor(std::vector<int64_t>{(gru ? 3 : 4) * hidden_size}, field, "its gates")) return false;
        if (!check_last_dim(inputs[0], input_size, path + ".in_keys[0]", "input_size")) return false;
        for (size_t i = 1; i < inputs.size(); ++i) {
          if (!check_last_dim(inputs[i], hidden_size, absl::StrCat(path, ".in_keys[", i, "]"), "hidden_size")) return false;
        }
        for (int i = 0; i < spec.out_keys_size(); ++i) outputs.push_back(with_last(inputs[0], hidden_size));
        break;
      }
      case tdpolicy::Network::kTorchscript:
        if (net.torchscript().file().empty()) {
          fail(net_path + ".torchscript.file", "no file given", "a file saved with torch.jit.save, next to the spec");
          return false;
        }
        if (!inside_folder(net.torchscript().file(), net_path + ".torchscript.file")) return false;
        outputs.assign(spec.out_keys_size(), std::nullopt);
        break;
      case tdpolicy::Network::kMapping:
        if (!arity(spec, 1, 1, path, "a mapping")) return false;
        if (!mapping_known(net.mapping().name(), net_path + ".mapping.name")) return false;
        outputs.push_back(inputs[0]);
        break;
      case tdpolicy::Network::kNormalParamExtractor: {
        if (!arity(spec, 1, 2, path, "a normal_param_extractor")) return false;
        const auto& extractor = net.normal_param_extractor();
        if (!extractor.scale_mapping().empty() &&
            !mapping_known(extractor.scale_mapping(), net_path + ".normal_param_extractor.scale_mapping")) {
          return false;
        }
        if (!scale_lower_bound(extractor.has_scale_lb(), extractor.scale_lb(),
                               net_path + ".normal_param_extractor.scale_lb")) {
          return false;
        }
        Shape half = inputs[0];
        if (half && !half->empty()) {
          if (half->back() % 2 != 0) {
            fail(path + ".in_keys[0]", absl::StrCat("the input has shape ", shape_to_string(*half),
                                                    ", whose last dim must be even to split into loc and scale"));
            return false;
          }
          half->back() /= 2;
        }
        outputs = {half, half};
        break;
      }
      case tdpolicy::Network::kAddStateIndependentNormalScale: {
        if (!arity(spec, 1, 2, path, "an add_state_independent_normal_scale")) return false;
        const auto& scale = net.add_state_independent_normal_scale();
        if (!scale.scale_mapping().empty() &&
            !mapping_known(scale.scale_mapping(), net_path + ".add_state_independent_normal_scale.scale_mapping")) {
          return false;
        }
        if (!scale_lower_bound(scale.has_scale_lb(), scale.scale_lb(),
                               net_path + ".add_state_independent_normal_scale.scale_lb") ||
            !finite(scale.init_value(), net_path + ".add_state_independent_normal_scale.init_value")) {
          return false;
        }
        for (int i = 0; i < scale.scale_shape_size(); ++i) {
          if (!positive(scale.scale_shape(i), absl::StrCat(net_path, ".add_state_independent_normal_scale.scale_shape[", i, "]"))) {
            return false;
          }
        }
        double weights = 1;
        for (int64_t size : scale.scale_shape()) weights *= size;
        if (!allocatable(weights, net_path + ".add_state_independent_normal_scale")) return false;
        outputs = {inputs[0], inputs[0]};
        break;
      }
      case tdpolicy::Network::kOneHot: {
        if (!arity(spec, 1, 1, path, "a one_hot")) return false;
        const int64_t classes = net.one_hot().num_classes();
        if (!positive(classes, net_path + ".one_hot.num_classes")) return false;
        // Each input element becomes num_classes floats: bounded like a layer's weights.
        if (!allocatable(static_cast<double>(classes), net_path + ".one_hot")) return false;
        Shape out = inputs[0];
        if (out) out->push_back(classes);
        outputs.push_back(out);
        break;
      }
      case tdpolicy::Network::kCat: {
        if (spec.in_keys_size() < 1) {
          fail(path + ".in_keys", "a cat reads at least one key, got 0");
          return false;
        }
        if (spec.out_keys_size() != 1) {
          fail(path + ".out_keys", absl::StrCat("a cat writes 1 key(s), got ", spec.out_keys_size()));
          return false;
        }
        // Known shapes must agree on all but the last dim; the output's last dim is their sum.
        Shape out = inputs[0];
        for (size_t i = 0; i < inputs.size(); ++i) {
          const Shape& in = inputs[i];
          if (in && in->empty()) {
            fail(absl::StrCat(path, ".in_keys[", i, "]"), "a cat input needs at least one dim (it joins on the last)");
            return false;
          }
          if (i == 0 || !in || !out) {
            if (!in) out = std::nullopt;
            continue;
          }
          if (in->size() != out->size() || !std::equal(in->begin(), in->end() - 1, out->begin())) {
            fail(absl::StrCat(path, ".in_keys[", i, "]"),
                 absl::StrCat("the input has shape ", shape_to_string(*in), " but in_keys[0] has ",
                              shape_to_string(*inputs[0]), "; a cat needs the same dims but the last"));
            return false;
          }
          out->back() += in->back();
        }
        outputs.push_back(out);
        break;
      }
      case tdpolicy::Network::KIND_NOT_SET:
        fail(net_path, "no network kind is set", "one of mlp, linear, gru_cell, lstm_cell, torchscript, mapping, "
                                                 "normal_param_extractor, add_state_independent_normal_scale, "
                                                 "one_hot, cat");
        return false;
    }
    if (static_cast<int>(outputs.size()) != spec.out_keys_size()) {
      fail(path + ".out_keys", absl::StrCat("expected ", outputs.size(), " out_keys, got ", spec.out_keys_size()));
      return false;
    }
    for (int i = 0; i < spec.out_keys_size(); ++i) {
      if (!write(spec.out_keys(i), absl::StrCat(path, ".out_keys[", i, "]"), outputs[i], overwrites)) return false;
    }
    return true;
  }

  bool mapping_known(const std::string& name, const std::string& path) {
    try {
      nn::mappings(name);
    } catch (const std::exception& error) {
      fail(path, error.what());
      return false;
    }
    // biased_softplus_<bias>[_<min_val>] parses "nan" and "inf" as numbers: a mapping that
    // would turn every scale into NaN.
    const std::string prefix = "biased_softplus_";
    if (name.rfind(prefix, 0) == 0) {
      for (absl::string_view part : absl::StrSplit(name.substr(prefix.size()), '_')) {
        double value = 0;
        if (absl::SimpleAtod(part, &value) && !std::isfinite(value)) {
          return fail(path, absl::StrCat("unknown mapping \"", name, "\": the bias and min_val must be finite numbers"),
                      "e.g. biased_softplus_1.0 or biased_softplus_1.0_0.01");
        }
      }
    }
    return true;
  }

  bool distribution_known(const std::string& name, const std::string& path) {
    if (dist::DistributionRegistry::global().contains(name)) return true;
    fail(path, absl::StrCat("unknown distribution \"", name, "\""),
         absl::StrCat("one of ", absl::StrJoin(dist::DistributionRegistry::global().names(), ", ")));
    return false;
  }

  // The sample shape a registry distribution gives from its first parameter's shape.
  static Shape sample_shape(const std::string& distribution, const Shape& param) {
    if (!param) return std::nullopt;
    if (distribution == "categorical") {
      if (param->empty()) return std::nullopt;
      return std::vector<int64_t>(param->begin(), param->end() - 1);
    }
    return param;
  }

  bool probabilistic(const tdpolicy::ProbabilisticModule& spec, const std::string& path,
                     const std::set<NestedKey>& overwrites) {
    // Key fields the loader parses whether or not they are used (return_log_prob may be off).
    std::vector<std::pair<std::string, std::string>> named_keys;  // field path -> key
    for (int i = 0; i < spec.log_prob_keys_size(); ++i) {
      named_keys.emplace_back(absl::StrCat(path, ".log_prob_keys[", i, "]"), spec.log_prob_keys(i));
    }
    if (!spec.log_prob_key().empty()) named_keys.emplace_back(path + ".log_prob_key", spec.log_prob_key());
    if (!spec.composite().log_prob_key().empty()) {
      named_keys.emplace_back(path + ".composite.log_prob_key", spec.composite().log_prob_key());
    }
    if (!spec.composite().entropy_key().empty()) {
      named_keys.emplace_back(path + ".composite.entropy_key", spec.composite().entropy_key());
    }
    for (int i = 0; i < spec.composite().parts_size(); ++i) {
      if (!spec.composite().parts(i).sample_key().empty()) {
        named_keys.emplace_back(absl::StrCat(path, ".composite.parts[", i, "].sample_key"),
                                spec.composite().parts(i).sample_key());
      }
    }
    for (const auto& [field, key] : named_keys) {
      if (!key_at(key, field)) return false;
    }
    std::vector<Shape> params;
    if (spec.in_keys_size() > 0 && spec.in_keys_map_size() > 0) {
      fail(path + ".in_keys_map", "both in_keys and in_keys_map are set", "use one of the two");
      return false;
    }
    for (int i = 0; i < spec.in_keys_size(); ++i) {
      auto shape = read(spec.in_keys(i), absl::StrCat(path, ".in_keys[", i, "]"));
      if (!shape) return false;
      params.push_back(*shape);
    }
    std::set<std::string> names;
    for (int i = 0; i < spec.in_keys_map_size(); ++i) {
      const auto& binding = spec.in_keys_map(i);
      const std::string field = absl::StrCat(path, ".in_keys_map[\"", binding.name(), "\"]");
      if (binding.name().empty() || !names.insert(binding.name()).second) {
        fail(field, "a parameter name is empty or bound twice");
        return false;
      }
      auto shape = read(binding.key(), field);
      if (!shape) return false;
      params.push_back(*shape);
    }
    for (int i = 0; i < spec.in_keys_size(); ++i) {
      if (!parameters_fit(spec.in_keys(i), absl::StrCat(path, ".in_keys[", i, "]"))) return false;
    }
    for (int i = 0; i < spec.in_keys_map_size(); ++i) {
      const auto& binding = spec.in_keys_map(i);
      if (!parameters_fit(binding.key(), absl::StrCat(path, ".in_keys_map[\"", binding.name(), "\"]"))) return false;
    }
    if (params.empty()) {
      fail(path + ".in_keys", "a probabilistic module reads at least one key");
      return false;
    }
    std::vector<std::pair<std::string, Shape>> samples;  // out key -> shape
    if (spec.has_composite()) {
      if (!spec.distribution().empty()) {
        fail(path + ".distribution", "both distribution and composite are set", "use one of the two");
        return false;
      }
      if (spec.composite().parts_size() == 0) {
        fail(path + ".composite.parts", "a composite needs at least one part");
        return false;
      }
      if (!spec.distribution_kwargs().empty()) {
        std::set<std::string> names;  // sorted: the message does not depend on the map's order
        for (const auto& [name, value] : spec.distribution_kwargs()) names.insert(name);
        return fail(path + ".distribution_kwargs",
                    absl::StrCat("a composite takes no distribution_kwargs (got \"", *names.begin(), "\")"),
                    "give a part's kwargs in composite.parts[i].kwargs");
      }
      for (int i = 0; i < spec.composite().parts_size(); ++i) {
        const auto& part = spec.composite().parts(i);
        const std::string field = absl::StrCat(path, ".composite.parts[", i, "]");
        if (!key_at(part.key(), field + ".key")) return false;
        if (!distribution_known(part.distribution(), field + ".distribution")) return false;
        if (!kwargs_known(part.kwargs(), part.distribution(), /*params_allowed=*/false, field + ".kwargs")) return false;
        samples.emplace_back(part.sample_key().empty() ? part.key() : part.sample_key(), std::nullopt);
      }
    } else {
      const std::string distribution = spec.distribution().empty() ? "delta" : spec.distribution();
      if (!distribution_known(distribution, path + ".distribution")) return false;
      if (!kwargs_known(spec.distribution_kwargs(), distribution, /*params_allowed=*/true,
                        path + ".distribution_kwargs")) {
        return false;
      }
      if (spec.out_keys_size() == 0) {
        fail(path + ".out_keys", "no out_keys", "name where the sample goes, e.g. out_keys: \"action\"");
        return false;
      }
      for (const auto& key : spec.out_keys()) samples.emplace_back(key, sample_shape(distribution, params[0]));
    }
    if (spec.out_keys_size() > 0) {
      if (spec.has_composite() && spec.out_keys_size() != static_cast<int>(samples.size())) {
        fail(path + ".out_keys", absl::StrCat("the composite has ", samples.size(), " parts but ",
                                              spec.out_keys_size(), " out_keys"));
        return false;
      }
      for (int i = 0; i < spec.out_keys_size(); ++i) samples[i].first = spec.out_keys(i);
    }
    if (!spec.default_interaction_type().empty()) {
      try {
        nn::interaction_type_from_str(spec.default_interaction_type());
      } catch (const std::exception& error) {
        fail(path + ".default_interaction_type", error.what());
        return false;
      }
    }
    for (int i = 0; i < spec.num_samples_size(); ++i) {
      if (!positive(spec.num_samples(i), absl::StrCat(path, ".num_samples[", i, "]"))) return false;
      // From here on every tensor has these sample dims in front of the batch: write() and the
      // networks check them.
      draws_ *= static_cast<double>(spec.num_samples(i));
    }
    for (size_t i = 0; i < samples.size(); ++i) {
      if (!write(samples[i].first, absl::StrCat(path, ".out_keys[", i, "]"), samples[i].second, overwrites)) return false;
    }
    if (!spec.has_composite() && spec.distribution() == "tanh_normal" &&
        !mean_estimate_fits(samples[0].second, path + ".distribution", "the tanh_normal sample")) {
      return false;
    }
    for (int i = 0; i < spec.composite().parts_size() && spec.in_keys_size() > 0; ++i) {
      const auto& part = spec.composite().parts(i);
      if (part.distribution() != "tanh_normal") continue;
      auto prefix = key_at(spec.in_keys(0) + "/" + part.key(), path + ".in_keys[0]");
      if (!prefix) return false;
      for (const auto& [written, info] : written_at_or_under(*prefix)) {
        if (!mean_estimate_fits(info->shape, absl::StrCat(path, ".composite.parts[", i, "]"),
                                absl::StrCat("the tanh_normal part's parameter \"", key_string(*written), "\""))) {
          return false;
        }
      }
    }
    if (spec.return_log_prob()) {
      std::vector<std::string> lp_keys(spec.log_prob_keys().begin(), spec.log_prob_keys().end());
      if (lp_keys.empty() && !spec.log_prob_key().empty()) lp_keys.push_back(spec.log_prob_key());
      if (lp_keys.empty()) {
        for (const auto& [key, shape] : samples) lp_keys.push_back(key + "_log_prob");
      }
      for (size_t i = 0; i < lp_keys.size(); ++i) {
        if (!write(lp_keys[i], absl::StrCat(path, ".log_prob_keys[", i, "]"), std::nullopt, overwrites)) return false;
      }
    }
    return true;
  }

  bool sequence(const google::protobuf::RepeatedPtrField<tdpolicy::Module>& modules, const std::string& path) {
    if (modules.empty()) {
      fail(path, "a sequence needs at least one module");
      return false;
    }
    std::set<std::string> names;
    for (int i = 0; i < modules.size(); ++i) {
      const std::string field = absl::StrCat(path, "[", i, "]");
      if (!modules[i].name().empty() && !names.insert(modules[i].name()).second) {
        fail(field + ".name", absl::StrCat("two modules are named \"", modules[i].name(), "\""));
        return false;
      }
      if (!module(modules[i], field)) return false;
    }
    return true;
  }

  // The copies' keys are the module's (each gains the leading copies dim, which per-env shapes
  // do not show); their parameters count num_copies times.
  bool ensemble(const tdpolicy::Ensemble& spec, const std::string& path) {
    constexpr int64_t kMaxCopies = 1 << 16;
    if (spec.num_copies() < 1 || spec.num_copies() > kMaxCopies) {
      fail(path + ".num_copies", absl::StrCat(spec.num_copies(), " copies; expected 1 to ", kMaxCopies));
      return false;
    }
    if (!spec.has_module()) {
      fail(path + ".module", "the ensemble has no module", "add `module { network { ... } }`");
      return false;
    }
    const double before = total_;
    if (!module(spec.module(), path + ".module")) return false;
    // The template's declared elements were counted once above; its stacked copies add
    // num_copies times as many, checked before the ensemble allocates them.
    return count((total_ - before) * static_cast<double>(spec.num_copies()), path + ".num_copies",
                 absl::StrCat("the ensemble's ", spec.num_copies(), " copies"), "weights");
  }

  bool module(const tdpolicy::Module& spec, const std::string& path) {
    if (++depth_ > 64) {
      fail(path, "modules are nested more than 64 deep");
      return false;
    }
    std::set<NestedKey> overwrites;
    for (int i = 0; i < spec.overwrite_keys_size(); ++i) {
      auto key = key_at(spec.overwrite_keys(i), absl::StrCat(path, ".overwrite_keys[", i, "]"));
      if (!key) return false;
      overwrites.insert(*key);
    }
    const auto& selected = spec.has_sequential() ? spec.sequential().selected_out_keys()
                                                 : spec.probabilistic_sequential().selected_out_keys();
    const std::string selected_path =
        path + (spec.has_sequential() ? ".sequential" : ".probabilistic_sequential") + ".selected_out_keys";
    for (int i = 0; i < selected.size(); ++i) {
      if (!key_at(selected[i], absl::StrCat(selected_path, "[", i, "]"))) return false;
    }
    bool ok = false;
    switch (spec.kind_case()) {
      case tdpolicy::Module::kSequential:
        ok = sequence(spec.sequential().modules(), path + ".sequential.modules");
        break;
      case tdpolicy::Module::kProbabilisticSequential:
        ok = sequence(spec.probabilistic_sequential().modules(), path + ".probabilistic_sequential.modules");
        break;
      case tdpolicy::Module::kNetwork:
        ok = network(spec.network(), path + ".network", overwrites);
        break;
      case tdpolicy::Module::kProbabilistic:
        ok = probabilistic(spec.probabilistic(), path + ".probabilistic", overwrites);
        break;
      case tdpolicy::Module::kEnsemble:
        ok = ensemble(spec.ensemble(), path + ".ensemble");
        break;
      case tdpolicy::Module::KIND_NOT_SET:
        fail(path, "no module kind is set",
             "one of sequential, probabilistic_sequential, network, probabilistic, ensemble");
        break;
    }
    --depth_;
    return ok;
  }

  std::string source_;
  const LoadOptions& options_;
  const Limits& limits_;
  double total_ = 0;  // declared elements so far
  double draws_ = 1;  // the num_samples of the probabilistic modules so far, multiplied
  absl::Status error_;
  std::map<NestedKey, Written> written_;
  int depth_ = 0;
};

}  // namespace

absl::Status validate_spec(const tdpolicy::PolicySpec& spec, const std::string& source, const LoadOptions& options) {
  return Validator(source, options).run(spec);
}

}  // namespace tdp::policy
