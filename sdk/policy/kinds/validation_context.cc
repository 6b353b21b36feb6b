#include "sdk/policy/kinds/validation_context.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "sdk/nn/mappings.h"
#include "sdk/policy/kinds/action_spec.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {

Shape with_last(const Shape& shape, int64_t last) {
  if (!shape) return std::vector<int64_t>{last};
  std::vector<int64_t> out = *shape;
  if (out.empty()) out.push_back(last); else out.back() = last;
  return out;
}

bool ValidationContext::fail(const std::string& path, const std::string& message, const std::string& hint) {
  error_ = absl::InvalidArgumentError(
      absl::StrCat(source_, ": ", path, ": ", message, hint.empty() ? "" : absl::StrCat(" (hint: ", hint, ")")));
  return false;
}

bool ValidationContext::module(const tdpolicy::Module& spec, const std::string& path) {
  if (++depth_ > 64) return fail(path, "modules are nested more than 64 deep");
  std::set<NestedKey> overwrites;
  for (int i = 0; i < spec.overwrite_keys_size(); ++i) {
    auto key = key_at(spec.overwrite_keys(i), absl::StrCat(path, ".overwrite_keys[", i, "]"));
    if (!key) return false;
    overwrites.insert(*key);
  }
  bool ok = false;
  if (spec.kind_case() == tdpolicy::Module::KIND_NOT_SET) {
    fail(path, "no module kind is set", absl::StrCat("one of ", module_kind_names()));
  } else if (const ModuleKind* kind = module_kind(spec.kind_case())) {
    ok = kind->validate(spec, path, overwrites, *this) && validate_projections(spec, path, *this);
  } else {
    fail(absl::StrCat(path, ".", kind_name(spec.kind_case())), "this SDK has no entry for the module kind");
  }
  --depth_;
  return ok;
}

std::optional<NestedKey> ValidationContext::key_at(const std::string& text, const std::string& path) {
  auto key = parse_key(text);
  if (!key.ok()) {
    fail(path, std::string(key.status().message()));
    return std::nullopt;
  }
  return *key;
}

// The map orders keys by path, so the entries under `key` are the run that starts at it.
std::vector<std::pair<const NestedKey*, const Shape*>> ValidationContext::written_at_or_under(
    const NestedKey& key) const {
  std::vector<std::pair<const NestedKey*, const Shape*>> found;
  for (auto it = written_.lower_bound(key); it != written_.end() && it->first.starts_with(key); ++it) {
    found.emplace_back(&it->first, &it->second.shape);
  }
  return found;
}

std::string ValidationContext::written_list() const {
  std::vector<std::string> keys;
  for (const auto& [key, info] : written_) keys.push_back(absl::StrCat("\"", key_string(key), "\""));
  return absl::StrCat("[", absl::StrJoin(keys, ", "), "]");
}

