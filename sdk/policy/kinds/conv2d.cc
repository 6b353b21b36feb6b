// conv2d: torch.nn.Conv2d over [..., C, H, W] (tdp::nn::Conv2d).
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "sdk/nn/layers.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/policy/kinds/kind.h"
#include "sdk/policy/kinds/validation_context.h"
#include "sdk/tensordict/tensordict.h"

namespace tdp::policy::kinds {
namespace {

// Two values >= min, or (may_be_empty) none for the default.
bool check_pair(const google::protobuf::RepeatedField<int64_t>& values, int64_t min, bool may_be_empty,
                const std::string& path, ValidationContext& context) {
  if (values.empty() && may_be_empty) return true;
  if (values.size() != 2 || values[0] < min || values[1] < min) {
    return context.fail(
        path, absl::StrCat("expected 2 values (height, width) >= ", min, ", got [", absl::StrJoin(values, ", "), "]"),
        may_be_empty ? "or none for the default" : "");
  }
  return true;
}

std::vector<int64_t> or_default(const google::protobuf::RepeatedField<int64_t>& values, int64_t fallback) {
  if (values.empty()) return {fallback, fallback};
  return {values.begin(), values.end()};
}

bool validate(const NetworkSite& site, ValidationContext& context, std::vector<Shape>& outputs) {
  const auto& conv = site.module.network().conv2d();
  const std::string& p = site.kind_path;
  if (!context.arity(site, 1, 1, "a conv2d")) return false;
  if (!context.positive(conv.in_channels(), p + ".in_channels") ||
      !context.positive(conv.out_channels(), p + ".out_channels") ||
      !check_pair(conv.kernel_size(), 1, false, p + ".kernel_size", context) ||
      !check_pair(conv.stride(), 1, true, p + ".stride", context) ||
      !check_pair(conv.padding(), 0, true, p + ".padding", context) ||
      !check_pair(conv.dilation(), 1, true, p + ".dilation", context)) {
    return false;
  }
  if (conv.groups() < 0) return context.fail(p + ".groups", absl::StrCat("must be positive, got ", conv.groups()));
  const int64_t groups = conv.groups() == 0 ? 1 : conv.groups();
  if (conv.in_channels() % groups != 0 || conv.out_channels() % groups != 0) {
    return context.fail(p + ".groups", absl::StrCat(groups, " does not divide in_channels ", conv.in_channels(),
                                                    " and out_channels ", conv.out_channels()));
  }
  const double weights = double(conv.out_channels()) * double(conv.in_channels() / groups) *
                             double(conv.kernel_size(0)) * double(conv.kernel_size(1)) +
                         double(conv.out_channels());
  if (!context.allocatable(weights, p)) return false;
  const Shape& in = site.inputs[0];
  if (!in) {
    outputs.push_back(std::nullopt);
    return true;
  }
  const std::string in_path = site.path + ".in_keys[0]";
  if (in->size() < 3) {
    return context.fail(in_path, absl::StrCat("the input has shape ", shape_to_string(*in),
                                              "; a conv2d reads [..., channels, height, width]"));
  }
  std::vector<int64_t> out(in->begin(), in->end());
  const size_t c = out.size() - 3;
  if (out[c] != conv.in_channels()) {
    return context.fail(
        in_path,
        absl::StrCat("the input has shape ", shape_to_string(*in), " but conv2d.in_channels is ", conv.in_channels()),
        "make the declared input shape and the layer size agree");
  }
  const auto stride = or_default(conv.stride(), 1), padding = or_default(conv.padding(), 0),
             dilation = or_default(conv.dilation(), 1);
  out[c] = conv.out_channels();
  for (int d = 0; d < 2; ++d) {
    const double span = double(dilation[d]) * double(conv.kernel_size(d) - 1) + 1;
    const double room = double(out[c + 1 + d]) + 2 * double(padding[d]) - span;
    if (room < 0) {
      return context.fail(in_path, absl::StrCat("the input has shape ", shape_to_string(*in), ", smaller than the ",
                                                d == 0 ? "height" : "width", " the kernel spans (", span,
                                                " with dilation and padding)"));
    }
    out[c + 1 + d] = static_cast<int64_t>(room) / stride[d] + 1;
  }
  if (!context.fits_one_tensor(out, p, "its output")) return false;
  outputs.push_back(std::move(out));
  return true;
}

ModulePtr build(const tdpolicy::Network& network, const nn::TensorDictModuleOptions& options, const BuildContext&) {
  const auto& c = network.conv2d();
  nn::Conv2dOptions conv(c.in_channels(), c.out_channels(), {c.kernel_size().begin(), c.kernel_size().end()});
  conv.stride(or_default(c.stride(), 1))
      .padding(or_default(c.padding(), 0))
      .dilation(or_default(c.dilation(), 1))
      .groups(c.groups() == 0 ? 1 : c.groups())
      .bias(!c.no_bias());
  return nn::TensorDictModule(nn::Conv2d(conv), options).ptr();
}

bool export_network(const torch::nn::Module& network, tdpolicy::Network* out) {
  auto* conv = dynamic_cast<const nn::Conv2dImpl*>(&network);
  if (conv == nullptr) return false;
  const auto& o = conv->options();
  auto* c = out->mutable_conv2d();
  c->set_in_channels(o.in_channels());
  c->set_out_channels(o.out_channels());
  for (int64_t v : o.kernel_size()) c->add_kernel_size(v);
  for (int64_t v : o.stride()) c->add_stride(v);
  for (int64_t v : o.padding()) c->add_padding(v);
  for (int64_t v : o.dilation()) c->add_dilation(v);
  c->set_groups(o.groups());
  c->set_no_bias(!o.bias());
  return true;
}

}  // namespace

extern const NetworkKind kConv2d{tdpolicy::Network::kConv2D, validate, build, export_network, "Conv2d"};

}  // namespace tdp::policy::kinds
