#!/usr/bin/env python3
"""Writes tests/probabilistic/autoregressive_golden.txt: what tensordict 0.13 computes for an
autoregressive ProbabilisticTensorDictSequential (two probabilistic modules, a network between
them reading the first sample), which //tests/probabilistic:autoregressive_test compares the C++
against.

    ~/.cache/tdpolicy/venv/bin/python3 tests/probabilistic/make_autoregressive_golden.py [--out PATH]

The sequence (the C++ test builds the same one with the same weights, read from this file):

    observation [5, 4]
      -> Linear(4, 2)                                  -> ("type", "logits")
      -> ProbabilisticTensorDictModule(Categorical)    -> "action_type"          (+ log-prob)
      -> cat(observation, one_hot(action_type, 2))     -> "param_input" [5, 6]
      -> Linear(6, 2) -> NormalParamExtractor          -> ("param", "loc"), ("param", "scale")
      -> ProbabilisticTensorDictModule(Normal)         -> "action_param" [5, 1]  (+ log-prob)

Every value comes from tensordict.nn itself (ProbabilisticTensorDictSequential.forward,
get_dist, log_prob, CompositeDistribution.entropy), built once under
set_composite_lp_aggregate(True) and once under False (the log-prob keys are fixed when a
module is built). The records:

  weights/*                        the two Linear layers (seeded draws)
  input/*                          observation, and given actions (action_type, action_param)
  <mode>/forward_deterministic/*   forward() under DETERMINISTIC: every leaf it writes
  <mode>/log_prob/*                seq.log_prob(td with the given actions): a tensor under
                                   aggregation, else a TensorDict ("<key>_log_prob" per part).
                                   tensordict's get_dist re-draws the first module's value
                                   (here under its default interaction type, deterministic:
                                   the argmax) and conditions the Normal on that draw, not on
                                   the given action_type.
  <mode>/entropy/*                 seq.get_dist(td).entropy(): H(type) + H(param | drawn type)
  <mode>/given/log_prob/*          the composite of the per-module get_dist with the given
                                   action_type left in place (the teacher-forced joint
                                   log-prob a PPO update needs), scored by
                                   CompositeDistribution.log_prob; and .../given/entropy/*.
  <mode>/random/*                  forward() under RANDOM after torch.manual_seed(7).

<mode> is "aggregate" or "per_part". File format: see tests/golden/make_distribution_golden.py.
"""

import argparse
import math
import os

import tensordict
import torch
import torch.distributions as D
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import (
    CompositeDistribution,
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    set_composite_lp_aggregate,
    set_interaction_type,
)

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autoregressive_golden.txt")

records = []


def put(name, tensor):
    t = tensor.detach().cpu()
    dtype = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64"}[t.dtype]
    flat = t.reshape(-1).tolist()
    values = [str(int(v)) for v in flat] if dtype == "int64" else ["%.17g" % v for v in flat]
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in flat), name
    records.append(" ".join([name, dtype, str(t.dim())] + [str(s) for s in t.shape] + values))


def put_td(prefix, td):
    flat = td.flatten_keys(".")
    for key in sorted(flat.keys()):
        put("%s/%s" % (prefix, key), flat.get(key))


def build(w1, b1, w2, b2):
    type_head = torch.nn.Linear(4, 2)
    param_head = torch.nn.Linear(6, 2)
    with torch.no_grad():
        type_head.weight.copy_(w1)
        type_head.bias.copy_(b1)
        param_head.weight.copy_(w2)
        param_head.bias.copy_(b2)

    def condition(observation, action_type):
        return torch.cat([observation, F.one_hot(action_type, 2).to(observation.dtype)], -1)

    return ProbabilisticTensorDictSequential(
        TensorDictModule(type_head, in_keys=["observation"], out_keys=[("type", "logits")]),
        ProbabilisticTensorDictModule(
            in_keys=[("type", "logits")],
            out_keys=["action_type"],
            distribution_class=D.Categorical,
            return_log_prob=True,
            default_interaction_type=InteractionType.DETERMINISTIC,
        ),
        TensorDictModule(condition, in_keys=["observation", "action_type"], out_keys=["param_input"]),
        TensorDictModule(param_head, in_keys=["param_input"], out_keys=["param_head_out"]),
        TensorDictModule(
            NormalParamExtractor(), in_keys=["param_head_out"], out_keys=[("param", "loc"), ("param", "scale")]
        ),
        ProbabilisticTensorDictModule(
            in_keys=[("param", "loc"), ("param", "scale")],
            out_keys=["action_param"],
            distribution_class=D.Normal,
            return_log_prob=True,
            default_interaction_type=InteractionType.DETERMINISTIC,
        ),
    )


