// lstm_cell: reads (input, h, c) and writes the next (h, c) (tdp::nn::LstmCell).
#include "sdk/nn/networks.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/recurrent_cell.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& cell = site.module.network().lstm_cell();
  if (!context.arity(site, 3, 2, "an lstm_cell")) return false;
  return validate_recurrent_cell(site, context, cell.input_size(), cell.hidden_size(), /*gates=*/4, outputs);
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& cell = network.lstm_cell();
  return nn::TensorDictModule(nn::LstmCell(nn::LstmCellOptions(cell.input_size(), cell.hidden_size())), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* lstm = dynamic_cast<const nn::LstmCellImpl*>(&network);
  if (lstm == nullptr) return false;
  out->mutable_lstm_cell()->set_input_size(lstm->options().input_size());
  out->mutable_lstm_cell()->set_hidden_size(lstm->options().hidden_size());
  return true;
}

}  // namespace

extern const NetworkKind kLstmCell{tdpolicy::Network::kLstmCell, validate, build, export_network, "LstmCell"};

}  // namespace tdp::policy::kinds
