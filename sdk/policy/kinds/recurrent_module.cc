// lstm and gru: TorchRL's LSTMModule and GRUModule stepping once per call
// (tdp::nn::LSTMModule, tdp::nn::GRUModule). They read [input, h, (c,) is_init]
// and write [output, next h, (next c)]; a state or is_init that no declared
// input or earlier module provides is zeros / false.
#include "sdk/nn/recurrent_module.h"

#include <absl/strings/str_cat.h>

#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

int64_t layers_of(const tdpolicy::RecurrentModule& spec) { return spec.num_layers() == 0 ? 1 : spec.num_layers(); }

// `states`: 2 for an LSTM (h, c), 1 for a GRU; gates: 4 and 3.
bool validate(const tdpolicy::RecurrentModule& spec, const std::string& path, int states,
              const std::set<NestedKey>& overwrites, ValidationContext& context) {
  const int64_t gates = states == 2 ? 4 : 3;
  const char* names = states == 2 ? "input, h, c, is_init" : "input, h, is_init";
  const char* out_names = states == 2 ? "output, next h, next c" : "output, next h";
  if (spec.in_keys_size() != states + 2) {
    return context.fail(path + ".in_keys",
                        absl::StrCat("expected ", states + 2, " keys (", names, "), got ", spec.in_keys_size()));
  }
  if (spec.out_keys_size() != states + 1) {
    return context.fail(path + ".out_keys",
                        absl::StrCat("expected ", states + 1, " keys (", out_names, "), got ", spec.out_keys_size()));
  }
  const int64_t input_size = spec.input_size();
  const int64_t hidden = spec.hidden_size();
  const int64_t layers = layers_of(spec);
  if (!context.positive(input_size, path + ".input_size") || !context.positive(hidden, path + ".hidden_size") ||
      !context.positive(layers, path + ".num_layers")) {
    return false;
  }
  // Per layer: weight_ih [gates * H, in], weight_hh [gates * H, H] and two
  // biases; layers after the first read the one before (H).
  const double per_gate = static_cast<double>(gates) * static_cast<double>(hidden);
  const double weights = per_gate * (double(input_size) + hidden + 2) +
                         (static_cast<double>(layers) - 1) * per_gate * (2.0 * static_cast<double>(hidden) + 2);
  if (!context.allocatable(weights, path)) return false;
  if (!context.fits_one_tensor(std::vector<int64_t>{gates * hidden}, path, "its gates")) return false;
  const std::vector<int64_t> state_shape{layers, hidden};
  if (!context.fits_one_tensor(state_shape, path, "its state")) return false;

  auto input = context.read(spec.in_keys(0), path + ".in_keys[0]");
  if (!input || !context.check_last_dim(*input, input_size, path + ".in_keys[0]", "input_size")) return false;
  for (int i = 1; i < spec.in_keys_size(); ++i) {
    const std::string key_path = absl::StrCat(path, ".in_keys[", i, "]");
    auto key = context.key_at(spec.in_keys(i), key_path);
    if (!key) return false;
    if (!context.is_written(*key)) continue;  // zeros (a state) or false (is_init) at every call
    auto shape = context.read(spec.in_keys(i), key_path);
    if (!shape) return false;
    if (!*shape) continue;
    const bool is_init = i == spec.in_keys_size() - 1;
    if (is_init && (**shape).size() <= 1 && ((**shape).empty() || (**shape)[0] == 1)) continue;
    if (!is_init && **shape == state_shape) continue;
    return context.fail(
        key_path, absl::StrCat("\"", spec.in_keys(i), "\" has per-env shape ", shape_to_string(**shape), ", expected ",
                               is_init ? std::string("[1] (is_init, TorchRL's InitTracker)")
                                       : absl::StrCat(shape_to_string(state_shape), " (num_layers, hidden_size)")));
  }
  if (!context.write(spec.out_keys(0), path + ".out_keys[0]", with_last(*input, hidden), overwrites)) return false;
  for (int i = 1; i < spec.out_keys_size(); ++i) {
    if (!context.write(spec.out_keys(i), absl::StrCat(path, ".out_keys[", i, "]"), state_shape, overwrites)) {
      return false;
    }
  }
  return true;
}

nn::RecurrentModuleOptions options_of(const tdpolicy::RecurrentModule& spec) {
  return nn::RecurrentModuleOptions(spec.input_size(), spec.hidden_size())
      .num_layers(layers_of(spec))
      .bias(!spec.no_bias())
      .in_keys(keys_of(spec.in_keys()))
      .out_keys(keys_of(spec.out_keys()));
}

void export_to(const nn::RecurrentModuleImpl& module, tdpolicy::RecurrentModule* out) {
  const nn::RecurrentModuleOptions& o = module.options();
  out->set_input_size(o.input_size());
  out->set_hidden_size(o.hidden_size());
  out->set_num_layers(o.num_layers());
  out->set_no_bias(!o.bias());
  add_keys(o.in_keys(), out->mutable_in_keys());
  add_keys(o.out_keys(), out->mutable_out_keys());
}

bool validate_lstm(const tdpolicy::Module& module, const std::string& path, const std::set<NestedKey>& overwrites,
                   ValidationContext& context) {
  return validate(module.lstm(), path + ".lstm", 2, overwrites, context);
}

bool validate_gru(const tdpolicy::Module& module, const std::string& path, const std::set<NestedKey>& overwrites,
                  ValidationContext& context) {
  return validate(module.gru(), path + ".gru", 1, overwrites, context);
}

ModulePtr build_lstm(const tdpolicy::Module& module, const std::string&, const BuildContext&) {
  return nn::LSTMModule(options_of(module.lstm())).ptr();
}

ModulePtr build_gru(const tdpolicy::Module& module, const std::string&, const BuildContext&) {
  return nn::GRUModule(options_of(module.gru())).ptr();
}

bool export_lstm(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string&,
                 ExportContext& context) {
  auto* lstm = dynamic_cast<const nn::LSTMModuleImpl*>(&module);
  if (lstm == nullptr) return false;
  export_to(*lstm, out->mutable_lstm());
  context.mark_overwrites(lstm->out_keys_source(), out);
  return true;
}

bool export_gru(const nn::TensorDictModuleBase& module, tdpolicy::Module* out, const std::string&,
                ExportContext& context) {
  auto* gru = dynamic_cast<const nn::GRUModuleImpl*>(&module);
  if (gru == nullptr) return false;
  export_to(*gru, out->mutable_gru());
  context.mark_overwrites(gru->out_keys_source(), out);
  return true;
}

}  // namespace

extern const ModuleKind kLstm{tdpolicy::Module::kLstm, validate_lstm, build_lstm, export_lstm};
extern const ModuleKind kGru{tdpolicy::Module::kGru, validate_gru, build_gru, export_gru};

}  // namespace tdp::policy::kinds
