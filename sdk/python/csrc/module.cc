// tdpolicy._C: the C++ SDK seen from Python (tdpolicy.Actor, tdpolicy.envs, tdpolicy.Collector).
// Built by Bazel (//sdk/python:_C.so) against the torch of the project's venv; `import torch`
// must come first, as for any extension that uses torch's tensor casters (tdpolicy does it).
#include <torch/csrc/utils/pybind.h>

#include "sdk/python/csrc/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "The tdpolicy C++ SDK: Actor, batched environments and the collector.";
  tdp::python::bind_actor(m);
  tdp::python::bind_envs(m);
  tdp::python::bind_collector(m);
}
