// tdpolicy.envs: the SDK's batched simulators (tdp::env::BatchedEnv, made by name with
// tdp::env::make_env) as Python objects that take and return tensordict.TensorDicts.
#include <absl/strings/str_cat.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>

#include "samples/envs/make_env.h"
#include "sdk/env/batched_env.h"
#include "sdk/env/env_library.h"
#include "sdk/python/csrc/actor.h"
#include "sdk/python/csrc/bindings.h"
#include "sdk/python/csrc/convert.h"

namespace tdp::python {
namespace {

py::object dtype_to_py(at::ScalarType dtype) {
  return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(torch::getTHPDtype(dtype)));
}

at::ScalarType dtype_from_py(py::handle dtype, const std::string& what) {
  if (!THPDtype_Check(dtype.ptr())) {
    throw py::type_error(absl::StrCat(what, "=", py::repr(dtype).cast<std::string>(), ": expected a torch.dtype"));
  }
  return reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
}

std::shared_ptr<env::BatchedEnv> make(const std::string& name, int64_t num_envs, int64_t max_episode_steps,
                                      py::object dtype, py::object observation_dtype) {
  if (num_envs < 1) throw py::value_error(absl::StrCat("num_envs=", num_envs, ": expected at least 1"));
  if (max_episode_steps < 0) {
    throw py::value_error(absl::StrCat("max_episode_steps=", max_episode_steps, ": expected 0 (the task's own) or more"));
  }
  env::EnvOptions options(num_envs);
  options.max_episode_steps(max_episode_steps)
      .dtype(dtype_from_py(dtype, "dtype"))
      .observation_dtype(dtype_from_py(observation_dtype, "observation_dtype"));
  absl::StatusOr<std::unique_ptr<env::BatchedEnv>> made = env::make_env(name, options);
  if (!made.ok()) throw py::value_error(absl::StrCat("make_env(\"", name, "\"): ", made.status().message()));
  return std::shared_ptr<env::BatchedEnv>(std::move(*made));
}

py::list specs(const std::vector<env::EntrySpec>& entries) {
  py::list out;
  for (const env::EntrySpec& entry : entries) out.append(py::cast(entry));
  return out;
}

}  // namespace

