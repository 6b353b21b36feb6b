#include "sdk/nn/tensordict_sequential.h"

#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>

#include <algorithm>
#include <stdexcept>
#include <typeinfo>
#include <unordered_set>

#include "sdk/nn/errors.h"

namespace tdp::nn {
namespace {

bool contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::vector<std::shared_ptr<TensorDictModuleBase>> unwrap(
    const std::vector<TensorDictModuleRef>& refs) {
  std::vector<std::shared_ptr<TensorDictModuleBase>> modules;
  modules.reserve(refs.size());
  for (const TensorDictModuleRef& ref : refs) modules.push_back(ref.ptr());
  return modules;
}

bool is_plain_sequential(const TensorDictModuleBase& module) {
  // Exact type, as tensordict does: a subclass may narrow itself differently.
  return typeid(module) == typeid(TensorDictSequentialImpl);
}

}  // namespace

TensorDictSequentialImpl::TensorDictSequentialImpl(std::vector<TensorDictModuleRef> modules,
                                                   TensorDictSequentialOptions options)
    : TensorDictSequentialImpl("TensorDictSequential", std::move(modules), std::move(options)) {}

TensorDictSequentialImpl::TensorDictSequentialImpl(
    std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
    TensorDictSequentialOptions options)
    : TensorDictSequentialImpl("TensorDictSequential", std::move(named_modules),
                               std::move(options)) {}

TensorDictSequentialImpl::TensorDictSequentialImpl(std::string type_name,
                                                   std::vector<TensorDictModuleRef> modules,
                                                   TensorDictSequentialOptions options)
    : TensorDictModuleBase(std::move(type_name)),
      options_(std::move(options)),
      modules_(unwrap(modules)) {
  honor_skip_existing();
  names_.resize(modules_.size());
  rebuild();
  if (!options_.selected_out_keys().empty()) select_out_keys(options_.selected_out_keys());
}

TensorDictSequentialImpl::TensorDictSequentialImpl(
    std::string type_name, std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
    TensorDictSequentialOptions options)
    : TensorDictModuleBase(std::move(type_name)), options_(std::move(options)), named_(true) {
  honor_skip_existing();
  for (auto& [name, ref] : named_modules) {
    names_.push_back(name);
    modules_.push_back(ref.ptr());
  }
  rebuild();
  if (!options_.selected_out_keys().empty()) select_out_keys(options_.selected_out_keys());
}

void TensorDictSequentialImpl::rebuild() {
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (modules_[i] == nullptr) {
      throw std::invalid_argument("TensorDictSequential: module " + std::to_string(i) +
                                  " is null.");
    }
    if (named_) {
      if (names_[i].empty()) {
        throw std::invalid_argument("TensorDictSequential: module " + std::to_string(i) +
                                    " needs a name: this sequence's modules are named.");
      }
      if (!seen.insert(names_[i]).second) {
        throw std::invalid_argument("TensorDictSequential: two modules are named '" + names_[i] +
                                    "'.");
      }
    } else {
      names_[i] = std::to_string(i);
    }
  }

  // in_keys: read before any module writes them; out_keys: each key once, at its last write.
  std::vector<NestedKey> in_keys;
  std::vector<NestedKey> written;
  for (const auto& module : modules_) {
    for (const NestedKey& key : module->in_keys()) {
      if (!contains(written, key) && !contains(in_keys, key)) in_keys.push_back(key);
    }
    written.insert(written.end(), module->out_keys().begin(), module->out_keys().end());
  }
  std::vector<NestedKey> out_keys;
  for (size_t i = 0; i < written.size(); ++i) {
    if (std::find(written.begin() + static_cast<std::ptrdiff_t>(i) + 1, written.end(),
                  written[i]) == written.end()) {
      out_keys.push_back(written[i]);
    }
  }
  const std::vector<NestedKey> selection = this->out_keys();
  const bool had_selection = select_before_return_;
  set_in_keys(std::move(in_keys));
  set_out_keys(out_keys);
  complete_out_keys_ = std::move(out_keys);
  if (had_selection) select_out_keys(selection);

  std::shared_ptr<torch::nn::Module> container;
  if (named_) {
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> items;
    for (size_t i = 0; i < modules_.size(); ++i) items.emplace_back(names_[i], modules_[i]);
    container = torch::nn::ModuleDict(items).ptr();
  } else {
    auto list = torch::nn::ModuleList();
    for (const auto& module : modules_) list->push_back(module);
    container = list.ptr();
  }
  if (named_children().contains("module")) {
    replace_module("module", container);
  } else {
    register_module("module", container);
  }
}

size_t TensorDictSequentialImpl::normalize_index(int64_t index, size_t size,
                                                 bool allow_end) const {
  const int64_t n = static_cast<int64_t>(size);
  const int64_t i = index < 0 ? index + n : index;
  if (i < 0 || i > n || (i == n && !allow_end)) {
    throw std::out_of_range("TensorDictSequential: index " + std::to_string(index) +
                            " is out of range for " + std::to_string(size) + " module(s).");
  }
  return static_cast<size_t>(i);
}

