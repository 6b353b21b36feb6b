#include "sdk/python/csrc/actor.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/DynamicTypes.h>

#include <map>

#include "sdk/nn/tensordict_module_base.h"
#include "sdk/python/csrc/bindings.h"
#include "sdk/python/csrc/convert.h"

namespace tdp::python {
namespace {

std::string repr_of(py::handle obj) { return py::repr(obj).cast<std::string>(); }

actor::Backend backend_from(const std::string& name) {
  if (name == "auto") return actor::Backend::kAuto;
  if (name == "libtorch") return actor::Backend::kLibTorch;
  if (name == "fused") return actor::Backend::kFused;
  throw py::value_error(absl::StrCat("backend=\"", name,
                                     "\": expected \"auto\", \"libtorch\", \"fused\" or \"cuda_graph\""));
}

std::shared_ptr<PyActor> load(py::object path, py::object example, const std::string& backend, py::object device,
                              py::object seed, py::object interaction, bool run_self_tests,
                              std::optional<bool> composite_lp_aggregate, int64_t fused_max_batch,
                              bool return_all_entries) {
  actor::ActorOptions options;
  // Checked before the (possibly long) load: a bad name fails at once.
  const std::optional<nn::InteractionType> type =
      interaction.is_none() ? std::nullopt : std::optional<nn::InteractionType>(interaction_from_py(interaction));
  options.device(device_from_py(device, "device"));
  if (backend == "cuda_graph") {
    if (!options.device().is_cuda()) {
      throw py::value_error(absl::StrCat("backend=\"cuda_graph\" needs a CUDA device, got device=\"",
                                         options.device().str(), "\""));
    }
    options.cuda_graph(actor::CudaGraphOptions());
  } else {
    options.backend(backend_from(backend));
  }
  if (seed.is_none()) {
    // As torch.Generator().seed() would: reproducible under torch.manual_seed.
    seed = py::module_::import("torch").attr("randint")(0, py::int_(int64_t{1} << 62), py::make_tuple()).attr("item")();
  }
  if (!py::isinstance<py::int_>(seed) || seed.cast<py::int_>() < py::int_(0)) {
    throw py::value_error(absl::StrCat("seed=", repr_of(seed), ": expected None or a non-negative int"));
  }
  options.seed(seed.cast<uint64_t>());
  if (fused_max_batch < 0) throw py::value_error(absl::StrCat("fused_max_batch=", fused_max_batch, ": expected >= 0"));
  options.fused_max_batch(fused_max_batch);
  options.run_self_tests(run_self_tests);
  options.return_all_entries(return_all_entries);
  if (composite_lp_aggregate) options.composite_lp_aggregate(*composite_lp_aggregate);

  // A module instead of a path: exported to a scratch folder first (tdpolicy.export).
  py::object scratch = py::none();
  std::string spec_path;
  py::object os = py::module_::import("os");
  if (py::isinstance<py::str>(path) || py::hasattr(path, "__fspath__")) {
    if (!example.is_none()) throw py::value_error("example: only taken with a module, not with a spec path");
    spec_path = os.attr("fspath")(path).cast<std::string>();
  } else {
    if (example.is_none()) {
      throw py::value_error(absl::StrCat("example: Actor.load(module) needs example= (a TensorDict of the "
                                         "module's inputs, as tdpolicy.export takes), got a module ",
                                         py::str(py::type::of(path)).cast<std::string>()));
    }
    scratch = py::module_::import("tempfile").attr("TemporaryDirectory")(py::arg("prefix") = "tdpolicy_actor_");
    spec_path = os.attr("path").attr("join")(scratch.attr("name"), "policy.pb").cast<std::string>();
    py::module_::import("tdpolicy").attr("export")(path, spec_path, example);
  }
  std::unique_ptr<actor::Actor> loaded;
  {
    absl::StatusOr<std::unique_ptr<actor::Actor>> result;
    {
      py::gil_scoped_release release;
      result = actor::Actor::load(spec_path, options);
    }
    if (!scratch.is_none()) scratch.attr("cleanup")();
    if (!result.ok()) raise_status(result.status());
    loaded = *std::move(result);
  }
  auto out = std::make_shared<PyActor>(std::move(loaded));
  out->actor()->set_interaction_type(type);
  return out;
}

py::dict describe(const actor::Actor& a) {
  const actor::ActorInfo info = a.describe();
  py::dict out;
  out["modules"] = info.modules;
  out["fused"] = info.fused_status.ok() ? std::string("ok") : std::string(info.fused_status.message());
  std::vector<std::string> types;
  for (nn::InteractionType type : info.fused_interaction_types) types.emplace_back(nn::to_string(type));
  out["fused_interaction_types"] = types;
  out["fused_max_batch"] = info.fused_max_batch;
  out["captured_graph_count"] = info.captured_graph_count;
  return out;
}

}  // namespace

void raise_status(const absl::Status& status) {
  const std::string message(status.message());
  if (absl::IsNotFound(status)) {
    PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
    throw py::error_already_set();
  }
  if (absl::IsInvalidArgument(status) || absl::IsFailedPrecondition(status) || absl::IsOutOfRange(status)) {
    throw py::value_error(message);
  }
  throw std::runtime_error(message);
}

PyActor::PyActor(std::unique_ptr<actor::Actor> actor) : actor_(std::move(actor)) {
  in_keys_ = actor_->signature().input_keys();
  in_keys_py_ = keys_to_py(in_keys_);
  if (!actor_->options().return_all_entries()) {
    for (const NestedKey& key : actor_->signature().output_keys()) out_keys_py_.emplace_back(key, key_to_py(key));
  }
}

py::dict PyActor::outputs_to_dict(const TensorDict& out) const {
  if (out_keys_py_.empty()) return to_py_dict(out);
  py::dict result;
  for (const auto& [key, py_key] : out_keys_py_) {
    at::Tensor value = out.get(key, at::Tensor());
    if (!value.defined()) continue;
    py::object wrapped = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(value)));
    if (!wrapped) throw py::error_already_set();
    if (PyDict_SetItem(result.ptr(), py_key.ptr(), wrapped.ptr()) != 0) throw py::error_already_set();
  }
  return result;
}

