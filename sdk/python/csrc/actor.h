// tdpolicy.Actor: the C++ tdp::actor::Actor as a Python class. It acts on tensordict.TensorDicts
// (a TensorDict of the actor's outputs comes back) and on plain tensors (a dict comes back), with
// the tensors shared both ways and the GIL released while the policy runs; refresh_from(module)
// copies the weights of the live PyTorch module the spec was exported from.
//
//   actor = tdpolicy.Actor.load("policies/cartpole_categorical.pbtxt", seed=0)
//   out = actor.act(observation=torch.zeros(1, 4))          # {"action": ..., "sample_log_prob": ...}
//   td = actor.act(TensorDict(observation=obs, batch_size=[8]), interaction="deterministic")
//   actor.refresh_from(policy)                              # after an optimizer step
//   action, log_prob = actor.act_tensor(torch.zeros(1, 4))  # plain tensors, the fastest call
//
// The Python-facing names (load's backend, device, seed, interaction; in_keys, out_keys) follow
// tdp::actor::ActorOptions and tensordict's modules.
#pragma once

#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"

namespace tdp::python {

namespace py = pybind11;

class PyActor {
 public:
  explicit PyActor(std::unique_ptr<actor::Actor> actor);

  // The C++ actor, shared with the collectors that run it.
  const std::shared_ptr<actor::Actor>& actor() const { return actor_; }

  py::object act(py::object td, py::object interaction, py::kwargs tensors);
  // act_tensor(*inputs, interaction=None): one tensor per declared input that is neither
  // recurrent state nor optional, in in_keys order -> the outputs in out_keys order (a tuple). A
  // CPython METH_FASTCALL method rather than a pybind11 one: at batch 1 pybind11's dispatch
  // (argument tuple and kwargs dict, casters, the result's dict) cost more than the policy.
  static PyObject* act_tensor(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
  // Copies the weights of `module` (the tensordict / TorchRL module the spec was exported from,
  // or any module of the same structure) into the C++ actor.
  void refresh_from(py::object module);
  // refresh_from in two halves, for a collector that applies the copy between its steps: the
  // checked (C++ parameter, module tensor) pairs (GIL held), and the copy itself (GIL not needed).
  std::vector<std::pair<at::Tensor, at::Tensor>> refresh_copies(py::object module);
  static absl::Status apply_refresh(actor::Actor& actor, const std::vector<std::pair<at::Tensor, at::Tensor>>& copies);
  // The call's interaction type: None -> the actor's own, else a name or an InteractionType.
  std::optional<nn::InteractionType> interaction_of(py::handle interaction) const;

 private:
  TensorDict inputs_from_kwargs(const py::kwargs& tensors) const;
  TensorDict inputs_from_tensordict(py::handle td) const;
  TensorDict inputs_from_dict(py::handle dict) const;
  TensorDict inputs_with_batch(std::vector<std::pair<NestedKey, at::Tensor>> entries) const;
  // {key: tensor} of a call's outputs, with the keys' Python objects made once.
  py::dict outputs_to_dict(const TensorDict& out) const;

  std::shared_ptr<actor::Actor> actor_;
  std::vector<NestedKey> in_keys_;
  std::vector<py::object> in_keys_py_;
  // The signature's outputs and their Python keys (empty with return_all_entries: any key comes back).
  std::vector<std::pair<NestedKey, py::object>> out_keys_py_;
  // act_tensor's positional inputs (not state, not optional), their declared dims, and outputs.
  std::vector<const policy::TensorSignature*> positional_;
  std::vector<NestedKey> out_keys_;
 public:
  // act_tensor releases the GIL only for calls of at least this many rows: below, the call is too
  // short for another thread to use the GIL, and a thread that takes it can hold it for a switch
  // interval (tests/benchmarks/python_actor_batch1.py times both at batch 1).
  int64_t gil_release_rows = 16;
 private:
  // refresh_from's mapping, kept for the module it was computed for: (C++ name, live tensor).
  py::object mapped_module_;
  std::vector<std::pair<std::string, py::object>> mapping_;
};

// "random", "deterministic", ... or a tensordict.nn.InteractionType; ValueError / TypeError name
// the interaction argument.
nn::InteractionType interaction_from_py(py::handle interaction);

// Raises the Python exception matching `status` (FileNotFoundError, ValueError, RuntimeError).
[[noreturn]] void raise_status(const absl::Status& status);

}  // namespace tdp::python
