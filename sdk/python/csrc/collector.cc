// The C++ half of tdpolicy.Collector (tdpolicy/_collector.py holds the Python class TorchRL users
// see): tdp::env::Collector over a BatchedEnv and a tdpolicy.Actor, every batch collected with
// the GIL released.
#include <absl/strings/str_cat.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>

#include "sdk/env/collector.h"
#include "sdk/python/csrc/actor.h"
#include "sdk/python/csrc/bindings.h"
#include "sdk/python/csrc/convert.h"

namespace tdp::python {
namespace {

class PyCollector {
 public:
  PyCollector(std::shared_ptr<env::BatchedEnv> env, std::shared_ptr<PyActor> actor, int64_t frames_per_batch,
              int64_t total_frames, int64_t seed, py::object interaction, bool prefetch)
      : actor_(std::move(actor)) {
    if (env == nullptr) throw py::type_error("Collector: env is None");
    if (actor_ == nullptr) throw py::type_error("Collector: policy is None");
    if (seed < 0) throw py::value_error(absl::StrCat("seed=", seed, ": expected a non-negative int"));
    env::CollectorOptions options(frames_per_batch);
    options.total_frames(total_frames).seed(static_cast<uint64_t>(seed)).prefetch(prefetch);
    if (!interaction.is_none()) options.interaction_type(interaction_from_py(interaction));
    py::gil_scoped_release release;
    collector_ = std::make_unique<env::Collector>(std::move(env), actor_->actor(), options);
  }

  py::object next() {
    std::optional<TensorDict> batch;
    {
      py::gil_scoped_release release;
      batch = collector_->next();
    }
    if (!batch) return py::none();
    return to_py_tensordict(*batch);
  }

  void update_from(py::object module) {
    const std::vector<std::pair<at::Tensor, at::Tensor>> copies = actor_->refresh_copies(std::move(module));
    absl::Status status;
    {
      py::gil_scoped_release release;
      collector_->update_actor([&](actor::Actor& a) { status = PyActor::apply_refresh(a, copies); });
    }
    if (!status.ok()) raise_status(status);
  }

  void set_seed(int64_t seed) {
    if (seed < 0) throw py::value_error(absl::StrCat("seed=", seed, ": expected a non-negative int"));
    py::gil_scoped_release release;
    collector_->set_seed(static_cast<uint64_t>(seed));
  }

  void shutdown() {
    py::gil_scoped_release release;
    collector_->shutdown();
  }

  const env::Collector& collector() const { return *collector_; }
  const std::shared_ptr<PyActor>& actor() const { return actor_; }

 private:
  std::shared_ptr<PyActor> actor_;
  std::unique_ptr<env::Collector> collector_;
};

}  // namespace

void bind_collector(py::module_& m) {
  py::class_<PyCollector>(m, "_Collector", "tdp::env::Collector; use tdpolicy.Collector.")
      .def(py::init<std::shared_ptr<env::BatchedEnv>, std::shared_ptr<PyActor>, int64_t, int64_t, int64_t, py::object,
                    bool>(),
           py::arg("env"), py::arg("policy"), py::arg("frames_per_batch"), py::arg("total_frames"), py::arg("seed"),
           py::arg("interaction"), py::arg("prefetch"))
      .def("next", &PyCollector::next, "The next batch (a TensorDict [N, T]), or None at the end.")
      .def("update_from", &PyCollector::update_from, py::arg("module"))
      .def("set_seed", &PyCollector::set_seed, py::arg("seed"))
      .def("shutdown", &PyCollector::shutdown)
      .def_property_readonly("frames", [](const PyCollector& c) { return c.collector().frames(); })
      .def_property_readonly("num_batches", [](const PyCollector& c) { return c.collector().num_batches(); })
      .def_property_readonly("policy", &PyCollector::actor);
}

}  // namespace tdp::python