std::optional<nn::InteractionType> PyActor::interaction_of(py::handle interaction) const {
  if (interaction.is_none()) return actor_->options().interaction_type();
  return interaction_from_py(interaction);
}

nn::InteractionType interaction_from_py(py::handle interaction) {
  py::object name = py::reinterpret_borrow<py::object>(interaction);
  // tensordict.nn.InteractionType: an Enum whose values are the names.
  if (!py::isinstance<py::str>(name) && py::hasattr(name, "value")) name = name.attr("value");
  if (!py::isinstance<py::str>(name)) {
    throw py::type_error(absl::StrCat("interaction=", repr_of(interaction), ": expected a str or a tensordict.nn.InteractionType"));
  }
  try {
    return nn::interaction_type_from_str(name.cast<std::string>());
  } catch (const std::invalid_argument& error) {
    throw py::value_error(absl::StrCat("interaction=", repr_of(interaction), ": ", error.what()));
  }
}

TensorDict PyActor::inputs_with_batch(std::vector<std::pair<NestedKey, at::Tensor>> entries) const {
  // The batch dims: those of the first declared input given, before its declared shape (as
  // Actor::act(named tensors) finds them).
  auto batch_dims = [&]() -> std::vector<int64_t> {
    for (const policy::TensorSignature& input : actor_->signature().inputs) {
      for (const auto& [key, tensor] : entries) {
        if (key != input.key) continue;
        const int64_t dims = tensor.dim() - static_cast<int64_t>(input.shape.size());
        if (dims < 0) {
          throw py::value_error(absl::StrCat("Actor.act: input ", input.name, " has ", tensor.dim(),
                                             " dims but its declared shape has ", input.shape.size()));
        }
        return std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().begin() + dims);
      }
    }
    return {};
  };
  TensorDict td(batch_dims());
  for (auto& [key, tensor] : entries) td.set(key, std::move(tensor));
  return td;
}

