#include "sdk/distributions/beta.h"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <torch/csrc/autograd/custom_function.h>

#include "sdk/distributions/dist_utils.h"

namespace tdp::dist {
namespace {

at::Tensor stack_concentrations(const at::Tensor& c1, const at::Tensor& c0) {
  std::array<at::Tensor, 2> both =
      internal::broadcast_all<2>({internal::require_defined(c1, "Beta", "concentration1"),
                                  internal::require_defined(c0, "Beta", "concentration0")});
  return at::stack(both, -1);
}

// The Dirichlet sampler with PyTorch's implicit-reparameterization backward
// (torch.distributions.dirichlet._Dirichlet).
struct DirichletSample : public torch::autograd::Function<DirichletSample> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& concentration,
                            c10::optional<at::Generator> generator) {
    at::Tensor x = at::_sample_dirichlet(concentration, generator);
    ctx->save_for_backward({x, concentration});
    return x;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& concentration = saved[1];
    const at::Tensor& grad_output = grad_outputs[0];
    at::Tensor total = concentration.sum(-1, true).expand_as(concentration);
    at::Tensor grad = at::_dirichlet_grad(x, concentration, total);
    return {grad * (grad_output - (x * grad_output).sum(-1, true)), at::Tensor()};
  }
};

}  // namespace

Beta::Beta(const at::Tensor& concentration1, const at::Tensor& concentration0,
           c10::optional<bool> validate_args)
    : Beta(stack_concentrations(concentration1, concentration0), validate_args) {}

Beta::Beta(at::Tensor concentration, c10::optional<bool> validate_args)
    : Distribution(std::vector<int64_t>(concentration.sizes().begin(),
                                        concentration.sizes().end() - 1),
                   {}, validate_args),
      concentration_(std::move(concentration)) {
  check_param("concentration1", concentration1(), Support::positive());
  check_param("concentration0", concentration0(), Support::positive());
}

at::Tensor Beta::concentration1() const { return concentration_.select(-1, 0); }
at::Tensor Beta::concentration0() const { return concentration_.select(-1, 1); }

at::Tensor Beta::rsample(c10::IntArrayRef sample_shape, const GeneratorOpt& generator) const {
  at::DimVector shape = extended_shape(sample_shape);
  shape.push_back(2);
  return DirichletSample::apply(concentration_.expand(shape), generator).select(-1, 0);
}

at::Tensor Beta::log_prob(const at::Tensor& value) const {
  validate_sample(value, "log_prob");
  at::Tensor heads_tails = at::stack({value, 1.0 - value}, -1);
  return (at::log(heads_tails) * (concentration_ - 1.0)).sum(-1) +
         at::lgamma(concentration_.sum(-1)) - at::lgamma(concentration_).sum(-1);
}

at::Tensor Beta::entropy() const {
  const int64_t k = concentration_.size(-1);
  at::Tensor a0 = concentration_.sum(-1);
  return at::lgamma(concentration_).sum(-1) - at::lgamma(a0) -
         at::rsub(a0, k) * at::digamma(a0) -
         ((concentration_ - 1.0) * at::digamma(concentration_)).sum(-1);
}

at::Tensor Beta::mean() const {
  at::Tensor c1 = concentration1();
  return c1 / (c1 + concentration0());
}

at::Tensor Beta::mode() const {
  at::Tensor concentrationm1 = (concentration_ - 1).clamp_min(0.);
  at::Tensor mode = concentrationm1 / concentrationm1.sum(-1, true);
  // Both concentrations below one: the density peaks at an end; PyTorch picks the argmax.
  at::Tensor mask = (concentration_ < 1).all(-1);
  at::Tensor corner = at::one_hot(mode.argmax(-1), concentrationm1.size(-1)).to(mode.scalar_type());
  mode = at::where(mask.unsqueeze(-1), corner, mode);
  return mode.select(-1, 0);
}

at::Tensor Beta::variance() const {
  at::Tensor c1 = concentration1();
  at::Tensor c0 = concentration0();
  at::Tensor total = c1 + c0;
  return c1 * c0 / (total.pow(2) * (total + 1));
}

}  // namespace tdp::dist
