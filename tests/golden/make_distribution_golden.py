#!/usr/bin/env python3
"""Writes tests/golden/distributions_golden.txt, the reference values that
//tests/distributions:distributions_test compares tdp::dist and tdp::nn against.

Run it with the project's Python environment (the one ./bazelw creates; torch, tensordict and
torchrl pinned in third_party/python/requirements.txt):

    ~/.cache/tdpolicy/venv/bin/python3 tests/golden/make_distribution_golden.py [--out PATH]

Without --out it rewrites the committed tests/golden/distributions_golden.txt next to this
script. //tests/golden:distributions_golden_regenerated_test runs it into a temporary file and
checks the C++ against that, so the comparison is also live against the installed packages.

Every reference value comes from the class that defines it, never from a formula written here:
  * Normal, Independent, Categorical, Bernoulli, Beta, Uniform: torch.distributions.
  * OneHotCategorical, TruncatedNormal, TruncatedStandardNormal, Delta, NormalParamExtractor,
    AddStateIndependentNormalScale, biased_softplus, mappings, CompositeDistribution and
    set_composite_lp_aggregate: tensordict.nn (tensordict.nn.distributions, tensordict.nn.utils).
  * TanhNormal: torchrl.modules.TanhNormal.
  * OneHotCategorical's event_shape, mean and variance: torch.distributions.OneHotCategorical,
    because tdp::dist::OneHotCategorical deliberately follows torch there and not tensordict
    (whose class subclasses Categorical and so inherits event_shape [] and a NaN, batch-shaped
    mean; recorded as one_hot_categorical/*/tensordict_*, the C++ test says why).
  * "samples_*" records: what the class's own sample()/rsample() draws from the global generator
    after torch.manual_seed(seed); the C++ test draws with an at::Generator seeded the same way
    and expects the same values. One exception: tensordict 0.13's OneHotCategorical.rsample
    raises under torch 2.11, so samples_one_hot_categorical_rsample holds the draw of torch's
    RelaxedOneHotCategorical, which that rsample hardens to a one-hot.
  * biased_softplus computes its shift in float32 in tensordict and in double in the C++; the
    C++ test compares float64 values that go through it to float32 precision and says why.
  * Records whose field is a TensorDict key (composite/*/<what>/<key>, samples_composite/*/<key>)
    hold one leaf each; nested keys are joined with "." as TensorDict.flatten_keys(".") does, so
    the C++ test also reads the key names tensordict produces from this file.

File format (plain text, one tensor per line, '#' starts a comment):
    <name> <dtype> <ndim> <dim_0> ... <dim_{ndim-1}> <value_0> ... <value_{numel-1}>
dtype is float32, float64 or int64 (bool is written as int64); values are in row-major order,
floats printed with 17 significant digits (exact for both float widths) and inf / -inf / nan
spelled out. The first line names the torch, tensordict and torchrl versions.
"""

import argparse
import math
import os
import warnings

import tensordict
import torch
import torch.distributions as D
import torchrl
from tensordict import TensorDict
from tensordict.nn import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    NormalParamExtractor,
    biased_softplus,
    mappings,
    set_composite_lp_aggregate,
)
from tensordict.nn.distributions import Delta, OneHotCategorical, TruncatedNormal
from tensordict.nn.distributions.truncated_normal import TruncatedStandardNormal
from torchrl.modules import TanhNormal

# Out-of-support values are part of the cases (they score -inf), so no validation. (TorchRL
# turns it off on import as well.)
D.Distribution.set_default_validate_args(False)

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributions_golden.txt")

records = []


def put(name, tensor):
    t = tensor.detach().cpu()
    if t.dtype == torch.bool:
        t = t.to(torch.int64)
    dtype = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64"}[t.dtype]
    flat = t.reshape(-1).tolist()
    if dtype == "int64":
        values = [str(int(v)) for v in flat]
    else:
        values = []
        for v in flat:
            if math.isnan(v):
                values.append("nan")
            elif math.isinf(v):
                values.append("inf" if v > 0 else "-inf")
            else:
                values.append("%.17g" % v)
    assert " " not in name, name
    records.append(" ".join([name, dtype, str(t.dim())] + [str(s) for s in t.shape] + values))