TensorDict PyActor::inputs_from_kwargs(const py::kwargs& tensors) const {
  std::vector<std::pair<NestedKey, at::Tensor>> entries;
  entries.reserve(tensors.size());
  for (auto item : tensors) {
    if (!THPVariable_Check(item.second.ptr())) {
      throw py::type_error(absl::StrCat("Actor.act: ", item.first.cast<std::string>(), "=",
                                        py::str(py::type::of(item.second)).cast<std::string>(),
                                        ": expected a torch.Tensor"));
    }
    entries.emplace_back(NestedKey(item.first.cast<std::string>()), THPVariable_Unpack(item.second.ptr()));
  }
  return inputs_with_batch(std::move(entries));
}

TensorDict PyActor::inputs_from_dict(py::handle dict) const {
  TensorDict all = to_tensordict(dict, "Actor.act");
  std::vector<std::pair<NestedKey, at::Tensor>> entries;
  for (const auto& [key, entry] : all.items(true, true)) entries.emplace_back(key, entry.tensor());
  return inputs_with_batch(std::move(entries));
}

TensorDict PyActor::inputs_from_tensordict(py::handle td) const {
  // Only the declared inputs are read: a rollout's TensorDict may hold many more entries.
  TensorDict out(td.attr("batch_size").cast<std::vector<int64_t>>());
  py::object get = td.attr("get");
  for (size_t i = 0; i < in_keys_.size(); ++i) {
    py::object value = get(in_keys_py_[i], py::none());
    if (value.is_none()) continue;  // the actor names a missing required input
    if (!THPVariable_Check(value.ptr())) {
      throw py::type_error(absl::StrCat("Actor.act: input ", in_keys_[i].to_string(), " is a ",
                                        py::str(py::type::of(value)).cast<std::string>(), ", expected a tensor"));
    }
    out.set(in_keys_[i], THPVariable_Unpack(value.ptr()));
  }
  return out;
}

py::object PyActor::act(py::object td, py::object interaction, py::kwargs tensors) {
  const std::optional<nn::InteractionType> type = interaction_of(interaction);
  enum { kDict, kTensorDict } returns = kDict;
  TensorDict inputs;
  if (td.is_none()) {
    if (tensors.empty()) throw py::type_error("Actor.act: no inputs (pass a TensorDict, a dict or key=tensor)");
    inputs = inputs_from_kwargs(tensors);
  } else if (!tensors.empty()) {
    throw py::type_error("Actor.act: pass the inputs either as td or as key=tensor arguments, not both");
  } else if (THPVariable_Check(td.ptr())) {
    // One tensor: the policy's only input that is not recurrent state.
    const NestedKey* only = nullptr;
    int count = 0;
    for (const policy::TensorSignature& input : actor_->signature().inputs) {
      if (input.state || input.optional) continue;
      only = &input.key;
      ++count;
    }
    if (count != 1) {
      throw py::type_error(absl::StrCat("Actor.act: a single tensor was given but the policy reads ", count,
                                        " inputs (", keys_to_string(in_keys_), "): pass them by key"));
    }
    inputs = inputs_with_batch({std::make_pair(*only, THPVariable_Unpack(td.ptr()))});
  } else if (is_py_tensordict(td)) {
    inputs = inputs_from_tensordict(td);
    returns = kTensorDict;
  } else if (py::isinstance<py::dict>(td)) {
    inputs = inputs_from_dict(td);
  } else {
    throw py::type_error(absl::StrCat("Actor.act: td is a ", py::str(py::type::of(td)).cast<std::string>(),
                                      ", expected a tensordict.TensorDict, a dict of tensors or a tensor"));
  }
  TensorDict out;
  {
    py::gil_scoped_release release;
    out = actor_->act(inputs, type);
  }
  return returns == kTensorDict ? to_py_tensordict(out) : py::object(outputs_to_dict(out));
}

