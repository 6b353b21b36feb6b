// Conversions between Python objects and the SDK's types for the tdpolicy._C extension: nested
// keys (a str or a tuple of str, as tensordict writes them), tensordict.TensorDict and plain
// dicts of tensors <-> tdp::TensorDict, with the tensors shared, never copied (torch's own
// pybind11 casters wrap the same at::Tensor on both sides).
//
//   tdp::TensorDict td = tdp::python::to_tensordict(py_td, "step(td)");   // any leaves
//   py::object out = tdp::python::to_py_tensordict(result);                // tensordict.TensorDict
//   py::object key = tdp::python::key_to_py(tdp::NestedKey({"next", "reward"}));  // ("next", "reward")
//
// Errors raise Python exceptions (TypeError, KeyError, ValueError) that name the argument.
// Every function here needs the GIL.
#pragma once

#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "sdk/tensordict/nested_key.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::python {

namespace py = pybind11;

// "a" -> {"a"}; ("next", "reward") -> {"next", "reward"}. Anything else raises TypeError naming `what`.
NestedKey key_from_py(py::handle key, const std::string& what);
// One part -> str, several -> tuple of str.
py::object key_to_py(const NestedKey& key);
std::vector<py::object> keys_to_py(const std::vector<NestedKey>& keys);

// Whether `obj` is a tensordict.TensorDictBase (tensordict is imported on first use).
bool is_py_tensordict(py::handle obj);
// Every leaf of a tensordict.TensorDict, or of a dict of tensors (nested dicts are nested keys),
// with the batch size of the TensorDict, else `batch_size`. TypeError names `what` and the key.
TensorDict to_tensordict(py::handle obj, const std::string& what, const std::vector<int64_t>& batch_size = {});
// A tensordict.TensorDict holding the same tensors (nested TensorDicts for nested keys).
py::object to_py_tensordict(const TensorDict& td);
// A dict {key: tensor} of the leaves, nested keys as tuples.
py::dict to_py_dict(const TensorDict& td);

// "cpu", "cuda:0", a torch.device -> c10::Device; ValueError names `what`.
c10::Device device_from_py(py::handle device, const std::string& what);

}  // namespace tdp::python
