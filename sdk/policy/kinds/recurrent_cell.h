// Internal to sdk/policy: the validation gru_cell.cc and lstm_cell.cc share. A cell reads
// (input, state...) and writes its next state(s), each [..., hidden_size].
//
//   if (!context.arity(site, 2, 1, "a gru_cell")) return false;
//   return validate_recurrent_cell(site, context, cell.input_size(), cell.hidden_size(), /*gates=*/3, outputs);
#pragma once

#include <cstdint>
#include <vector>

#include "sdk/policy/kinds/kind.h"

namespace tdp::policy::kinds {

// The sizes (positive, weights allocatable, `gates` x hidden_size gates fitting one tensor),
// the input's last dim (input_size) and the states' (hidden_size); one output per out_key.
bool validate_recurrent_cell(const NetworkSite& site, ValidationContext& context, int64_t input_size,
                             int64_t hidden_size, int gates, std::vector<Shape>& outputs);

}  // namespace tdp::policy::kinds