def flat_items(td):
    """(key joined with '.', leaf) for every leaf of a TensorDict, sorted by key."""
    flat = td.flatten_keys(".")
    return sorted((key, flat.get(key)) for key in flat.keys())


# Parameters of the NormalParamExtractor cases: (record suffix, scale_mapping, scale_lb).
# tests/distributions/nn_golden_test.cc holds the same table.
NORMAL_PARAM_EXTRACTOR_CASES = [
    ("biased_softplus_1.0", "biased_softplus_1.0", 1e-4),
    ("biased_softplus", "biased_softplus", 1e-4),
    ("biased_softplus_0.5_0.1", "biased_softplus_0.5_0.1", 1e-4),
    ("biased_softplus_2.0_0.001", "biased_softplus_2.0_0.001", 1e-4),
    ("softplus", "softplus", 1e-4),
    ("exp", "exp", 1e-4),
    ("relu", "relu", 1e-4),
    ("expln", "expln", 1e-4),
    ("none", "none", 1e-4),
    ("softplus_lb_0.5", "softplus", 0.5),
]

# biased_softplus(bias, min_val) cases, one row each.
BIASED_SOFTPLUS_ARGS = [(1.0, 0.01), (0.5, 0.1), (2.0, 0.001), (0.3, 0.2), (5.0, 0.01)]

# AddStateIndependentNormalScale cases: (record case, scale_shape, kwargs, loc shape, parameter
# values written after construction or None). Same table in nn_golden_test.cc.
STATE_INDEPENDENT_CASES = [
    ("add_scale_default", (3,), {}, (2, 3), None),
    ("add_scale_exp_values", (3,), {}, (2, 3), [-1.0, 0.0, 2.0]),
    ("add_scale_biased_softplus", (3,), {"scale_mapping": "biased_softplus_1.0",
                                         "init_value": 0.5}, (2, 3), None),
    ("add_scale_softplus_lb", (2, 3), {"scale_mapping": "softplus", "scale_lb": 0.5},
     (4, 2, 3), [[-3.0, 0.0, 1.0], [0.2, -0.1, 4.0]]),
]


