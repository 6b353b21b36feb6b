#!/usr/bin/python3
"""Regenerates tests/golden/distributions_golden.txt, the reference values that
//tests/distributions:distributions_test compares tdp::dist against.

Run it with Debian's python3-torch (PyTorch 1.13, the same release as Debian's libtorch-dev
that tdpolicy links):

    apt-get install -y python3-torch
    /usr/bin/python3 tests/golden/make_distribution_golden.py

Where the numbers come from:
  * Normal, Independent, Categorical, Bernoulli, Beta, Uniform: torch.distributions itself.
  * OneHotCategorical: torch.distributions.Categorical plus tensordict's one-hot rules
    (tensordict.nn.distributions.OneHotCategorical: log_prob scores value.argmax(-1), mode is
    (logits == logits.max(-1, keepdim)).long(), samples are int64 one-hots).
  * TanhNormal (TorchRL), TruncatedNormal / TruncatedStandardNormal and Delta (tensordict)
    are not part of PyTorch 1.13 and neither library is packaged in Debian, so this script
    writes their reference formulas with torch ops below (see tanh_normal_reference,
    TruncatedStandardNormalReference and delta_log_prob), transcribed from TorchRL's and
    tensordict's sources. The TanhNormal formula is also checked against
    torch.distributions.TransformedDistribution away from the bounds.
  * "samples" records: draws after torch.manual_seed(seed); the C++ test draws with an
    at::Generator seeded the same way and expects the same values.

File format (plain text, one tensor per line, '#' starts a comment):
    <name> <dtype> <ndim> <dim_0> ... <dim_{ndim-1}> <value_0> ... <value_{numel-1}>
dtype is float32, float64 or int64; values are in row-major order, floats printed with 17
significant digits (exact for both float widths) and inf / -inf / nan spelled out.
"""

import math
import os

import torch
import torch.distributions as D
import torch.nn.functional as F

# Out-of-support values are part of the cases (they score -inf), so no validation.
D.Distribution.set_default_validate_args(False)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributions_golden.txt")

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
    records.append(" ".join([name, dtype, str(t.dim())] + [str(s) for s in t.shape] + values))


# ---- reference formulas for the distributions PyTorch 1.13 does not ship -----------------

def resolution(dtype):
    return torch.finfo(dtype).resolution


def safe_tanh(x):
    lim = 1.0 - resolution(x.dtype)
    return x.tanh().clamp(-lim, lim)


def safe_atanh(y):
    lim = 1.0 - resolution(y.dtype)
    return y.clamp(-lim, lim).atanh()


def tanh_normal_reference(loc, scale, low, high, upscale=5.0, tanh_loc=False, event_dims=None):
    """TorchRL's TanhNormal with safe_tanh=True: returns (log_prob fn, deterministic_sample,
    transform, base Normal/Independent). low/high are tensors of loc's dtype."""
    if event_dims is None:
        event_dims = min(1, loc.dim())
    non_trivial = bool((high != 1.0).any()) or bool((low != -1.0).any())
    if tanh_loc:
        loc = (loc / upscale).tanh() * upscale
        if non_trivial:
            loc = loc + (high - low) / 2 + low
    aff_loc, aff_scale = (high + low) / 2, (high - low) / 2
    base = D.Normal(loc, scale)
    if event_dims > 0:
        base = D.Independent(base, event_dims)

    def transform(x):
        y = safe_tanh(x)
        return aff_loc + aff_scale * y if non_trivial else y

    def log_prob(value):
        x = (value - aff_loc) / aff_scale if non_trivial else value
        x = safe_atanh(x)
        ladj = 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))
        if non_trivial:
            ladj = ladj + torch.abs(aff_scale).log().expand(value.shape)
        if event_dims:
            ladj = ladj.reshape(ladj.shape[:-event_dims] + (-1,)).sum(-1)
        return base.log_prob(x) - ladj

    return log_prob, transform(loc), transform, base


EPS = 1e-6
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


