// The parts of tdpolicy._C, one function each, called by module.cc's PYBIND11_MODULE.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace tdp::python {

void bind_actor(pybind11::module_& m);
void bind_envs(pybind11::module_& m);
void bind_collector(pybind11::module_& m);

}  // namespace tdp::python