def generate(dtype):
    tag = {torch.float32: "f32", torch.float64: "f64"}[dtype]

    def T(values):
        return torch.tensor(values, dtype=torch.float64).to(dtype)

    def rec(case, field, tensor):
        put("%s/%s/%s" % (case, tag, field), tensor)

    # Normal and Independent(Normal, 1)
    loc = T([[0.0, 1.5, -2.0], [0.3, -0.7, 4.0]])
    scale = T([[1.0, 0.5, 2.0], [0.1, 3.0, 1e-3]])
    value = T([[0.2, 1.0, -5.0], [0.31, 2.0, 4.0005]])
    q = T([[0.5, 0.975, 0.01], [0.25, 0.999, 1e-4]])
    d = D.Normal(loc, scale)
    for k, v in [("loc", loc), ("scale", scale), ("value", value), ("q", q),
                 ("log_prob", d.log_prob(value)), ("entropy", d.entropy()), ("mean", d.mean),
                 ("mode", d.mode), ("stddev", d.stddev), ("variance", d.variance),
                 ("cdf", d.cdf(value)), ("icdf", d.icdf(q))]:
        rec("normal", k, v)
    ind = D.Independent(d, 1)
    rec("independent_normal", "log_prob", ind.log_prob(value))
    rec("independent_normal", "entropy", ind.entropy())

    # Categorical from logits and from (unnormalized) probs
    logits = T([[0.1, -1.2, 2.0, 0.0], [5.0, 5.0, -3.0, 1.0]])
    probs = T([[0.1, 0.2, 0.3, 0.4], [2.0, 1.0, 1.0, 0.0]])
    cvalue = torch.tensor([[2, 0], [3, 1], [0, 3]])
    for case, cd, param in [("categorical_logits", D.Categorical(logits=logits), logits),
                            ("categorical_probs", D.Categorical(probs=probs), probs)]:
        rec(case, "param", param)
        rec(case, "value", cvalue)
        rec(case, "log_prob", cd.log_prob(cvalue))
        rec(case, "entropy", cd.entropy())
        rec(case, "mode", cd.mode)
        rec(case, "probs", cd.probs)
        rec(case, "logits", cd.logits)

    # OneHotCategorical: tensordict's class (log_prob scores the argmax, a one-hot int64 mode
    # with every tied maximum set). mean/variance: torch's OneHotCategorical (see the docstring).
    ohc = OneHotCategorical(logits=logits)
    onehot = torch.nn.functional.one_hot(cvalue, 4).to(torch.int64)
    rec("one_hot_categorical", "logits", logits)
    rec("one_hot_categorical", "value", onehot)
    rec("one_hot_categorical", "log_prob", ohc.log_prob(onehot))
    rec("one_hot_categorical", "entropy", ohc.entropy())
    rec("one_hot_categorical", "mode", ohc.mode)
    rec("one_hot_categorical", "deterministic_sample", ohc.deterministic_sample)
    rec("one_hot_categorical", "probs", ohc.probs)
    rec("one_hot_categorical", "tensordict_event_shape",
        torch.tensor(list(ohc.event_shape), dtype=torch.int64))
    rec("one_hot_categorical", "tensordict_mean", ohc.mean)
    rec("one_hot_categorical", "tensordict_variance", ohc.variance)
    torch_ohc = D.OneHotCategorical(logits=logits)
    rec("one_hot_categorical", "event_shape",
        torch.tensor(list(torch_ohc.event_shape), dtype=torch.int64))
    rec("one_hot_categorical", "mean", torch_ohc.mean)
    rec("one_hot_categorical", "variance", torch_ohc.variance)

    # Bernoulli from probs (0.5 makes the mode NaN) and from logits
    bprobs = T([0.1, 0.5, 0.9, 0.0, 1.0])
    blogits = T([-3.0, 0.0, 0.5, 20.0, -20.0])
    bvalue = T([1.0, 0.0, 1.0, 0.0, 1.0])
    for case, bd, param in [("bernoulli_probs", D.Bernoulli(probs=bprobs), bprobs),
                            ("bernoulli_logits", D.Bernoulli(logits=blogits), blogits)]:
        rec(case, "param", param)
        rec(case, "value", bvalue)
        rec(case, "log_prob", bd.log_prob(bvalue))
        rec(case, "entropy", bd.entropy())
        rec(case, "mean", bd.mean)
        rec(case, "mode", bd.mode)
        rec(case, "variance", bd.variance)

    # Beta, including both concentrations below one (mode at an end)
    c1 = T([2.0, 0.5, 1.0, 5.0, 0.3])
    c0 = T([5.0, 0.5, 3.0, 1.5, 0.2])
    bv = T([0.3, 0.01, 0.5, 0.9, 0.999])
    be = D.Beta(c1, c0)
    for k, v in [("concentration1", c1), ("concentration0", c0), ("value", bv),
                 ("log_prob", be.log_prob(bv)), ("entropy", be.entropy()), ("mean", be.mean),
                 ("mode", be.mode), ("variance", be.variance)]:
        rec("beta", k, v)

    # Uniform; values outside [low, high) score -inf
    low = T([-1.0, 0.0, 2.0, -5.0])
    high = T([1.0, 0.1, 3.0, 5.0])
    uv = T([0.0, 0.1, 2.5, -6.0])
    uq = T([0.5, 0.25, 0.0, 1.0])
    ud = D.Uniform(low, high)
    for k, v in [("low", low), ("high", high), ("value", uv), ("q", uq),
                 ("log_prob", ud.log_prob(uv)), ("entropy", ud.entropy()), ("mean", ud.mean),
                 ("stddev", ud.stddev), ("variance", ud.variance), ("cdf", ud.cdf(uv)),
                 ("icdf", ud.icdf(uq))]:
        rec("uniform", k, v)

    # Delta (tensordict): equal, within tolerance, and far values
    param = T([[0.5, -1.0, 2.0], [1e3, 0.0, -3.0]])
    dvalue = torch.stack([param, param + 1e-7 * (1 + param.abs()) * 0.5, param + 1e-2])
    delta = Delta(param)
    rec("delta", "param", param)
    rec("delta", "value", dvalue)
    rec("delta", "log_prob", delta.log_prob(dvalue))
    rec("delta", "mean", delta.mean)
    rec("delta", "mode", delta.mode)
    rec("delta", "deterministic_sample", delta.deterministic_sample)
    rec("delta", "sample", delta.sample((2,)))
    rec("delta", "batch_shape", torch.tensor(list(delta.batch_shape), dtype=torch.int64))
    rec("delta", "event_shape", torch.tensor(list(delta.event_shape), dtype=torch.int64))

    # TruncatedNormal and TruncatedStandardNormal (tensordict). entropy is a property there.
    tloc = T([0.0, 1.0, -2.0, 0.5, 3.0])
    tscale = T([1.0, 0.5, 2.0, 0.1, 1.0])
    ta = T([-1.0, 0.0, -3.0, -1.0, -1.0])
    tb = T([1.0, 2.0, 5.0, 0.6, 1.0])
    tv = T([0.5, 1.9, 0.0, 0.55, 0.9])
    tq = T([0.5, 0.1, 0.9, 0.999, 0.5])
    tn = TruncatedNormal(tloc, tscale, ta, tb)
    for k, v in [("loc", tloc), ("scale", tscale), ("a", ta), ("b", tb), ("value", tv),
                 ("q", tq), ("log_prob", tn.log_prob(tv)), ("entropy", tn.entropy),
                 ("mean", tn.mean), ("variance", tn.variance), ("cdf", tn.cdf(tv)),
                 ("icdf", tn.icdf(tq)), ("auc", tn.auc)]:
        rec("truncated_normal", k, v)
    ts = TruncatedStandardNormal(ta, tb)
    for k, v in [("log_prob", ts.log_prob(tv.clamp(-1, 1))), ("entropy", ts.entropy),
                 ("mean", ts.mean), ("variance", ts.variance), ("cdf", ts.cdf(tv)),
                 ("icdf", ts.icdf(tq)), ("auc", ts.auc)]:
        rec("truncated_standard_normal", k, v)

    # TanhNormal (TorchRL, safe_tanh=True): default bounds, rescaled bounds with tanh_loc, and
    # actions at the bounds (where the safe atanh keeps log_prob finite).
    nloc = T([[0.0, 0.5, -1.0], [2.0, -0.3, 10.0]])
    nscale = T([[1.0, 0.3, 0.5], [0.2, 1.5, 1.0]])
    nv = T([[0.1, 0.4, -0.7], [0.95, -0.2, 1.0]])
    tanh_normal = TanhNormal(nloc, nscale)
    for k, v in [("loc", nloc), ("scale", nscale), ("value", nv),
                 ("log_prob", tanh_normal.log_prob(nv)),
                 ("deterministic_sample", tanh_normal.deterministic_sample)]:
        rec("tanh_normal", k, v)
    nlow, nhigh = T([-2.0, 0.0, -1.0]), T([2.0, 1.0, 3.0])
    nv2 = T([[1.5, 0.2, 2.9], [-2.0, 0.99, 0.0]])
    bounded = TanhNormal(nloc, nscale, upscale=3.0, low=nlow, high=nhigh, tanh_loc=True)
    for k, v in [("low", nlow), ("high", nhigh), ("value", nv2),
                 ("log_prob", bounded.log_prob(nv2)),
                 ("deterministic_sample", bounded.deterministic_sample)]:
        rec("tanh_normal_bounded", k, v)
    # event_dims=0: one log-prob per action dim.
    per_dim = TanhNormal(nloc, nscale, low=nlow, high=nhigh, event_dims=0)
    rec("tanh_normal_event_dims_0", "log_prob", per_dim.log_prob(nv2))

    generate_nn(T, rec)
    generate_composite(T, rec)

    # Seeded samples: the classes' own draws after torch.manual_seed; the C++ draws with an
    # at::Generator seeded the same way.
    torch.manual_seed(7)
    rec("samples_normal_sample", "value", d.sample((2,)))
    torch.manual_seed(8)
    rec("samples_normal_rsample", "value", d.rsample((2,)))
    torch.manual_seed(9)
    rec("samples_categorical", "value", D.Categorical(logits=logits).sample((3,)))
    torch.manual_seed(10)
    rec("samples_one_hot_categorical", "value", OneHotCategorical(logits=logits).sample((3,)))
    torch.manual_seed(11)
    rec("samples_bernoulli", "value", D.Bernoulli(probs=bprobs).sample((3,)))
    torch.manual_seed(12)
    rec("samples_beta", "value", be.rsample((3,)))
    torch.manual_seed(13)
    rec("samples_uniform", "value", ud.rsample((3,)))
    # tensordict draws the uniforms in the default dtype (float32) whatever the bounds' dtype.
    torch.manual_seed(14)
    rec("samples_truncated_normal", "value", tn.rsample((3,)))
    torch.manual_seed(15)
    rec("samples_tanh_normal", "value", bounded.sample((2,)))
    # OneHotCategorical.rsample is tensordict's straight-through estimator: a
    # RelaxedOneHotCategorical(temperature=1) draw whose values are replaced by the one-hot of its
    # argmax. tensordict 0.13's own rsample raises under torch 2.11 (it passes both probs and
    # logits to RelaxedOneHotCategorical, which accepts only one), so the record is the relaxed
    # draw from torch's class; the C++ test applies the one-hot step.
    torch.manual_seed(16)
    rec("samples_one_hot_categorical_rsample", "relaxed",
        D.RelaxedOneHotCategorical(torch.tensor(1.0, dtype=logits.dtype),
                                   logits=logits).rsample((3,)))
    torch.manual_seed(17)
    rec("samples_truncated_standard_normal", "value", ts.rsample((2,)))
    torch.manual_seed(18)
    rec("samples_tanh_normal_rsample", "value", tanh_normal.rsample((2,)))