std::vector<std::pair<at::Tensor, at::Tensor>> PyActor::refresh_copies(py::object module) {
  if (mapped_module_.is_none() || !mapped_module_.is(module)) {
    // The example the exporter walks the module with: zeros of the declared inputs at batch 1.
    TensorDict example({1});
    for (const policy::TensorSignature& input : actor_->signature().inputs) {
      std::vector<int64_t> shape{1};
      shape.insert(shape.end(), input.shape.begin(), input.shape.end());
      example.set(input.key, at::zeros(shape, at::TensorOptions().dtype(input.dtype)));
    }
    py::list pairs = py::module_::import("tdpolicy._export").attr("parameter_tensors")(module, to_py_tensordict(example));
    mapping_.clear();
    for (py::handle pair : pairs) {
      auto item = py::reinterpret_borrow<py::tuple>(pair);
      mapping_.emplace_back(item[0].cast<std::string>(), py::reinterpret_borrow<py::object>(item[1]));
    }
    mapped_module_ = module;
  }
  std::map<std::string, at::Tensor> targets;
  for (const auto& item : actor_->module()->named_parameters()) targets.emplace(item.key(), item.value());
  for (const auto& item : actor_->module()->named_buffers()) targets.emplace(item.key(), item.value());
  // Everything checked before anything is copied: a mismatch leaves the actor as it was.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  for (const auto& [name, value] : mapping_) {
    auto target = targets.find(name);
    if (target == targets.end()) {
      throw py::key_error(absl::StrCat("Actor.refresh_from: the module's parameter ", name,
                                       " has no counterpart in the C++ policy (was it exported from another module?)"));
    }
    at::Tensor tensor = value.cast<at::Tensor>();
    if (tensor.sizes() != target->second.sizes()) {
      throw py::value_error(absl::StrCat("Actor.refresh_from: parameter ", name, " has shape [",
                                         absl::StrJoin(tensor.sizes(), ", "), "] in the module but [",
                                         absl::StrJoin(target->second.sizes(), ", "), "] in the C++ policy"));
    }
    copies.emplace_back(target->second, tensor.detach());
  }
  return copies;
}

absl::Status PyActor::apply_refresh(actor::Actor& actor, const std::vector<std::pair<at::Tensor, at::Tensor>>& copies) {
  torch::NoGradGuard no_grad;
  for (const auto& [target, value] : copies) at::Tensor(target).copy_(value);
  return actor.refresh_parameters();
}

void PyActor::refresh_from(py::object module) {
  const std::vector<std::pair<at::Tensor, at::Tensor>> copies = refresh_copies(std::move(module));
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = apply_refresh(*actor_, copies);
  }
  if (!status.ok()) raise_status(status);
}