std::shared_ptr<TensorDictModuleBase> TensorDictSequentialImpl::operator[](int64_t index) const {
  return modules_[normalize_index(index, modules_.size(), /*allow_end=*/false)];
}

std::shared_ptr<TensorDictModuleBase> TensorDictSequentialImpl::operator[](
    const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return modules_[i];
  }
  std::vector<NestedKey> names(names_.begin(), names_.end());
  throw KeyError("TensorDictSequential: no module named '" + name + "'; the modules are " +
                 keys_to_string(names) + ".");
}

void TensorDictSequentialImpl::throw_wrong_type(int64_t index) const {
  throw std::invalid_argument("TensorDictSequential: module " + std::to_string(index) + " is a " +
                              (*this)[index]->type_name() + ", not the type asked for.");
}

std::shared_ptr<TensorDictSequentialImpl> TensorDictSequentialImpl::slice(int64_t start,
                                                                          int64_t stop) const {
  const int64_t n = static_cast<int64_t>(modules_.size());
  auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
  const int64_t begin = clamp(start);
  const int64_t end = std::max(begin, clamp(stop));
  if (named_) {
    std::vector<std::pair<std::string, TensorDictModuleRef>> items;
    for (int64_t i = begin; i < end; ++i) items.emplace_back(names_[i], modules_[i]);
    return std::make_shared<TensorDictSequentialImpl>(std::move(items));
  }
  std::vector<TensorDictModuleRef> items(modules_.begin() + begin, modules_.begin() + end);
  return std::make_shared<TensorDictSequentialImpl>(std::move(items));
}

void TensorDictSequentialImpl::append(TensorDictModuleRef module, std::string name) {
  insert(static_cast<int64_t>(modules_.size()), std::move(module), std::move(name));
}

void TensorDictSequentialImpl::insert(int64_t index, TensorDictModuleRef module,
                                      std::string name) {
  const size_t position = normalize_index(index, modules_.size(), /*allow_end=*/true);
  if (!named_ && !name.empty()) {
    throw std::invalid_argument("TensorDictSequential: this sequence's modules are numbered; "
                                "got the name '" + name + "'.");
  }
  auto old_modules = modules_;
  auto old_names = names_;
  modules_.insert(modules_.begin() + static_cast<std::ptrdiff_t>(position), module.ptr());
  names_.insert(names_.begin() + static_cast<std::ptrdiff_t>(position), std::move(name));
  try {
    rebuild();
  } catch (...) {
    modules_ = std::move(old_modules);
    names_ = std::move(old_names);
    rebuild();
    throw;
  }
  modules_changed();
}

std::shared_ptr<TensorDictSequentialImpl> TensorDictSequentialImpl::select_subsequence(
    std::optional<std::vector<NestedKey>> in_keys_arg,
    std::optional<std::vector<NestedKey>> out_keys_arg) const {
  std::vector<NestedKey> in_keys = in_keys_arg ? std::move(*in_keys_arg) : this->in_keys();
  std::vector<NestedKey> out_keys = out_keys_arg ? std::move(*out_keys_arg) : this->out_keys();
  std::vector<std::shared_ptr<TensorDictModuleBase>> modules = modules_;
  std::vector<bool> keep(modules.size(), true);

  // Forward pass: keep the modules whose inputs all derive from in_keys.
  for (size_t i = 0; i < modules.size(); ++i) {
    if (is_plain_sequential(*modules[i])) {
      try {
        modules[i] = static_cast<const TensorDictSequentialImpl&>(*modules[i])
                         .select_subsequence(in_keys, std::nullopt);
      } catch (const std::invalid_argument&) {
        keep[i] = false;
        continue;
      }
    }
    const auto& needed = modules[i]->in_keys();
    if (std::all_of(needed.begin(), needed.end(),
                    [&](const NestedKey& key) { return contains(in_keys, key); })) {
      in_keys.insert(in_keys.end(), modules[i]->out_keys().begin(), modules[i]->out_keys().end());
    } else {
      keep[i] = false;
    }
  }
  // Backward pass: among those, keep the modules that out_keys depend on.
  for (size_t j = modules.size(); j-- > 0;) {
    if (!keep[j]) continue;
    const auto& written = modules[j]->out_keys();
    if (std::any_of(written.begin(), written.end(),
                    [&](const NestedKey& key) { return contains(out_keys, key); })) {
      if (is_plain_sequential(*modules[j])) {
        modules[j] = static_cast<const TensorDictSequentialImpl&>(*modules[j])
                         .select_subsequence(std::nullopt, out_keys);
      }
      out_keys.insert(out_keys.end(), modules[j]->in_keys().begin(), modules[j]->in_keys().end());
    } else {
      keep[j] = false;
    }
  }

  if (std::none_of(keep.begin(), keep.end(), [](bool k) { return k; })) {
    throw std::invalid_argument(
        "No modules left after selection. Make sure that in_keys and out_keys are coherent.");
  }
  if (named_) {
    std::vector<std::pair<std::string, TensorDictModuleRef>> items;
    for (size_t i = 0; i < modules.size(); ++i) {
      if (keep[i]) items.emplace_back(names_[i], modules[i]);
    }
    return std::make_shared<TensorDictSequentialImpl>(std::move(items));
  }
  std::vector<TensorDictModuleRef> items;
  for (size_t i = 0; i < modules.size(); ++i) {
    if (keep[i]) items.emplace_back(modules[i]);
  }
  return std::make_shared<TensorDictSequentialImpl>(std::move(items));
}

