// TensorDictSequential: runs tensordict modules one after the other on the same TensorDict,
// each reading what earlier ones wrote. Python's tensordict.nn.TensorDictSequential.
//
//   using tdp::nn::TensorDictModule, tdp::nn::TensorDictModuleOptions;
//   tdp::nn::TensorDictSequential policy({
//       TensorDictModule(torch::nn::Linear(17, 64), TensorDictModuleOptions({"observation"}, {"hidden"})),
//       TensorDictModule(torch::nn::Linear(64, 6), TensorDictModuleOptions({"hidden"}, {"action"}))});
//   policy(td);                                   // writes "hidden" and "action"
//   policy->in_keys();                            // ['observation']
//   policy->select_out_keys({"action"});          // "hidden" is no longer left in td
//
// Keys: in_keys() are the keys some module reads before any module writes them; out_keys()
// are the keys written, each once, in the order of their last write. Nested sequences count
// through their own keys. Modules may be named (the ordered-dict form) or numbered.
// Options: partial_tolerant (skip modules whose inputs are missing), selected_out_keys (as
// select_out_keys()), inplace (unset: whatever the modules do; kTrue: the input is returned;
// kFalse: a new TensorDict with the out_keys; kEmpty: input.empty() with the out_keys).
// Parameters are named as in Python: "module.0.module.weight".
// Unlike Python, every element must be a tensordict module: wrap a plain TensorDict -> TensorDict
// function in a WrapModule (Python does that implicitly).
#pragma once

#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <exception>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

struct TensorDictSequentialOptions {
  // Skip the modules whose in_keys are not all in the TensorDict.
  TORCH_ARG(bool, partial_tolerant) = false;
  // Keep only these out_keys in the output (empty: all of them).
  TORCH_ARG(std::vector<NestedKey>, selected_out_keys);
  // Unset: each module decides where it writes.
  TORCH_ARG(std::optional<Inplace>, inplace);

 public:
  TensorDictSequentialOptions& inplace(bool value) {
    inplace_ = value ? Inplace::kTrue : Inplace::kFalse;
    return *this;
  }
};

class TensorDictSequentialImpl : public TensorDictModuleBase {
 public:
  // Numbered modules ("0", "1", ...).
  explicit TensorDictSequentialImpl(std::vector<TensorDictModuleRef> modules,
                                    TensorDictSequentialOptions options = {});
  // Named modules, in this order (Python's OrderedDict form).
  explicit TensorDictSequentialImpl(
      std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
      TensorDictSequentialOptions options = {});

