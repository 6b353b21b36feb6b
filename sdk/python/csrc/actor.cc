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
  for (const policy::TensorSignature& input : actor_->signature().inputs) {
    if (!input.state && !input.optional) positional_.push_back(&input);
  }
  out_keys_ = actor_->signature().output_keys();
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
  // Into an empty TensorDict: act()'s tensors, none of them kept by the actor for reuse (a tensor
  // Python wraps is never reused; keeping it would only delay its free to a later call).
  TensorDict out;
  {
    py::gil_scoped_release release;
    actor_->act_into(inputs, out, type);
  }
  return returns == kTensorDict ? to_py_tensordict(out) : py::object(outputs_to_dict(out));
}

PyObject* PyActor::act_tensor(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    // The method descriptor has checked that self is an Actor: its value is read directly, not
    // looked up by type as py::cast would (a hash lookup per call).
    auto* value = static_cast<PyActor*>(
        reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder().value_ptr());
    if (value == nullptr) throw py::type_error("Actor.act_tensor: the Actor is not initialized (use Actor.load)");
    PyActor& me = *value;
    std::optional<nn::InteractionType> type = me.actor_->options().interaction_type();
    PyObject* out_arg = nullptr;
    const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      PyObject* name = PyTuple_GET_ITEM(kwnames, i);
      if (PyUnicode_CompareWithASCIIString(name, "interaction") == 0) {
        type = me.interaction_of(args[nargs + i]);
      } else if (PyUnicode_CompareWithASCIIString(name, "out") == 0) {
        if (args[nargs + i] != Py_None) out_arg = args[nargs + i];
      } else {
        throw py::type_error(absl::StrCat("Actor.act_tensor: unexpected keyword argument ", repr_of(name),
                                          " (inputs go by position, in in_keys order; the keywords are "
                                          "out and interaction)"));
      }
    }
    // out=: the caller's tensors, one per output, checked before the policy runs.
    if (out_arg != nullptr) {
      if (!PyTuple_Check(out_arg) || PyTuple_GET_SIZE(out_arg) != static_cast<Py_ssize_t>(me.out_keys_.size())) {
        throw py::type_error(absl::StrCat("Actor.act_tensor: out=", repr_of(out_arg), ": expected a tuple of ",
                                          me.out_keys_.size(), " tensors (", keys_to_string(me.out_keys_), ")"));
      }
      for (size_t i = 0; i < me.out_keys_.size(); ++i) {
        PyObject* item = PyTuple_GET_ITEM(out_arg, static_cast<Py_ssize_t>(i));
        if (!THPVariable_Check(item)) {
          throw py::type_error(absl::StrCat("Actor.act_tensor: out[", i, "] (", me.out_keys_[i].to_string(), ") is a ",
                                            Py_TYPE(item)->tp_name, ", expected a torch.Tensor"));
        }
        if (THPVariable_Unpack(item).requires_grad()) {
          throw py::value_error(absl::StrCat("Actor.act_tensor: out[", i, "] (", me.out_keys_[i].to_string(),
                                             ") requires grad; the actor writes it in place"));
        }
      }
    }
    if (static_cast<size_t>(nargs) != me.positional_.size()) {
      std::vector<NestedKey> names;
      for (const policy::TensorSignature* input : me.positional_) names.push_back(input->key);
      throw py::type_error(absl::StrCat("Actor.act_tensor: got ", nargs, " tensor(s) but the policy reads ",
                                        me.positional_.size(), " by position (", keys_to_string(names), ")"));
    }
    // The batch dims: those of the first input before its declared shape (as act() finds them).
    std::vector<int64_t> batch;
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      const policy::TensorSignature& input = *me.positional_[i];
      if (!THPVariable_Check(args[i])) {
        throw py::type_error(absl::StrCat("Actor.act_tensor: argument ", i, " (", input.name, ") is a ",
                                          Py_TYPE(args[i])->tp_name, ", expected a torch.Tensor"));
      }
      if (i == 0) {
        const at::Tensor& first = THPVariable_Unpack(args[0]);
        const int64_t dims = first.dim() - static_cast<int64_t>(input.shape.size());
        if (dims < 0) {
          throw py::value_error(absl::StrCat("Actor.act_tensor: input ", input.name, " has ", first.dim(),
                                             " dims but its declared shape has ", input.shape.size()));
        }
        batch.assign(first.sizes().begin(), first.sizes().begin() + dims);
      }
    }
    int64_t rows = 1;
    for (int64_t d : batch) rows *= d;
    TensorDict inputs(batch);
    for (Py_ssize_t i = 0; i < nargs; ++i) inputs.set(me.positional_[i]->key, THPVariable_Unpack(args[i]));
    TensorDict out;
    if (out_arg != nullptr) {
      // The buffers as the outputs' tensors, checked against the declared outputs before the
      // policy runs: the actor writes them in place where it can (nothing allocated per call on
      // the fused plan) and sets its own tensor where it cannot (a non-contiguous buffer), which
      // is copied below.
      out = TensorDict(std::move(batch));
      const std::vector<policy::TensorSignature>& declared = me.actor_->signature().outputs;
      const c10::Device device = me.actor_->options().device();
      for (size_t i = 0; i < me.out_keys_.size(); ++i) {
        const at::Tensor& into = THPVariable_Unpack(PyTuple_GET_ITEM(out_arg, static_cast<Py_ssize_t>(i)));
        std::vector<int64_t> shape = out.batch_size().vec();
        shape.insert(shape.end(), declared[i].shape.begin(), declared[i].shape.end());
        if (into.sizes() != c10::IntArrayRef(shape) || into.scalar_type() != declared[i].dtype || into.device() != device) {
          throw py::value_error(absl::StrCat("Actor.act_tensor: out[", i, "] (", me.out_keys_[i].to_string(), ") is [",
                                             absl::StrJoin(into.sizes(), ", "), "] ", c10::toString(into.scalar_type()),
                                             " on ", into.device().str(), "; the output is [", absl::StrJoin(shape, ", "),
                                             "] ", c10::toString(declared[i].dtype), " on ", device.str()));
        }
        out.set(me.out_keys_[i], into);
      }
    }
    // Without out=, into the empty `out`: act()'s tensors, none kept by the actor for reuse (as
    // in act() above).
    auto call = [&] { me.actor_->act_into(inputs, out, type); };
    if (rows >= me.gil_release_rows) {
      py::gil_scoped_release release;
      call();
    } else {
      call();
    }
    if (out_arg != nullptr) {
      for (size_t i = 0; i < me.out_keys_.size(); ++i) {
        at::Tensor into = THPVariable_Unpack(PyTuple_GET_ITEM(out_arg, static_cast<Py_ssize_t>(i)));
        const at::Tensor value = out.get(me.out_keys_[i], at::Tensor());
        if (!value.defined() || value.is_same(into)) continue;  // written in place
        c10::InferenceMode inference(into.is_inference());
        into.copy_(value);
      }
      Py_INCREF(out_arg);
      return out_arg;
    }
    py::tuple result(me.out_keys_.size());
    for (size_t i = 0; i < me.out_keys_.size(); ++i) {
      at::Tensor value = out.get(me.out_keys_[i], at::Tensor());
      PyObject* wrapped = value.defined() ? THPVariable_Wrap(std::move(value)) : (Py_INCREF(Py_None), Py_None);
      if (wrapped == nullptr) throw py::error_already_set();
      PyTuple_SET_ITEM(result.ptr(), static_cast<Py_ssize_t>(i), wrapped);
    }
    return result.release().ptr();
  } catch (py::error_already_set& error) {
    error.restore();
    return nullptr;
  } catch (...) {
    // pybind11's translators (torch's among them), as for a method bound through pybind11.
    py::detail::try_translate_exceptions();
    return nullptr;
  }
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
    action, log_prob = actor.act_tensor(torch.zeros(1, 4))   # plain tensors, the cheapest call

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
With plain tensors at small batches, act_tensor() computes the same for less per call.
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
      .def_readwrite("_gil_release_rows", &PyActor::gil_release_rows,
                     "act_tensor releases the GIL for calls of at least this many rows (for benchmarks).")
      .def("__repr__", [](const PyActor& self) {
        return absl::StrCat("tdpolicy.Actor(in_keys=", keys_to_string(self.actor()->signature().input_keys()),
                            ", out_keys=", keys_to_string(self.actor()->signature().output_keys()),
                            ", device=", self.actor()->options().device().str(), ")");
      });
  static PyMethodDef act_tensor_def = {
      "act_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&PyActor::act_tensor)),
      METH_FASTCALL | METH_KEYWORDS, R"doc(act_tensor(*inputs, out=None, interaction=None) -> tuple of tensors

act() for plain tensors, with the least work per call (about 0.5 us less than act(tensor) at batch 1):
one tensor per declared input that is neither recurrent state nor optional, by position in
in_keys order; the outputs come back as a tuple in out_keys order (None for one the call did not
write). The same outputs, checks (non-finite inputs, shapes, dtypes) and errors as act().

    action, log_prob = actor.act_tensor(torch.zeros(1, 4))
    action, log_prob = actor.act_tensor(obs, interaction="deterministic")
    buffers = actor.act_tensor(obs)                   # once, then reused:
    actor.act_tensor(obs, out=buffers)                # written in place, `buffers` returned

out: a tuple of tensors, one per output, each of the output's shape, dtype and device (a
    ValueError naming the output otherwise, before anything is written), not requiring grad. The
    actor writes the outputs into them (in place on the fused plan; a non-contiguous buffer gets
    a copy) and out itself comes back: no tensor object is made or freed per call.

The GIL is released while the policy runs for calls of 16 rows or more, as act() releases it;
below that the call keeps it: a call of about a microsecond gains nothing from releasing it, and
another Python thread waiting for the GIL would take it and hold it for up to a switch interval.
)doc"};
  py::object cls = m.attr("Actor");
  py::object method = py::reinterpret_steal<py::object>(
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &act_tensor_def));
  if (!method) throw py::error_already_set();
  py::setattr(cls, "act_tensor", method);
}

}  // namespace tdp::python