TensorDictSequentialImpl& TensorDictSequentialImpl::select_out_keys(const std::vector<NestedKey>& keys,
                                                                    OutKeysSelection /*rule*/) {
  for (const NestedKey& key : keys) {
    if (!contains(out_keys(), key)) {
      throw std::invalid_argument("All keys in selected_out_keys must be in out_keys. " +
                                  describe() + " has no out_key " + key.to_string() + ".");
    }
  }
  set_apparent_out_keys(keys);
  select_before_return_ = true;
  return *this;
}

TensorDictSequentialImpl& TensorDictSequentialImpl::reset_out_keys() {
  set_apparent_out_keys(complete_out_keys_);
  select_before_return_ = false;
  return *this;
}

TensorDict TensorDictSequentialImpl::forward_impl(
    TensorDict tensordict, const std::optional<TensorDict>& tensordict_out) {
  return run_modules(tensordict, tensordict_out,
                     [this](size_t index, const TensorDict& td) { return modules_[index]->forward(td); });
}

TensorDictSequentialImpl::Run TensorDictSequentialImpl::begin_run(
    const TensorDict& tensordict, const std::optional<TensorDict>& tensordict_out) const {
  // With a selection or an explicit output, the modules run on a shallow copy so that the
  // input only receives what is asked for.
  Run run{(tensordict_out.has_value() || select_before_return_) ? tensordict.clone(/*deep=*/false) : tensordict,
          tensordict_out};
  if (!run.out.has_value() && options_.inplace().has_value()) {
    switch (*options_.inplace()) {
      case Inplace::kTrue:
        run.out = tensordict;
        break;
      case Inplace::kFalse:
        run.out = TensorDict();
        break;
      case Inplace::kEmpty:
        run.out = tensordict.empty();
        break;
    }
  }
  return run;
}

bool TensorDictSequentialImpl::has_inputs(const TensorDictModuleBase& module, const TensorDict& tensordict) {
  const auto& needed = module.in_keys();
  return std::all_of(needed.begin(), needed.end(), [&](const NestedKey& key) { return tensordict.contains(key); });
}

void TensorDictSequentialImpl::rethrow_from_module(size_t index) const {
  detail::rethrow_with_context(describe() + ": failed while executing module '" + names_[index] + "'");
}

TensorDict TensorDictSequentialImpl::end_run(TensorDict tensordict, Run run) const {
  TensorDict& exec = run.exec;
  if (run.out.has_value()) {
    TensorDict& out = *run.out;
    if (out.is_same(exec)) return exec;
    for (const NestedKey& key : out_keys()) {
      if (exec.contains(key)) out.set(key, exec.get_entry(key));
    }
    return out;
  }
  if (select_before_return_) {
    // Selected keys, plus the input's own entries, which modules may have updated.
    std::vector<NestedKey> keys = out_keys();
    for (NestedKey& key : tensordict.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      if (!contains(keys, key)) keys.push_back(std::move(key));
    }
    for (const NestedKey& key : keys) {
      if (exec.contains(key)) tensordict.set(key, exec.get_entry(key));
    }
    return tensordict;
  }
  return exec;
}

std::string TensorDictSequentialImpl::to_string() const {
  std::string list = named_ ? "ModuleDict(\n" : "ModuleList(\n";
  for (size_t i = 0; i < modules_.size(); ++i) {
    list += "  (" + names_[i] + "): " + indent_repr(modules_[i]->to_string(), 2) + "\n";
  }
  list += ")";
  std::vector<std::string> fields = {"module=" + list};
  if (options_.partial_tolerant()) fields.push_back("partial_tolerant=True");
  if (options_.inplace().has_value()) fields.push_back("inplace=" + nn::to_string(*options_.inplace()));
  for (std::string& field : repr_fields()) fields.push_back(std::move(field));
  fields.push_back("in_keys=" + keys_to_string(in_keys()));
  fields.push_back("out_keys=" + keys_to_string(out_keys()));
  std::string body;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) body += ",\n";
    body += "    " + indent_repr(fields[i], 4);
  }
  return type_name() + "(\n" + body + ")";
}

}  // namespace tdp::nn