  size_t size() const { return modules_.size(); }
  bool is_named() const { return named_; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::shared_ptr<TensorDictModuleBase>>& modules() const { return modules_; }
  // The module at `index` (negative counts from the end); throws std::out_of_range.
  std::shared_ptr<TensorDictModuleBase> operator[](int64_t index) const;
  // The module named `name` (named form only); throws tdp::KeyError listing the names.
  std::shared_ptr<TensorDictModuleBase> operator[](const std::string& name) const;
  // The module at `index`, cast to M; throws std::invalid_argument when it is not an M.
  template <typename M>
  std::shared_ptr<M> at(int64_t index) const {
    auto cast = std::dynamic_pointer_cast<M>((*this)[index]);
    if (cast == nullptr) throw_wrong_type(index);
    return cast;
  }
  // A new sequence with modules [start, stop) (Python slicing; negative counts from the end).
  // The modules are shared, not copied.
  // Virtual so that a subclass returns its own type (ProbabilisticTensorDictSequential does).
  virtual std::shared_ptr<TensorDictSequentialImpl> slice(int64_t start, int64_t stop) const;

  // Adds a module at the end / before position `index`, and recomputes the keys. A selection
  // made with select_out_keys() stays if its keys are still out_keys, else throws.
  void append(TensorDictModuleRef module, std::string name = "");
  void insert(int64_t index, TensorDictModuleRef module, std::string name = "");

  // A new sequence with only the modules needed to compute `out_keys` from `in_keys` (each
  // defaults to this sequence's keys): first the modules that depend on in_keys (directly
  // or through earlier modules), then, among those, the ones that out_keys depend on. Nested
  // TensorDictSequentials are narrowed the same way. Throws std::invalid_argument when no
  // module is left.
  std::shared_ptr<TensorDictSequentialImpl> select_subsequence(
      std::optional<std::vector<NestedKey>> in_keys = std::nullopt,
      std::optional<std::vector<NestedKey>> out_keys = std::nullopt) const;

  // tensordict's sequence rule, whatever `rule` says: the unselected keys the modules write are
  // removed unless the caller passed them in (then they are updated); other entries stay.
  TensorDictSequentialImpl& select_out_keys(const std::vector<NestedKey>& keys,
                                            OutKeysSelection rule = OutKeysSelection::kReference) override;
  TensorDictSequentialImpl& reset_out_keys() override;

  const TensorDictSequentialOptions& options() const { return options_; }
  std::string to_string() const override;

 protected:
  // For subclasses: `type_name` is what to_string() and errors call the sequence.
  TensorDictSequentialImpl(std::string type_name, std::vector<TensorDictModuleRef> modules,
                           TensorDictSequentialOptions options);
  TensorDictSequentialImpl(std::string type_name,
                           std::vector<std::pair<std::string, TensorDictModuleRef>> named_modules,
                           TensorDictSequentialOptions options);

  // Runs the modules in order on `tensordict`, `step(index, td)` running module `index` on `td`
  // and returning what the next one reads, then applies the options and the selection: the
  // one loop of forward_impl() (step: the module's forward()) and of a subclass entry point
  // that passes per-call arguments to its modules. A template, so that the call from the
  // sequence to its modules is a plain loop, with no callback in between.
  template <typename Step>
  TensorDict run_modules(const TensorDict& tensordict, const std::optional<TensorDict>& tensordict_out,
                         Step&& step) {
    Run run = begin_run(tensordict, tensordict_out);
    for (size_t i = 0; i < modules_.size(); ++i) {
      if (options_.partial_tolerant() && !has_inputs(*modules_[i], run.exec)) continue;
      try {
        run.exec = step(i, run.exec);
      } catch (const std::exception&) {
        rethrow_from_module(i);
      }
    }
    return end_run(tensordict, std::move(run));
  }
  // Called after append()/insert() changed modules(), for subclasses that derive state from them.
  virtual void modules_changed() {}

  TensorDict forward_impl(TensorDict tensordict,
                          const std::optional<TensorDict>& tensordict_out) override;

 private:
  // One call of run_modules(): the TensorDict the modules run on, and where the outputs go.
  struct Run {
    TensorDict exec;
    std::optional<TensorDict> out;
  };
  Run begin_run(const TensorDict& tensordict, const std::optional<TensorDict>& tensordict_out) const;
  TensorDict end_run(TensorDict tensordict, Run run) const;
  static bool has_inputs(const TensorDictModuleBase& module, const TensorDict& tensordict);
  // Rethrows the exception in flight with this sequence and module `index` named.
  [[noreturn]] void rethrow_from_module(size_t index) const;
  void rebuild();
  [[noreturn]] void throw_wrong_type(int64_t index) const;
  size_t normalize_index(int64_t index, size_t size, bool allow_end) const;

  TensorDictSequentialOptions options_;
  std::vector<std::shared_ptr<TensorDictModuleBase>> modules_;
  std::vector<std::string> names_;
  bool named_ = false;
  bool select_before_return_ = false;
  std::vector<NestedKey> complete_out_keys_;
};

class TensorDictSequential : public torch::nn::ModuleHolder<TensorDictSequentialImpl> {
 public:
  using torch::nn::ModuleHolder<TensorDictSequentialImpl>::ModuleHolder;
  using Impl = TensorDictSequentialImpl;

  TensorDictSequential(std::initializer_list<TensorDictModuleRef> modules,
                       TensorDictSequentialOptions options = {})
      : ModuleHolder(std::make_shared<TensorDictSequentialImpl>(
            std::vector<TensorDictModuleRef>(modules), std::move(options))) {}
  TensorDictSequential(std::initializer_list<std::pair<std::string, TensorDictModuleRef>> modules,
                       TensorDictSequentialOptions options = {})
      : ModuleHolder(std::make_shared<TensorDictSequentialImpl>(
            std::vector<std::pair<std::string, TensorDictModuleRef>>(modules),
            std::move(options))) {}
};

}  // namespace tdp::nn