def generate_nn(T, rec):
    """tensordict.nn's mappings, biased_softplus, NormalParamExtractor and
    AddStateIndependentNormalScale."""
    x = T([-30.0, -3.0, -1.0, -0.25, 0.0, 0.25, 1.0, 3.0, 30.0])
    rec("mappings", "x", x)
    for name in ["softplus", "exp", "relu", "expln", "none", "biased_softplus",
                 "biased_softplus_1.0", "biased_softplus_0.5_0.1", "biased_softplus_2.0_0.001"]:
        rec("mappings", name, mappings(name)(x))

    rec("biased_softplus", "x", x)
    rec("biased_softplus", "args", torch.tensor(BIASED_SOFTPLUS_ARGS, dtype=torch.float64))
    modules = [biased_softplus(bias, min_val=min_val) for bias, min_val in BIASED_SOFTPLUS_ARGS]
    rec("biased_softplus", "out", torch.stack([m(x) for m in modules]))
    # The shift tensordict adds to x (a Python float, computed by inv_softplus in float32).
    rec("biased_softplus", "shift", torch.tensor([m.bias for m in modules], dtype=torch.float64))
    rec("biased_softplus", "zero", torch.stack([m(torch.zeros_like(x[:1])) for m in modules]))

    inp = T([[[-2.0, 0.5, 3.0, -40.0, -0.5, 0.0], [1.0, -1.0, 0.25, 2.0, 35.0, -3.0]],
             [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [7.0, -7.0, 0.1, -10.0, 1.5, 0.01]]])
    rec("normal_param_extractor", "input", inp)
    default_loc, default_scale = NormalParamExtractor()(inp)
    rec("normal_param_extractor", "loc", default_loc)
    rec("normal_param_extractor", "scale_default", default_scale)
    for suffix, mapping, lb in NORMAL_PARAM_EXTRACTOR_CASES:
        loc, scale = NormalParamExtractor(scale_mapping=mapping, scale_lb=lb)(inp)
        torch.testing.assert_close(loc, default_loc, rtol=0, atol=0)
        rec("normal_param_extractor", "scale_" + suffix, scale)

    for case, shape, kwargs, loc_shape, values in STATE_INDEPENDENT_CASES:
        module = AddStateIndependentNormalScale(shape, **kwargs)
        if values is not None:
            with torch.no_grad():
                module.state_independent_scale.copy_(torch.tensor(values))
        n = math.prod(loc_shape)
        loc = T([(i * 0.37) % 2.0 - 1.0 for i in range(n)]).reshape(loc_shape)
        out_loc, out_scale = module(loc)
        rec(case, "loc", out_loc)
        rec(case, "parameter", module.state_independent_scale)
        rec(case, "scale", out_scale)


