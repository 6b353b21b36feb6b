#include "sdk/python/csrc/convert.h"

#include <absl/strings/str_cat.h>
#include <torch/csrc/autograd/python_variable.h>

namespace tdp::python {
namespace {

std::string repr_of(py::handle obj) { return py::repr(obj).cast<std::string>(); }

py::object& tensordict_class(const char* name) {
  // Imported once and kept for the life of the process: the extension is never unloaded.
  static py::object* base = new py::object(py::module_::import("tensordict").attr("TensorDictBase"));
  static py::object* cls = new py::object(py::module_::import("tensordict").attr("TensorDict"));
  return std::string(name) == "TensorDictBase" ? *base : *cls;
}

void add_leaves(py::handle obj, const NestedKey& prefix, const std::string& what, TensorDict& out) {
  for (auto item : py::reinterpret_borrow<py::dict>(obj)) {
    const NestedKey key = prefix + key_from_py(item.first, what);
    if (py::isinstance<py::dict>(item.second)) {
      add_leaves(item.second, key, what, out);
    } else if (THPVariable_Check(item.second.ptr())) {
      out.set(key, item.second.cast<at::Tensor>());
    } else {
      throw py::type_error(absl::StrCat(what, ": entry ", key.to_string(), " is a ",
                                        py::str(py::type::of(item.second)).cast<std::string>(),
                                        ", expected a torch.Tensor"));
    }
  }
}

}  // namespace

NestedKey key_from_py(py::handle key, const std::string& what) {
  if (py::isinstance<py::str>(key)) return NestedKey(key.cast<std::string>());
  if (py::isinstance<py::tuple>(key)) {
    std::vector<std::string> path;
    for (py::handle part : key) {
      if (py::isinstance<py::str>(part)) {
        path.push_back(part.cast<std::string>());
      } else if (py::isinstance<py::tuple>(part)) {
        for (const std::string& inner : key_from_py(part, what).path()) path.push_back(inner);
      } else {
        path.clear();
        break;
      }
    }
    if (!path.empty()) return NestedKey(std::move(path));
  }
  throw py::type_error(absl::StrCat(what, ": key ", repr_of(key), " is not a str or a tuple of str"));
}

py::object key_to_py(const NestedKey& key) {
  if (key.size() == 1) return py::str(key.leaf());
  py::tuple parts(key.size());
  for (size_t i = 0; i < key.size(); ++i) parts[i] = py::str(key.path()[i]);
  return std::move(parts);
}

std::vector<py::object> keys_to_py(const std::vector<NestedKey>& keys) {
  std::vector<py::object> out;
  out.reserve(keys.size());
  for (const NestedKey& key : keys) out.push_back(key_to_py(key));
  return out;
}

bool is_py_tensordict(py::handle obj) {
  return PyObject_IsInstance(obj.ptr(), tensordict_class("TensorDictBase").ptr()) == 1;
}

TensorDict to_tensordict(py::handle obj, const std::string& what, const std::vector<int64_t>& batch_size) {
  if (is_py_tensordict(obj)) {
    TensorDict out(obj.attr("batch_size").cast<std::vector<int64_t>>());
    for (py::handle item : obj.attr("items")(true, true)) {
      auto pair = py::reinterpret_borrow<py::tuple>(item);
      out.set(key_from_py(pair[0], what), pair[1].cast<at::Tensor>());
    }
    return out;
  }
  if (py::isinstance<py::dict>(obj)) {
    TensorDict out(batch_size);
    add_leaves(obj, NestedKey(), what, out);
    return out;
  }
  throw py::type_error(absl::StrCat(what, ": expected a tensordict.TensorDict or a dict of tensors, got a ",
                                    py::str(py::type::of(obj)).cast<std::string>()));
}

namespace {

void fill_dict(py::dict& target, const TensorDict& td, bool nested_dicts) {
  for (const auto& [key, entry] : td.items()) {
    py::str name(key.leaf());
    if (entry.is_tensordict()) {
      py::dict inner;
      fill_dict(inner, entry.tensordict(), nested_dicts);
      target[name] = std::move(inner);
    } else {
      target[name] = py::cast(entry.tensor());
    }
  }
}

}  // namespace

py::object to_py_tensordict(const TensorDict& td) {
  py::dict source;
  fill_dict(source, td, true);
  static py::object* size_class = new py::object(py::module_::import("torch").attr("Size"));
  py::tuple dims(td.batch_size().size());
  for (size_t i = 0; i < td.batch_size().size(); ++i) dims[i] = py::int_(td.batch_size()[i]);
  py::object batch = (*size_class)(dims);
  // _new_unsafe: the entries were checked against the batch size on the C++ side already.
  return tensordict_class("TensorDict").attr("_new_unsafe")(py::arg("source") = source,
                                                             py::arg("batch_size") = batch);
}

py::dict to_py_dict(const TensorDict& td) {
  py::dict out;
  for (const auto& [key, entry] : td.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    out[key_to_py(key)] = py::cast(entry.tensor());
  }
  return out;
}

c10::Device device_from_py(py::handle device, const std::string& what) {
  try {
    if (py::isinstance<py::str>(device)) return c10::Device(device.cast<std::string>());
    return c10::Device(py::str(device).cast<std::string>());
  } catch (const c10::Error& error) {
    throw py::value_error(absl::StrCat(what, "=", repr_of(device), ": not a device (", error.what_without_backtrace(), ")"));
  }
}

}  // namespace tdp::python