void bind_actor(py::module_& m) {
  py::class_<PyActor, std::shared_ptr<PyActor>>(m, "Actor", R"doc(
A policy spec loaded into the C++ SDK's Actor (sdk/actor/actor.h), called from Python.

    actor = tdpolicy.Actor.load("policies/cartpole_categorical.pbtxt", seed=0)
    out = actor.act(observation=torch.zeros(1, 4))     # dict: {"action": ..., "sample_log_prob": ...}
    td = actor.act(TensorDict(observation=obs, batch_size=[8]), interaction="deterministic")
    actor.refresh_from(policy)                         # weights of the live module, no file

act() releases the GIL while the policy runs; tensors cross without copies. Returned tensors
are inference tensors (the actor runs under torch.inference_mode): clone one to use it in autograd.
)doc")
      .def_static("load", &load, py::arg("path"), py::kw_only(), py::arg("example") = py::none(),
                  py::arg("backend") = "auto", py::arg("device") = "cpu", py::arg("seed") = py::none(),
                  py::arg("interaction") = "random", py::arg("run_self_tests") = true,
                  py::arg("composite_lp_aggregate") = py::none(), py::arg("fused_max_batch") = tdp::actor::ActorOptions().fused_max_batch(),
                  py::arg("return_all_entries") = false, R"doc(
Loads a policy spec (.pbtxt, .pb or .json, as `tdp` reads them) or, with `example`, exports a
tensordict / TorchRL module with tdpolicy.export and loads the result.

backend: "auto" (the fused CPU plan at batches up to fused_max_batch when the policy lowers,
    LibTorch otherwise), "libtorch", "fused" (a load error when the policy does not lower), or
    "cuda_graph" (a CUDA device: replayed CUDA graphs per batch bucket).
device: "cpu", "cuda", "cuda:1", a torch.device.
seed: the actor's own random stream; None draws one from torch's global generator.
interaction: how act() takes actions unless a call says otherwise: "random", "deterministic",
    "mode", "mean", "median", or None (each module's default_interaction_type).
)doc")
      .def("act", &PyActor::act, py::arg("td") = py::none(), py::kw_only(), py::arg("interaction") = py::none(), R"doc(
The policy's outputs for a batch of inputs.

act(td): a tensordict.TensorDict holding the declared inputs (other entries are ignored) ->
    a TensorDict of the outputs (nested keys as nested TensorDicts), the same batch size.
act(observation=tensor), act({"observation": tensor}), act(tensor) (a policy with one input)
    -> a dict {key: tensor}, nested keys as tuples.
interaction: this call's interaction type (None: the actor's).
)doc")
      .def("refresh_from", &PyActor::refresh_from, py::arg("module"),
           "Copies the parameters and buffers of `module` (the module tdpolicy.export was given, being trained) "
           "into the C++ actor, by the names tdpolicy.export maps them to.")
      .def("reset", [](PyActor& self, std::optional<at::Tensor> mask) {
             if (mask) self.actor()->reset(*mask); else self.actor()->reset();
           }, py::arg("mask") = py::none(),
           "Zeroes the kept recurrent state where mask ([N] bool) is true; all of it without a mask.")
      .def("describe", [](const PyActor& self) { return describe(*self.actor()); },
           "Which backend runs each module, whether the fused plan lowered (else why not).")
      .def_property_readonly("in_keys", [](const PyActor& self) { return keys_to_py(self.actor()->signature().input_keys()); })
      .def_property_readonly("out_keys", [](const PyActor& self) { return keys_to_py(self.actor()->signature().output_keys()); })
      .def_property_readonly("in_specs", [](const PyActor& self) {
        py::list out;
        for (const policy::TensorSignature& input : self.actor()->signature().inputs) {
          py::dict entry;
          entry["key"] = key_to_py(input.key);
          entry["shape"] = py::tuple(py::cast(input.shape));
          entry["dtype"] = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(input.dtype)));
          entry["state"] = input.state;
          entry["optional"] = input.optional;
          out.append(std::move(entry));
        }
        return out;
      }, "The declared inputs: [{key, shape (per environment), dtype, state, optional}].")
      .def_property_readonly("state_keys", [](const PyActor& self) { return keys_to_py(self.actor()->signature().state_keys); })
      .def_property_readonly("next_state_keys", [](const PyActor& self) { return keys_to_py(self.actor()->signature().next_state_keys); })
      .def_property_readonly("device", [](const PyActor& self) { return self.actor()->options().device().str(); })
      .def_property("interaction",
                    [](const PyActor& self) -> py::object {
                      auto type = self.actor()->options().interaction_type();
                      if (!type) return py::none();
                      return py::str(std::string(nn::to_string(*type)));
                    },
                    [](PyActor& self, py::object value) {
                      self.actor()->set_interaction_type(value.is_none() ? std::nullopt : self.interaction_of(value));
                    })
      .def("__repr__", [](const PyActor& self) {
        return absl::StrCat("tdpolicy.Actor(in_keys=", keys_to_string(self.actor()->signature().input_keys()),
                            ", out_keys=", keys_to_string(self.actor()->signature().output_keys()),
                            ", device=", self.actor()->options().device().str(), ")");
      });
}

}  // namespace tdp::python
