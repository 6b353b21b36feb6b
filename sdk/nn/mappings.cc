#include "sdk/nn/mappings.h"

#include <ATen/Functions.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

#include "sdk/nn/biased_softplus.h"

namespace tdp::nn {
namespace {

struct Registry {
  std::shared_mutex mutex;
  std::map<std::string, Mapping> mappings;  // guarded by mutex
};

Registry& registry() {
  static Registry* instance = [] {
    auto* r = new Registry();  // never destroyed: mappings may be used during static teardown
    r->mappings["softplus"] = [](const at::Tensor& x) { return at::softplus(x); };
    r->mappings["exp"] = [](const at::Tensor& x) { return x.exp(); };
    r->mappings["relu"] = [](const at::Tensor& x) { return x.relu(); };
    r->mappings["expln"] = [](const at::Tensor& x) { return expln(x); };
    r->mappings["abs"] = [](const at::Tensor& x) { return x.abs(); };
    r->mappings["none"] = [](const at::Tensor& x) { return x; };
    r->mappings["biased_softplus"] = [module = BiasedSoftplus(1.0)](const at::Tensor& x) mutable {
      return module(x);
    };
    return r;
  }();
  return *instance;
}

[[noreturn]] void throw_unknown(const std::string& name, const std::string& why) {
  throw std::invalid_argument("Unknown mapping '" + name + "'" + why + "; known mappings: " +
                              absl::StrJoin(mapping_names(), ", ") + ".");
}

}  // namespace

Mapping mappings(const std::string& name) {
  {
    Registry& r = registry();
    std::shared_lock<std::shared_mutex> lock(r.mutex);
    auto it = r.mappings.find(name);
    if (it != r.mappings.end()) return it->second;
  }
  const std::string prefix = "biased_softplus_";
  if (name.rfind(prefix, 0) != 0) throw_unknown(name, "");
  // biased_softplus_<bias> or biased_softplus_<bias>_<min_val>.
  std::vector<std::string> parts = absl::StrSplit(name.substr(prefix.size()), '_');
  if (parts.size() > 2) {
    throw_unknown(name, " (invalid number of args: biased_softplus takes a bias and an optional "
                        "min_val)");
  }
  double bias = 0.0;
  double min_val = 0.01;
  if (!absl::SimpleAtod(parts[0], &bias) ||
      (parts.size() == 2 && !absl::SimpleAtod(parts[1], &min_val))) {
    throw_unknown(name, " (the bias and min_val must be numbers)");
  }
  BiasedSoftplus module(BiasedSoftplusOptions(bias).min_val(min_val));
  return [module](const at::Tensor& x) mutable { return module(x); };
}

void add_custom_mapping(const std::string& name, Mapping mapping) {
  if (name.empty() || !mapping) {
    throw std::invalid_argument("add_custom_mapping: the name and the mapping must be non-empty.");
  }
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  r.mappings[name] = std::move(mapping);
}

std::vector<std::string> mapping_names() {
  std::vector<std::string> names = {"biased_softplus_<bias>", "biased_softplus_<bias>_<min_val>"};
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  for (const auto& item : r.mappings) names.push_back(item.first);
  std::sort(names.begin(), names.end());
  return names;
}

at::Tensor expln(const at::Tensor& x) {
  // Each branch sees only its own half of the inputs, so neither overflows and the gradient
  // of the unused branch is never inf * 0.
  return at::where(x.le(0), x.clamp_max(0).exp(), x.clamp_min(0).log1p().add(1));
}

}  // namespace tdp::nn