def generate_composite(T, rec):
    """tensordict.nn.CompositeDistribution over a Normal written elsewhere by name_map, a nested
    Categorical, a OneHotCategorical and a bounded TanhNormal, with batch shape [3], scored on a
    sample with batch shape [2, 3]."""
    params = TensorDict(
        {
            "cont": {"loc": T([[0.0, 1.0, -1.0, 0.5], [2.0, -2.0, 0.3, 0.1],
                               [0.0, 0.0, 1.0, 4.0]]),
                     "scale": T([[1.0, 0.5, 2.0, 0.3], [1.5, 0.1, 1.0, 1.0],
                                 [0.7, 3.0, 0.2, 1.0]])},
            ("nested", "disc"): {"logits": T([[0.1, -1.2, 2.0, 0.0, 0.3],
                                               [5.0, 5.0, -3.0, 1.0, 0.0],
                                               [0.0, 0.0, 0.0, 0.0, 0.0]])},
            "onehot": {"logits": T([[1.0, 0.0, -1.0], [0.2, 0.2, 0.1], [-3.0, 2.0, 0.5]])},
            "squashed": {"loc": T([[0.1, -0.5], [2.0, 0.0], [-1.0, 0.7]]),
                         "scale": T([[0.5, 1.0], [0.3, 2.0], [1.0, 0.1]]),
                         # Tensors, not numbers: TorchRL turns number bounds into float32
                         # tensors, which would round the float64 case.
                         "low": T([[-2.0, -1.0]] * 3), "high": T([[3.0, 1.5]] * 3)},
        },
        batch_size=[3],
    )
    dist = CompositeDistribution(
        params,
        distribution_map={"cont": D.Normal, ("nested", "disc"): D.Categorical,
                          "onehot": OneHotCategorical, "squashed": TanhNormal},
        name_map={"cont": ("agent", "action")},
    )

    def rec_td(what, td):
        for key, leaf in flat_items(td):
            rec("composite", what + "/" + key, leaf)

    for key, leaf in flat_items(params):
        rec("composite", "params/" + key, leaf)
    torch.manual_seed(19)
    sample = dist.sample((2,))
    rec_td("sample", sample)

    with set_composite_lp_aggregate(False):
        rec_td("log_prob", dist.log_prob(sample.clone()))
        rec_td("log_prob_composite_sum", dist.log_prob_composite(sample.clone(), include_sum=True))
    with set_composite_lp_aggregate(True):
        rec("composite", "log_prob_aggregate", dist.log_prob(sample.clone()))
        # Aggregating, log_prob_composite writes into (and returns) the sample it is given.
        rec_td("log_prob_composite_aggregate", dist.log_prob_composite(sample.clone()))

    # Entropy: only parts with a closed form (TanhNormal's is a Monte Carlo estimate).
    closed = CompositeDistribution(
        params.exclude("squashed"),
        distribution_map={"cont": D.Normal, ("nested", "disc"): D.Categorical,
                          "onehot": OneHotCategorical},
        name_map={"cont": ("agent", "action")},
    )
    with set_composite_lp_aggregate(False):
        rec_td("entropy", closed.entropy())
        rec_td("entropy_composite_sum", closed.entropy_composite(include_sum=True))
    with set_composite_lp_aggregate(True):
        rec("composite", "entropy_aggregate", closed.entropy())
    with warnings.catch_warnings():
        # Normal and Categorical have no deterministic_sample; tensordict falls back on its
        # register (mean for Normal, mode for Categorical) and warns.
        warnings.simplefilter("ignore")
        rec_td("deterministic_sample", dist.deterministic_sample)
    rec_td("mode", closed.mode)

    # One global generator feeds every part in distribution_map order.
    torch.manual_seed(20)
    for key, leaf in flat_items(dist.sample((2,))):
        rec("samples_composite", key, leaf)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="where to write (default: %(default)s)")
    args = parser.parse_args()
    torch.set_default_dtype(torch.float32)
    for dtype in (torch.float32, torch.float64):
        generate(dtype)
    with open(args.out, "w") as f:
        f.write("# Generated by tests/golden/make_distribution_golden.py with torch %s, "
                "tensordict %s, torchrl %s; do not edit.\n"
                % (torch.__version__, tensordict.__version__, torchrl.__version__))
        f.write("\n".join(records) + "\n")
    print("wrote %d records to %s" % (len(records), args.out))


if __name__ == "__main__":
    main()