std::optional<Shape> ValidationContext::read(const std::string& text, const std::string& path) {
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

bool ValidationContext::write(const std::string& text, const std::string& path, Shape shape,
                              const std::set<NestedKey>& overwrites) {
  if (text == "_") return true;
  auto key = key_at(text, path);
  if (!key) return false;
  auto found = written_.find(*key);
  if (found != written_.end() && !overwrites.count(*key)) {
    return fail(path, absl::StrCat("key \"", text, "\" is already written by ", found->second.by),
                "list it in this module's overwrite_keys if overwriting it is intended");
  }
  if (!fits_one_tensor(shape, path, absl::StrCat("key \"", text, "\""))) return false;
  written_[*key] = {path, std::move(shape)};
  return true;
}

bool ValidationContext::fits_one_tensor(const Shape& per_env, const std::string& path, const std::string& what,
                                        double extra_draws, const char* extra_draws_from) {
  const double draws = draws_ * extra_draws;
  double elements = draws;
  if (per_env) {
    for (int64_t size : *per_env) elements *= static_cast<double>(std::max<int64_t>(size, 1));
  }
  if (elements <= static_cast<double>(limits_.max_tensor_elements)) return true;
  const std::string shape = per_env ? shape_to_string(*per_env) : std::string("[?]");
  std::string draws_from = draws_ == 1 ? "" : "num_samples";
  if (extra_draws != 1) {
    draws_from = draws_from.empty() ? std::string(extra_draws_from) : absl::StrCat(draws_from, " x ", extra_draws_from);
  }
  return fail(path, limit_exceeded(draws == 1 ? absl::StrCat(what, ", of per-env shape ", shape, ",")
                                              : absl::StrCat(what, ", ", saturated_count(draws), " draws (", draws_from,
                                                             ") of per-env shape ", shape, ","),
                                   saturated_count(elements), "elements", limits_.max_tensor_elements,
                                   "max_tensor_elements"));
}

bool ValidationContext::allocatable(double weights, const std::string& path) {
  return count(weights, path, "the layer sizes make a network that", "weights");
}

bool ValidationContext::count(double elements, const std::string& path, const std::string& what,
                              const std::string& unit) {
  if (elements > static_cast<double>(limits_.max_tensor_elements)) {
    return fail(path,
                limit_exceeded(what, saturated_count(elements), unit, limits_.max_tensor_elements, "max_tensor_elements"));
  }
  total_ += elements;
  if (total_ > static_cast<double>(limits_.max_total_elements)) {
    return fail(path, limit_exceeded("the spec (layers, parameters, self tests, inputs)", saturated_count(total_),
                                     "declared elements", limits_.max_total_elements, "max_total_elements"));
  }
  return true;
}

bool ValidationContext::declared(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& path,
                                 const std::string& what) {
  double elements = 1;
  for (int64_t size : shape) {
    if (size < 0) return fail(path, absl::StrCat("negative size ", size));
    elements *= static_cast<double>(size);
  }
  return count(elements, path, absl::StrCat(what, " ", shape_to_string({shape.data(), static_cast<size_t>(shape.size())})),
               "elements");
}

bool ValidationContext::positive(int64_t value, const std::string& path) {
  if (value > 0) return true;
  return fail(path, absl::StrCat("must be positive, got ", value));
}

bool ValidationContext::finite(double value, const std::string& path) {
  if (std::isfinite(value)) return true;
  return fail(path, absl::StrCat("must be a finite number, got ", value));
}

bool ValidationContext::scale_lower_bound(bool has, double value, const std::string& path) {
  if (!has || (std::isfinite(value) && value > 0)) return true;
  return fail(path, absl::StrCat("the scale's lower bound must be a finite number > 0, got ", value),
              "leave it unset for 1e-4");
}

bool ValidationContext::mapping_known(const std::string& name, const std::string& path) {
  try {
    nn::mappings(name);
  } catch (const std::exception& error) {
    return fail(path, error.what());
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

bool ValidationContext::inside_folder(const std::string& file, const std::string& path) {
  if (options_.allow_outside_files) return true;
  const std::string hint = "name a file in the spec's folder, or allow outside files with "
                           "LoadOptions.allow_outside_files or the tdp flag --allow_outside_files";
  if (!file.empty() && file[0] == '/') return fail(path, absl::StrCat("\"", file, "\" is an absolute path"), hint);
  for (absl::string_view level : absl::StrSplit(file, '/')) {
    if (level == "..") return fail(path, absl::StrCat("\"", file, "\" leaves the spec's folder (\"..\")"), hint);
  }
  return true;
}

bool ValidationContext::check_last_dim(const Shape& shape, int64_t expected, const std::string& path,
                                       const std::string& what) {
  if (!shape || shape->empty() || shape->back() == expected) return true;
  return fail(path, absl::StrCat("the input has shape ", shape_to_string(*shape), " but ", what, " is ", expected),
              "make the declared input shape and the layer size agree");
}

bool ValidationContext::arity(const NetworkSite& site, int in, int out, const char* kind) {
  if (site.module.in_keys_size() != in) {
    return fail(site.path + ".in_keys", absl::StrCat(kind, " reads ", in, " key(s), got ", site.module.in_keys_size()));
  }
  if (site.module.out_keys_size() != out) {
    return fail(site.path + ".out_keys",
                absl::StrCat(kind, " writes ", out, " key(s), got ", site.module.out_keys_size()));
  }
  return true;
}

}  // namespace tdp::policy::kinds