void bind_envs(py::module_& m) {
  py::class_<env::EntrySpec>(m, "EntrySpec", "What one entry of an observation or action holds per environment.")
      .def_property_readonly("key", [](const env::EntrySpec& e) { return key_to_py(e.key); })
      .def_property_readonly("shape", [](const env::EntrySpec& e) { return py::tuple(py::cast(e.shape)); })
      .def_property_readonly("dtype", [](const env::EntrySpec& e) { return dtype_to_py(e.dtype); })
      .def_readonly("low", &env::EntrySpec::low)
      .def_readonly("high", &env::EntrySpec::high)
      .def_readonly("num_categories", &env::EntrySpec::num_categories)
      .def_property_readonly("is_discrete", &env::EntrySpec::is_discrete)
      .def("__repr__", [](const env::EntrySpec& e) {
        return absl::StrCat("EntrySpec(key=", py::repr(key_to_py(e.key)).cast<std::string>(), ", shape=",
                            py::repr(py::tuple(py::cast(e.shape))).cast<std::string>(), ", dtype=",
                            py::repr(dtype_to_py(e.dtype)).cast<std::string>(),
                            e.is_discrete() ? absl::StrCat(", num_categories=", e.num_categories) : "", ")");
      });

  py::class_<env::BatchedEnv, std::shared_ptr<env::BatchedEnv>>(m, "BatchedEnv", R"doc(
N copies of one C++ simulator stepped together (sdk/env/batched_env.h), on TensorDicts of batch size [N].

    env = tdpolicy.envs.make_env("cartpole", num_envs=8)
    td = env.reset(seed=0)                        # td["observation"]: [8, 4]
    out = env.step(TensorDict(action=torch.ones(8, dtype=torch.long), batch_size=[8]))
    out["reward"], out["done"], out["terminated"], out["truncated"], out["final_observation"]

Finished environments reset themselves inside step(): "observation" is then the next episode's
first observation and "final_observation" the one the step reached.
)doc")
      .def_property_readonly("name", &env::BatchedEnv::name)
      .def_property_readonly("num_envs", &env::BatchedEnv::num_envs)
      .def_property_readonly("batch_size", [](const env::BatchedEnv& e) { return py::make_tuple(e.num_envs()); })
      .def_property_readonly("max_episode_steps", &env::BatchedEnv::max_episode_steps)
      .def_property_readonly("dtype", [](const env::BatchedEnv& e) { return dtype_to_py(e.dtype()); })
      .def_property_readonly("state_dim", &env::BatchedEnv::state_dim)
      .def_property_readonly("observation_spec", [](const env::BatchedEnv& e) { return specs(e.observation_spec()); })
      .def_property_readonly("action_spec", [](const env::BatchedEnv& e) { return specs(e.action_spec()); })
      .def(
          "reset",
          [](env::BatchedEnv& e, std::optional<int64_t> seed, std::optional<at::Tensor> mask) {
            if (seed && mask) throw py::type_error("reset: pass seed (every environment) or mask (some), not both");
            if (seed && *seed < 0) throw py::value_error(absl::StrCat("seed=", *seed, ": expected a non-negative int"));
            if (!seed && !mask) throw py::type_error("reset: pass seed= (reseed, every environment) or mask= ([N] bool)");
            TensorDict td;
            {
              py::gil_scoped_release release;
              td = seed ? e.reset(static_cast<uint64_t>(*seed)) : e.reset(*mask);
            }
            return to_py_tensordict(td);
          },
          py::arg("seed") = py::none(), py::kw_only(), py::arg("mask") = py::none(),
          "reset(seed): reseeds and starts every environment; reset(mask=m): starts those where m is true.")
      .def(
          "step",
          [](env::BatchedEnv& e, py::object td) {
            TensorDict actions = to_tensordict(td, "step(td)", {e.num_envs()});
            TensorDict out;
            {
              py::gil_scoped_release release;
              out = e.step(actions);
            }
            return to_py_tensordict(out);
          },
          py::arg("td"), "One step of every environment; td (TensorDict or dict) holds the action_spec keys.")
      .def(
          "reset_to",
          [](env::BatchedEnv& e, const at::Tensor& state) {
            TensorDict out;
            {
              py::gil_scoped_release release;
              out = e.reset_to(state);
            }
            return to_py_tensordict(out);
          },
          py::arg("state"),
          "Starts every environment from `state` ([num_envs, state_dim]): fixed starts, replayed trajectories.")
      .def("episode_steps", &env::BatchedEnv::episode_steps)
      .def("state", &env::BatchedEnv::state)
      .def("__repr__", [](const env::BatchedEnv& e) {
        return absl::StrCat("tdpolicy.envs.BatchedEnv(", e.name(), ", num_envs=", e.num_envs(),
                            ", max_episode_steps=", e.max_episode_steps(), ")");
      });

  m.def("make_env", &make, py::arg("name"), py::arg("num_envs") = 1, py::kw_only(), py::arg("max_episode_steps") = 0,
        py::arg("dtype") = dtype_to_py(at::kFloat), py::arg("observation_dtype") = dtype_to_py(at::kFloat),
        "A BatchedEnv by name (see env_names()); max_episode_steps 0 keeps the task's own limit; dtype: the "
        "simulated state's precision (torch.float32 or torch.float64); observation_dtype: that of observations "
        "and rewards (float64 with a float64 state reproduces Gymnasium's float64 arithmetic).");
  m.def("env_names", &env::env_names, "The names make_env knows.");
  m.def(
      "load_library",
      [](const std::string& path) {
        absl::StatusOr<std::vector<std::string>> names = env::load_env_library(path);
        if (!names.ok()) throw py::value_error(std::string(names.status().message()));
        return *names;
      },
      py::arg("path"),
      "Loads a shared library of user simulators (declared with TDP_ENV_LIBRARY, sdk/env/env_library.h) so "
      "make_env knows their names; returns the names it added (none when it was loaded already).");
}

}  // namespace tdp::python
