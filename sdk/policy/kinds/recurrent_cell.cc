#include "sdk/policy/kinds/recurrent_cell.h"

#include <absl/strings/str_cat.h>

#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {

bool validate_recurrent_cell(const NetworkSite& site, ValidationContext& context, int64_t input_size,
                             int64_t hidden_size, int gates, std::vector<Shape>& outputs) {
  if (!context.positive(input_size, site.kind_path + ".input_size") ||
      !context.positive(hidden_size, site.kind_path + ".hidden_size")) {
    return false;
  }
  if (!context.allocatable(static_cast<double>(gates) * hidden_size * (double(input_size) + hidden_size + 2),
                           site.kind_path)) {
    return false;
  }
  if (!context.fits_one_tensor(std::vector<int64_t>{gates * hidden_size}, site.kind_path, "its gates")) return false;
  if (!context.check_last_dim(site.inputs[0], input_size, site.path + ".in_keys[0]", "input_size")) return false;
  for (size_t i = 1; i < site.inputs.size(); ++i) {
    if (!context.check_last_dim(site.inputs[i], hidden_size, absl::StrCat(site.path, ".in_keys[", i, "]"),
                                "hidden_size")) {
      return false;
    }
  }
  for (int i = 0; i < site.module.out_keys_size(); ++i) outputs.push_back(with_last(site.inputs[0], hidden_size));
  return true;
}

}  // namespace tdp::policy::kinds
