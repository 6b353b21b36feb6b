// Reads a golden file written by the Python generators under tests/ (tests/golden/
// make_distribution_golden.py, tests/probabilistic/make_autoregressive_golden.py): one tensor per
// line, "<name> <dtype> <ndim> <dims...> <values...>", dtype float32, float64 or int64, '#'
// comments. A missing or malformed file, or a name given twice, throws std::runtime_error naming
// the file and line.
//
//   std::map<std::string, at::Tensor> golden = test_util::read_golden_file(test_util::runfile("..."));
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace tdp::test_util {

std::map<std::string, at::Tensor> read_golden_file(const std::string& path);

}  // namespace tdp::test_util