def given_dist(seq, td):
    """The composite of each probabilistic module's get_dist, run through the sequence with the
    samples already in `td` left in place (no re-draw)."""
    td = td.copy()
    dists = {}
    for module in seq.module:
        if isinstance(module, ProbabilisticTensorDictModule):
            dists[module.dist_sample_keys[0]] = module.get_dist(td)
        else:
            td = module(td)
    return CompositeDistribution.from_distributions(td, dists)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()

    torch.manual_seed(0)
    w1, b1 = torch.randn(2, 4) * 0.8, torch.randn(2) * 0.5
    w2, b2 = torch.randn(2, 6) * 0.8, torch.randn(2) * 0.5
    observation = torch.randn(5, 4)
    # Given actions: row 0 and 3 disagree with the argmax type (checked below), so the
    # re-draw in get_dist matters there.
    action_type = torch.tensor([0, 1, 1, 0, 1])
    action_param = torch.tensor([[0.3], [-0.5], [1.2], [0.0], [-2.0]])
    for name, t in [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)]:
        put("weights/" + name, t)
    put("input/observation", observation)
    put("input/action_type", action_type)
    put("input/action_param", action_param)

    for mode, aggregate in [("aggregate", True), ("per_part", False)]:
        with set_composite_lp_aggregate(aggregate):
            seq = build(w1, b1, w2, b2)
            with set_interaction_type(InteractionType.DETERMINISTIC):
                out = seq(TensorDict({"observation": observation}, [5]))
            put_td(mode + "/forward_deterministic", out)
            if mode == "aggregate":
                argmax = out.get("action_type")
                assert (argmax != action_type).any(), "the given types must differ from the argmax somewhere"

            given = TensorDict({"observation": observation, "action_type": action_type,
                                "action_param": action_param}, [5])
            lp = seq.log_prob(given.copy())
            if isinstance(lp, torch.Tensor):
                put(mode + "/log_prob/sample_log_prob", lp)
            else:
                put_td(mode + "/log_prob", lp)
            ent = seq.get_dist(given.copy()).entropy()
            if isinstance(ent, torch.Tensor):
                put(mode + "/entropy/entropy", ent)
            else:
                put_td(mode + "/entropy", ent)

            gd = given_dist(seq, given)
            glp = gd.log_prob(given.copy())
            if isinstance(glp, torch.Tensor):
                put(mode + "/given/log_prob/sample_log_prob", glp)
            else:
                put_td(mode + "/given/log_prob", glp)
            gent = gd.entropy()
            if isinstance(gent, torch.Tensor):
                put(mode + "/given/entropy/entropy", gent)
            else:
                put_td(mode + "/given/entropy", gent)

            torch.manual_seed(7)
            with set_interaction_type(InteractionType.RANDOM):
                rnd = seq(TensorDict({"observation": observation}, [5]))
            put_td(mode + "/random", rnd)

    header = "# torch %s tensordict %s (tests/probabilistic/make_autoregressive_golden.py)" % (
        torch.__version__, tensordict.__version__)
    with open(args.out, "w") as f:
        f.write(header + "\n")
        for line in records:
            f.write(line + "\n")
    print("wrote %d records to %s" % (len(records), args.out))


if __name__ == "__main__":
    main()
