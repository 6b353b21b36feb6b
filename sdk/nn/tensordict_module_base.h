// TensorDictModuleBase: the base class of every tensordict module. A tensordict module reads
// the entries named by in_keys() from a TensorDict and writes the entries named by out_keys();
// that contract is what lets TensorDictSequential chain modules and compute its own keys.
// It is a torch::nn::Module, so parameters(), to(), train()/eval() and torch::save just work.
//
//   struct AddOne : tdp::nn::TensorDictModuleBase {
//     AddOne() : TensorDictModuleBase("AddOne", {"a"}, {"b"}) {}
//     tdp::TensorDict forward_impl(tdp::TensorDict td, const std::optional<tdp::TensorDict>&) override {
//       return td.set("b", td.get("a") + 1);
//     }
//   };
//   auto module = std::make_shared<AddOne>();  module->forward(td);   // td now has "b"
//
// forward() is the entry point; it applies select_out_keys() and, for the module kinds that
// honour it, the skip-existing mode (skip_existing.h), and calls the subclass's forward_impl().
// As in tensordict, only TensorDictModule, TensorDictSequential and the probabilistic modules
// (and their subclasses) honour skip-existing: a custom subclass of this base, a WrapModule or a
// wrapper always runs (a subclass opts in with honor_skip_existing()).
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::nn {

// Where a module writes its outputs: into the input TensorDict (kTrue), into a new empty
// TensorDict with batch_size [] and no device (kFalse), or into input.empty(), which keeps
// the batch_size and device (kEmpty). Python's inplace=True / False / "empty".
enum class Inplace { kFalse, kTrue, kEmpty };
std::string to_string(Inplace inplace);  // True, False or 'empty', as Python prints them

// What select_out_keys() leaves in a module's output.
enum class OutKeysSelection {
  // tensordict's rule for the module's kind (the default). A single module (TensorDictModule,
  // ProbabilisticTensorDictModule, WrapModule, a subclass) keeps only its in_keys and the
  // selected out_keys in the TensorDict it returns: every other entry is removed, in place,
  // including entries the caller passed that the module never touched. A sequence removes
  // only the unselected keys its modules wrote (kKeepOtherEntries' rule).
  kReference,
  // Removes only the unselected keys the module writes, and keeps those the caller passed in
  // (updated); every other entry stays. The same as kReference for sequences.
  kKeepOtherEntries,
};

// Implemented by user modules that hold parameters and know how to re-initialize them, so that
// reset_parameters_recursive() reaches them (LibTorch's own layers are handled without it).
class ParameterResettable {
 public:
  virtual ~ParameterResettable() = default;
  virtual void reset_parameters() = 0;
};

// LibTorch's layers draw their initial parameters from the global generator, which any thread
// may draw from at any time. While an InitGeneratorGuard is alive on a thread,
// reset_parameters_recursive() (and so an EnsembleModule's reset) on that thread draws from the
// guard's generator instead, as reset_layer_parameters() does: a seeded build (a spec's
// init_seed) gets the same weights whatever other threads draw.
//
//   tdp::nn::InitGeneratorGuard seeded(at::detail::createCPUGenerator(spec.init_seed()));
//   module->reset_parameters_recursive();
class InitGeneratorGuard {
 public:
  explicit InitGeneratorGuard(at::Generator generator);
  ~InitGeneratorGuard();
  InitGeneratorGuard(const InitGeneratorGuard&) = delete;
  InitGeneratorGuard& operator=(const InitGeneratorGuard&) = delete;

 private:
  std::optional<at::Generator> previous_;
};

// The generator of this thread's innermost InitGeneratorGuard; empty: none (the global one).
std::optional<at::Generator> init_generator();

// Draws the parameters of one LibTorch layer that draws at initialization (Linear, Bilinear,
// Conv*, ConvTranspose*, Embedding*, RNN/LSTM/GRU and their cells) from `generator`, with exactly
// the bounds and order of the layer's own reset_parameters(): the same generator state gives the
// same values. False for any other module (norms initialize to ones and zeros, drawing nothing).
bool reset_layer_parameters(torch::nn::Module& module, const at::Generator& generator);

// torch::nn::init::kaiming_uniform_(tensor, a) (fan in, leaky_relu), drawn from `generator`.
void kaiming_uniform(at::Tensor& tensor, double a, const at::Generator& generator);

class TensorDictModuleBase : public torch::nn::Module {
 public:
  // Runs the module. Without `tensordict_out` the module decides where outputs go (see
  // Inplace); with it, outputs are written there and it is returned.
  TensorDict forward(const TensorDict& tensordict,
                     const std::optional<TensorDict>& tensordict_out = std::nullopt);

  const std::vector<NestedKey>& in_keys() const { return in_keys_; }
  // The keys found in the output: out_keys_source() unless select_out_keys() narrowed them.
  const std::vector<NestedKey>& out_keys() const { return out_keys_; }
  // Every key the module writes, whatever the selection.
  const std::vector<NestedKey>& out_keys_source() const { return out_keys_source_; }

  // Keeps only `keys` (a subset of out_keys()) among the outputs; what else the returned
  // TensorDict keeps is `rule`'s (see OutKeysSelection: by default tensordict's rule for this
  // kind of module). Throws std::invalid_argument naming the key that is not an out_key.
  virtual TensorDictModuleBase& select_out_keys(const std::vector<NestedKey>& keys,
                                                OutKeysSelection rule = OutKeysSelection::kReference);
  // Undoes select_out_keys().
  virtual TensorDictModuleBase& reset_out_keys();

  // Re-initializes, depth first, every descendant that knows how: LibTorch layers with a
  // reset_parameters() (Linear, Conv*, *Norm*, Embedding*, RNN/LSTM/GRU and their cells,
  // Bilinear) and modules implementing ParameterResettable. Parameters are re-initialized in
  // place, so optimizers and shared references keep working. Returns false, and logs a
  // warning, when nothing was reset.
  bool reset_parameters_recursive();

  // Python's repr: Name(\n    child=...,\n    in_keys=[...],\n    out_keys=[...]).
  virtual std::string to_string() const;
  // LibTorch's printed form (operator<<): this one-line header, then the children.
  void pretty_print(std::ostream& stream) const override;

  // The class name shown by to_string() and error messages, e.g. "TensorDictModule".
  const std::string& type_name() const { return type_name_; }

 protected:
  // `name` is the class name; in_keys and out_keys may also be set later by the subclass.
  explicit TensorDictModuleBase(std::string name, std::vector<NestedKey> in_keys = {},
                                std::vector<NestedKey> out_keys = {});

  // Subclasses do their work here. `tensordict_out` is forward()'s argument, untouched.
  virtual TensorDict forward_impl(TensorDict tensordict,
                                  const std::optional<TensorDict>& tensordict_out) = 0;

  // forward()'s handling (skip-existing, select_out_keys()) as calls around a body, for a
  // subclass entry point that takes more arguments than forward() (forward_with_kwargs,
  // forward_with_request): the body is then written once, in that entry point, not behind a
  // callback.
  //
  //   if (skips(tensordict)) return tensordict;
  //   const std::vector<bool> given = dropped_keys_given(tensordict);
  //   TensorDict result = ...;                                  // the body
  //   return apply_selection(std::move(result), tensordict, given);
  bool skips(const TensorDict& tensordict) const;
  // Which of the keys select_out_keys() left out the input holds: the caller's own data, kept
  // (updated) under kKeepOtherEntries. Empty, and not allocated, without such a selection.
  std::vector<bool> dropped_keys_given(const TensorDict& tensordict) const;
  // `result` with select_out_keys() applied; `given` from dropped_keys_given(input).
  TensorDict apply_selection(TensorDict result, const TensorDict& input, const std::vector<bool>& given) const;
  // Whether select_out_keys() narrowed the outputs (apply_selection() then has work to do).
  bool has_out_keys_selection() const { return selected_; }
  // For a subclass whose forward_impl() calls its own entry point, which does the handling
  // above: forward() then calls forward_impl() directly, so that the handling runs once.
  void handle_forward_in_entry_point() { handles_forward_itself_ = true; }

  // Makes forward() honour the skip-existing mode (see the header comment); the module kinds
  // that do in tensordict call it in their constructors.
  void honor_skip_existing() { honors_skip_existing_ = true; }

  void set_in_keys(std::vector<NestedKey> keys);
  // Sets out_keys_source() and out_keys(), dropping any selection.
  void set_out_keys(std::vector<NestedKey> keys);
  // Sets only the visible out_keys(); for subclasses that implement their own selection.
  void set_apparent_out_keys(std::vector<NestedKey> keys);

  // Extra "name=value" fields that to_string() shows before the keys.
  virtual std::vector<std::string> repr_fields() const { return {}; }
  // The fields for the children (name=child), in registration order.
  std::vector<std::string> children_repr_fields() const;

  // A short description of this module for error messages: Name(in_keys=[...], out_keys=[...]).
  std::string describe() const;

 private:
  bool should_skip(const TensorDict& tensordict) const;

  std::string type_name_;
  std::vector<NestedKey> in_keys_;
  std::vector<NestedKey> out_keys_;
  std::vector<NestedKey> out_keys_source_;
  // Written keys that select_out_keys() left out; empty when there is no selection.
  std::vector<NestedKey> dropped_out_keys_;
  bool selected_ = false;
  OutKeysSelection selection_rule_ = OutKeysSelection::kReference;
  bool honors_skip_existing_ = false;
  bool handles_forward_itself_ = false;
};

// A tensordict module given to a container: converts from any module holder of, or
// std::shared_ptr to, a TensorDictModuleBase subclass.
class TensorDictModuleRef {
 public:
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<TensorDictModuleBase, M>>>
  TensorDictModuleRef(std::shared_ptr<M> module)  // NOLINT: implicit by design
      : ptr_(std::move(module)) {}
  template <typename M, typename = std::enable_if_t<std::is_base_of_v<TensorDictModuleBase, M>>>
  TensorDictModuleRef(const torch::nn::ModuleHolder<M>& holder)  // NOLINT
      : ptr_(holder.is_empty() ? nullptr : holder.ptr()) {}

  const std::shared_ptr<TensorDictModuleBase>& ptr() const { return ptr_; }

 private:
  std::shared_ptr<TensorDictModuleBase> ptr_;
};

// Indents every line but the first by `spaces`, as Python's repr of nested modules does.
std::string indent_repr(const std::string& text, int spaces);

}  // namespace tdp::nn