class TruncatedStandardNormalReference:
    """tensordict.nn.distributions.truncated_normal, formula for formula."""

    def __init__(self, a, b):
        self.a, self.b = torch.broadcast_tensors(a, b)
        lpa, lpb = self._little_phi(self.a), self._little_phi(self.b)
        self.big_phi_a = self._big_phi(self.a)
        self.Z = (self._big_phi(self.b) - self.big_phi_a).clamp(EPS, 1 - EPS)
        self.log_Z = self.Z.log()
        ca, cb = torch.nan_to_num(self.a, nan=math.nan), torch.nan_to_num(self.b, nan=math.nan)
        lpbb_m_lpaa_d_Z = (lpb * cb - lpa * ca) / self.Z
        self.mean = -(lpb - lpa) / self.Z
        self.variance = 1 - lpbb_m_lpaa_d_Z - ((lpb - lpa) / self.Z) ** 2
        self.entropy = 0.5 * math.log(2 * math.pi * math.e) + self.log_Z - 0.5 * lpbb_m_lpaa_d_Z

    @staticmethod
    def _little_phi(x):
        return (-(x ** 2) * 0.5).exp() * INV_SQRT_2PI

    @staticmethod
    def _big_phi(x):
        return (0.5 * (1 + (x * (1 / math.sqrt(2))).erf())).clamp(EPS, 1 - EPS)

    def cdf(self, v):
        return ((self._big_phi(v) - self.big_phi_a) / self.Z).clamp(0, 1)

    def icdf(self, p):
        y = (self.big_phi_a + p * self.Z).clamp(EPS, 1 - EPS)
        return math.sqrt(2) * (2 * y - 1).erfinv()

    def log_prob(self, v):
        return math.log(INV_SQRT_2PI) - self.log_Z - (v ** 2) * 0.5


class TruncatedNormalReference(TruncatedStandardNormalReference):
    def __init__(self, loc, scale, a, b):
        scale = scale.clamp_min(EPS)
        self.loc, self.scale, a, b = torch.broadcast_tensors(loc, scale, a, b)
        self.low, self.high = a, b
        super().__init__((a - self.loc) / self.scale, (b - self.loc) / self.scale)
        self.log_scale = self.scale.log()
        self.mean = self.mean * self.scale + self.loc
        self.variance = self.variance * self.scale ** 2
        self.entropy = self.entropy + self.log_scale

    def cdf(self, v):
        return super().cdf((v - self.loc) / self.scale)

    def icdf(self, p):
        s = super().icdf(p) * self.scale + self.loc
        return torch.maximum(torch.minimum(s, self.high), self.low)

    def log_prob(self, v):
        return super().log_prob((v - self.loc) / self.scale) - self.log_scale


def delta_log_prob(param, value, atol=1e-6, rtol=1e-6, event_dims=1):
    """tensordict's Delta.log_prob."""
    p = param.expand_as(value)
    eq = abs(value - p) < atol + rtol * abs(p)
    for i in range(event_dims):
        eq = eq.all(-1)
    out = torch.zeros_like(eq, dtype=value.dtype)
    out.masked_fill_(eq, math.inf)
    out.masked_fill_(~eq, -math.inf)
    return out


