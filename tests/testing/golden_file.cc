#include "tests/testing/golden_file.h"

#include <ATen/Functions.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace tdp::test_util {

std::map<std::string, at::Tensor> read_golden_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open the golden file " + path);
  std::map<std::string, at::Tensor> records;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, dtype;
    int64_t ndim = 0;
    fields >> name >> dtype >> ndim;
    std::vector<int64_t> shape(ndim);
    int64_t numel = 1;
    for (auto& d : shape) {
      fields >> d;
      numel *= d;
    }
    std::vector<double> values;
    std::string token;
    while (fields >> token) values.push_back(std::strtod(token.c_str(), nullptr));
    if (!fields.eof() || static_cast<int64_t>(values.size()) != numel) {
      throw std::runtime_error(path + ":" + std::to_string(line_no) +
                               ": malformed record " + name);
    }
    at::Tensor t = at::tensor(values, at::kDouble).reshape(shape);
    if (dtype == "float32") {
      t = t.to(at::kFloat);
    } else if (dtype == "int64") {
      t = t.to(at::kLong);
    } else if (dtype != "float64") {
      throw std::runtime_error(path + ": unknown dtype " + dtype);
    }
    if (!records.emplace(name, t).second) {
      throw std::runtime_error(path + ":" + std::to_string(line_no) + ": duplicate record " + name);
    }
  }
  return records;
}

}  // namespace tdp::test_util
