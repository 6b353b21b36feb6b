// gru_cell: reads (input, hidden) and writes the next hidden state (tdp::nn::GruCell).
#include "sdk/nn/networks.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/recurrent_cell.h"
#include "sdk/policy/kinds/validation_context.h"

namespace tdp::policy::kinds {
namespace {

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& cell = site.module.network().gru_cell();
  if (!context.arity(site, 2, 1, "a gru_cell")) return false;
  return validate_recurrent_cell(site, context, cell.input_size(), cell.hidden_size(), /*gates=*/3, outputs);
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& cell = network.gru_cell();
  return nn::TensorDictModule(nn::GruCell(nn::GruCellOptions(cell.input_size(), cell.hidden_size())), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* gru = dynamic_cast<const nn::GruCellImpl*>(&network);
  if (gru == nullptr) return false;
  out->mutable_gru_cell()->set_input_size(gru->options().input_size());
  out->mutable_gru_cell()->set_hidden_size(gru->options().hidden_size());
  return true;
}

}  // namespace

extern const NetworkKind kGruCell{tdpolicy::Network::kGruCell, validate, build, export_network, "GruCell"};

}  // namespace tdp::policy::kinds