# ---- cases ---------------------------------------------------------------------------------

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

    # OneHotCategorical with tensordict's rules
    ocd = D.Categorical(logits=logits)
    onehot = F.one_hot(cvalue, 4).to(torch.int64)
    rec("one_hot_categorical", "logits", logits)
    rec("one_hot_categorical", "value", onehot)
    rec("one_hot_categorical", "log_prob", ocd.log_prob(onehot.argmax(-1)))
    rec("one_hot_categorical", "entropy", ocd.entropy())
    rec("one_hot_categorical", "mode",
        (ocd.logits == ocd.logits.max(-1, True)[0]).to(torch.long))
    rec("one_hot_categorical", "mean", ocd.probs)
    rec("one_hot_categorical", "variance", ocd.probs * (1 - ocd.probs))

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

    # Delta (tensordict formula): equal, within tolerance, and far values
    param = T([[0.5, -1.0, 2.0], [1e3, 0.0, -3.0]])
    dvalue = torch.stack([param, param + 1e-7 * (1 + param.abs()) * 0.5, param + 1e-2])
    rec("delta", "param", param)
    rec("delta", "value", dvalue)
    rec("delta", "log_prob", delta_log_prob(param, dvalue))

    # TruncatedNormal and TruncatedStandardNormal (tensordict formulas)
    tloc = T([0.0, 1.0, -2.0, 0.5, 3.0])
    tscale = T([1.0, 0.5, 2.0, 0.1, 1.0])
    ta = T([-1.0, 0.0, -3.0, -1.0, -1.0])
    tb = T([1.0, 2.0, 5.0, 0.6, 1.0])
    tv = T([0.5, 1.9, 0.0, 0.55, 0.9])
    tq = T([0.5, 0.1, 0.9, 0.999, 0.5])
    tn = TruncatedNormalReference(tloc, tscale, ta, tb)
    for k, v in [("loc", tloc), ("scale", tscale), ("a", ta), ("b", tb), ("value", tv),
                 ("q", tq), ("log_prob", tn.log_prob(tv)), ("entropy", tn.entropy),
                 ("mean", tn.mean), ("variance", tn.variance), ("cdf", tn.cdf(tv)),
                 ("icdf", tn.icdf(tq))]:
        rec("truncated_normal", k, v)
    ts = TruncatedStandardNormalReference(ta, tb)
    for k, v in [("log_prob", ts.log_prob(tv.clamp(-1, 1))), ("entropy", ts.entropy),
                 ("mean", ts.mean), ("variance", ts.variance), ("cdf", ts.cdf(tv)),
                 ("icdf", ts.icdf(tq))]:
        rec("truncated_standard_normal", k, v)

    # TanhNormal (TorchRL formula): default bounds, rescaled bounds with tanh_loc, and
    # actions at the bounds (where the safe atanh keeps log_prob finite).
    nloc = T([[0.0, 0.5, -1.0], [2.0, -0.3, 10.0]])
    nscale = T([[1.0, 0.3, 0.5], [0.2, 1.5, 1.0]])
    nv = T([[0.1, 0.4, -0.7], [0.95, -0.2, 1.0]])
    lp, det, _, _ = tanh_normal_reference(nloc, nscale, T(-1.0), T(1.0))
    for k, v in [("loc", nloc), ("scale", nscale), ("value", nv), ("log_prob", lp(nv)),
                 ("deterministic_sample", det)]:
        rec("tanh_normal", k, v)
    nlow, nhigh = T([-2.0, 0.0, -1.0]), T([2.0, 1.0, 3.0])
    nv2 = T([[1.5, 0.2, 2.9], [-2.0, 0.99, 0.0]])
    lp2, det2, _, _ = tanh_normal_reference(nloc, nscale, nlow, nhigh, upscale=3.0,
                                            tanh_loc=True)
    for k, v in [("low", nlow), ("high", nhigh), ("value", nv2), ("log_prob", lp2(nv2)),
                 ("deterministic_sample", det2)]:
        rec("tanh_normal_bounded", k, v)
    # Cross-check the formula against PyTorch's own transformed distribution.
    ref = D.TransformedDistribution(
        D.Independent(D.Normal(nloc, nscale), 1),
        [D.TanhTransform(), D.AffineTransform((nhigh + nlow) / 2, (nhigh - nlow) / 2)])
    inner = T([[1.0, 0.3, 2.0], [-1.0, 0.7, 0.5]])
    lp3, _, _, _ = tanh_normal_reference(nloc, nscale, nlow, nhigh)
    torch.testing.assert_close(lp3(inner), ref.log_prob(inner), rtol=1e-5, atol=1e-5)

    # Seeded samples: same seed, same ops, same values in C++.
    torch.manual_seed(7)
    rec("samples_normal_sample", "value", d.sample((2,)))
    torch.manual_seed(8)
    rec("samples_normal_rsample", "value", d.rsample((2,)))
    torch.manual_seed(9)
    rec("samples_categorical", "value", D.Categorical(logits=logits).sample((3,)))
    torch.manual_seed(10)
    rec("samples_one_hot_categorical", "value",
        F.one_hot(D.Categorical(logits=logits).sample((3,)), 4).to(torch.long))
    torch.manual_seed(11)
    rec("samples_bernoulli", "value", D.Bernoulli(probs=bprobs).sample((3,)))
    torch.manual_seed(12)
    rec("samples_beta", "value", be.rsample((3,)))
    torch.manual_seed(13)
    rec("samples_uniform", "value", ud.rsample((3,)))
    torch.manual_seed(14)
    p = torch.empty((3, 5)).uniform_(EPS, 1 - EPS)  # tensordict draws in the default dtype
    rec("samples_truncated_normal", "value", tn.icdf(p))
    torch.manual_seed(15)
    _, _, transform, base = tanh_normal_reference(nloc, nscale, nlow, nhigh, upscale=3.0,
                                                  tanh_loc=True)
    rec("samples_tanh_normal", "value", transform(base.sample((2,))))


def main():
    for dtype in (torch.float32, torch.float64):
        generate(dtype)
    with open(OUT, "w") as f:
        f.write("# Generated by tests/golden/make_distribution_golden.py with torch %s; "
                "do not edit.\n" % torch.__version__)
        f.write("\n".join(records) + "\n")
    print("wrote %d records to %s" % (len(records), OUT))


if __name__ == "__main__":
    main()
