#!/usr/bin/env python3
"""Writes policies/pytorch/: six actors built from real tensordict.nn / torchrl.modules classes,
exported with the tdpolicy package (sdk/python: tdpolicy.export), and what Python computes with
them, which //tests/policy:pytorch_interop_test compares with the C++ side.

  gaussian_actor       ProbabilisticActor(TorchRL MLP 3 -> (32, 32) -> 2, NormalParamExtractor, Normal)
  tanh_gaussian_actor  ProbabilisticActor(MLP with LayerNorm/ReLU, AddStateIndependentNormalScale,
                                          TanhNormal(low=-2, high=2))
  categorical_actor    ProbabilisticTensorDictSequential(MLP -> logits, Categorical)
  composite_actor      two MLP heads -> params/{type/logits, param/{loc, scale}} ->
                       CompositeDistribution(Categorical, Normal) -> action/{type, param}
  gru_actor            nn.GRUCell carrying `hidden` -> MLP -> Categorical
  torchscript_actor    torch.jit.script(LocScale) -> Normal (its network saved as torchscript_actor.pt)

For each NAME, under the output folder (default: this file's folder):
  NAME.pbtxt            tdpolicy.export's spec: weights embedded, a self test of the given actions;
  NAME.reference.pbtxt  a tdpolicy.Parameters message used as a list of named tensors:
                          inputs/<key>, actions/<key>, and for MODE in lp_aggregate_false and
                          lp_aggregate_true (the actor built and run under
                          tensordict.nn.set_composite_lp_aggregate(False/True)):
                          MODE/outputs/<key>   the deterministic output TensorDict's leaves
                          MODE/log_prob/<key>  actor.log_prob() of the given actions
  NAME.pt               (torchscript_actor only) the scripted network.

The tdpolicy package is used installed (pip install ./sdk/python) or, from a checkout, straight
from sdk/python with its protobuf classes generated into a scratch folder by protoc. From the
repository root, with the project's venv:

  ~/.cache/tdpolicy/venv/bin/python3 policies/pytorch/regenerate.py            # rewrites policies/pytorch/
  ~/.cache/tdpolicy/venv/bin/python3 policies/pytorch/regenerate.py --out DIR  # elsewhere (the tests)
"""

import argparse
import collections
import glob
import os
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def import_tdpolicy():
    """The installed package, else sdk/python with its classes generated into a scratch folder."""
    try:
        import tdpolicy  # noqa: F401
        from tdpolicy import spec_pb2  # noqa: F401
        return tdpolicy
    except ImportError:
        for name in [n for n in sys.modules if n == "tdpolicy" or n.startswith("tdpolicy.")]:
            del sys.modules[name]
    generated = tempfile.mkdtemp(prefix="tdpolicy_pb2_")
    protos = sorted(glob.glob(os.path.join(ROOT, "proto", "tdpolicy", "*.proto")))
    subprocess.check_call([os.environ.get("PROTOC", "protoc"), "--proto_path=" + os.path.join(ROOT, "proto"),
                           "--python_out=" + generated] + protos)
    sys.path[:0] = [os.path.join(ROOT, "sdk", "python"), generated]  # one package: see tdpolicy/__init__.py
    import tdpolicy
    return tdpolicy


try:
    import torch
    from torch import distributions as D
    from torch import nn

    import tensordict
    from tensordict import TensorDict, TensorDictBase
    from tensordict.nn import (
        AddStateIndependentNormalScale,
        CompositeDistribution,
        InteractionType,
        NormalParamExtractor,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
        TensorDictSequential,
        set_composite_lp_aggregate,
        set_interaction_type,
    )

    import torchrl
    from torchrl.modules import MLP, ProbabilisticActor, TanhNormal
except ImportError as error:  # a clear message, not a bare traceback, from a wrong interpreter
    sys.exit("regenerate.py needs torch, tensordict and torchrl (run it with the project's venv, "
             "~/.cache/tdpolicy/venv/bin/python3): %s" % error)

tdpolicy = import_tdpolicy()
from tdpolicy import spec_pb2  # noqa: E402
from tdpolicy._tensors import key_text, to_tensor_proto  # noqa: E402
from google.protobuf import text_format  # noqa: E402

MODES = (("lp_aggregate_false", False), ("lp_aggregate_true", True))


# ---- the actors ------------------------------------------------------------------------------

def mlp(in_features, cells, out_features, activation=nn.Tanh, layer_norm=False):
    kwargs = {}
    if layer_norm:
        kwargs = {"norm_class": nn.LayerNorm, "norm_kwargs": [{"normalized_shape": c} for c in cells]}
    net = MLP(in_features=in_features, out_features=out_features, num_cells=cells,
              activation_class=activation, **kwargs)
    with torch.no_grad():  # LayerNorm starts at (1, 0): move it so that loading it is checked
        for layer in net:
            if isinstance(layer, nn.LayerNorm):
                layer.weight.add_(torch.randn_like(layer.weight) * 0.1)
                layer.bias.add_(torch.randn_like(layer.bias) * 0.1)
    return net


def gaussian_actor():
    backbone = TensorDictSequential(
        TensorDictModule(mlp(3, [32, 32], 2), in_keys=["observation"], out_keys=["params"]),
        TensorDictModule(NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]))
    actor = ProbabilisticActor(backbone, in_keys=["loc", "scale"], out_keys=["action"],
                               distribution_class=D.Normal, return_log_prob=True)
    inputs = {"observation": torch.randn(8, 3) * 1.5}
    actions = {"action": torch.randn(8, 1) * 1.5}
    return actor, inputs, actions, "MLP(32, 32) -> NormalParamExtractor -> Normal (ProbabilisticActor)"


def tanh_gaussian_actor():
    backbone = TensorDictSequential(
        TensorDictModule(mlp(3, [32, 32], 2, nn.ReLU, layer_norm=True), in_keys=["observation"], out_keys=["loc"]),
        TensorDictModule(AddStateIndependentNormalScale(2, scale_lb=1e-3, init_value=-0.5),
                         in_keys=["loc"], out_keys=["loc", "scale"]))
    with torch.no_grad():
        backbone.module[1].module.state_independent_scale.copy_(torch.tensor([-0.5, 0.25]))
    actor = ProbabilisticActor(backbone, in_keys=["loc", "scale"], out_keys=["action"],
                               distribution_class=TanhNormal,
                               distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True)
    inputs = {"observation": torch.randn(8, 3) * 1.5}
    actions = {"action": torch.rand(8, 2) * 3.8 - 1.9}
    return actor, inputs, actions, ("MLP(32, 32; LayerNorm, ReLU) -> AddStateIndependentNormalScale -> "
                                    "TanhNormal(-2, 2) (ProbabilisticActor)")


def categorical_actor():
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(mlp(4, [32, 32], 3), in_keys=["observation"], out_keys=["logits"]),
        ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=D.Categorical,
                                      return_log_prob=True))
    inputs = {"observation": torch.randn(8, 4) * 1.5}
    actions = {"action": torch.randint(0, 3, (8,))}
    return actor, inputs, actions, "MLP(32, 32) -> logits [3] -> Categorical"


def composite_actor():
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(mlp(4, [32], 3), in_keys=["observation"], out_keys=[("params", "type", "logits")]),
        TensorDictModule(mlp(4, [32], 2), in_keys=["observation"], out_keys=["param_head_out"]),
        TensorDictModule(NormalParamExtractor(scale_mapping="biased_softplus_0.5", scale_lb=1e-3),
                         in_keys=["param_head_out"],
                         out_keys=[("params", "param", "loc"), ("params", "param", "scale")]),
        ProbabilisticTensorDictModule(
            in_keys=["params"], out_keys=[("action", "type"), ("action", "param")],
            distribution_class=CompositeDistribution,
            distribution_kwargs={
                "distribution_map": {"type": D.Categorical, "param": D.Normal},
                "name_map": {"type": ("action", "type"), "param": ("action", "param")},
            },
            return_log_prob=True))
    inputs = {"observation": torch.randn(8, 4) * 1.5}
    actions = {("action", "type"): torch.randint(0, 3, (8,)), ("action", "param"): torch.randn(8, 1)}
    return actor, inputs, actions, ("two MLP heads -> params/{type/logits, param/{loc, scale}} -> "
                                    "CompositeDistribution(Categorical, Normal) -> action/{type, param}")


def gru_actor():
    actor = ProbabilisticTensorDictSequential(collections.OrderedDict(
        gru=TensorDictModule(nn.GRUCell(4, 16), in_keys=["observation", "hidden"], out_keys=["hidden"]),
        head=TensorDictModule(mlp(16, [32], 2), in_keys=["hidden"], out_keys=["logits"]),
        actor=ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"],
                                            distribution_class=D.Categorical, return_log_prob=True)))
    inputs = {"observation": torch.randn(8, 4) * 1.5, "hidden": torch.randn(8, 16) * 0.5}
    actions = {"action": torch.randint(0, 2, (8,))}
    return actor, inputs, actions, "(observation [4], hidden [16]) -> GRUCell -> hidden -> MLP(32) -> Categorical"


class LocScale(nn.Module):
    """A small network for TorchScript: observation -> (loc, scale)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, observation: torch.Tensor):
        loc, scale = self.head(torch.tanh(self.body(observation))).chunk(2, -1)
        return loc, torch.nn.functional.softplus(scale) + 1e-3


def torchscript_actor():
    scripted = torch.jit.script(LocScale())
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(scripted, in_keys=["observation"], out_keys=["loc", "scale"]),
        ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=D.Normal,
                                      return_log_prob=True))
    inputs = {"observation": torch.randn(8, 3) * 1.5}
    actions = {"action": torch.randn(8, 2)}
    return actor, inputs, actions, "torch.jit.script(Linear -> tanh -> Linear -> (loc, softplus + 1e-3)) -> Normal"


ACTORS = collections.OrderedDict(
    gaussian_actor=gaussian_actor,
    tanh_gaussian_actor=tanh_gaussian_actor,
    categorical_actor=categorical_actor,
    composite_actor=composite_actor,
    gru_actor=gru_actor,
    torchscript_actor=torchscript_actor,
)


ACTORS = collections.OrderedDict(
    gaussian_actor=gaussian_actor,
    tanh_gaussian_actor=tanh_gaussian_actor,
    categorical_actor=categorical_actor,
    composite_actor=composite_actor,
    gru_actor=gru_actor,
    torchscript_actor=torchscript_actor,
)


def build(builder, seed, aggregate):
    """The actor, built under composite_lp_aggregate(aggregate) (which fixes its log-prob keys)."""
    torch.manual_seed(seed)
    with set_composite_lp_aggregate(aggregate):
        actor, inputs, actions, description = builder()
    actor.eval()
    batch = next(iter(inputs.values())).shape[:1]
    return actor, TensorDict(inputs, batch_size=batch), TensorDict(actions, batch_size=batch), description


def leaves(td):
    return [(key_text(k), v) for k, v in td.items(include_nested=True, leaves_only=True)]


def compute(actor, inputs, actions, aggregate):
    """Python's results: the whole deterministic output TensorDict, and the log-probs of the actions."""
    with torch.no_grad(), set_composite_lp_aggregate(aggregate), \
            set_interaction_type(InteractionType.DETERMINISTIC):
        outputs = actor(inputs.clone())
        log_prob = actor.log_prob(inputs.clone().update(actions.clone()))
        if isinstance(log_prob, TensorDictBase):
            log_probs = leaves(log_prob)
        else:
            (key,) = actor.log_prob_keys  # a tensor: the log-prob at the actor's one log-prob key
            log_probs = [(key_text(key), log_prob)]
    return leaves(outputs), log_probs


def write_actor(name, builder, out_dir, seed):
    runs = {}
    for mode, aggregate in MODES:
        runs[mode] = build(builder, seed, aggregate)
    # Both builds must hold the same weights: only the log-prob keys depend on the mode.
    weights = [dict(runs[mode][0].named_parameters()) for mode, _ in MODES]
    if list(weights[0]) != list(weights[1]) or not all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0]):
        raise RuntimeError("%s: the actor's weights differ between composite_lp_aggregate modes" % name)

    actor, inputs, actions, description = runs["lp_aggregate_false"]
    os.makedirs(out_dir, exist_ok=True)
    # The export: tensordict's default mode; the example's actions are the self test's.
    tdpolicy.export(actor, os.path.join(out_dir, name + ".pbtxt"), example=inputs.clone().update(actions),
                    name="pytorch_" + name, description=description)

    reference = spec_pb2.Parameters()

    def add(entry_name, value):
        named = reference.tensors.add()
        named.name = entry_name
        to_tensor_proto(value, entry_name, named.tensor)

    for key, value in leaves(inputs):
        add("inputs/" + key, value)
    for key, value in leaves(actions):
        add("actions/" + key, value)
    for mode, aggregate in MODES:
        outputs, log_probs = compute(*runs[mode][:3], aggregate)
        for key, value in outputs:
            add("%s/outputs/%s" % (mode, key), value)
        for key, value in log_probs:
            add("%s/log_prob/%s" % (mode, key), value)
    versions = "torch %s, tensordict %s, torchrl %s" % (torch.__version__, tensordict.__version__,
                                                        torchrl.__version__)
    with open(os.path.join(out_dir, name + ".reference.pbtxt"), "w") as f:
        f.write("# proto-file: proto/tdpolicy/spec.proto\n# proto-message: tdpolicy.Parameters\n"
                "# Written by policies/pytorch/regenerate.py: what %s computes with %s.pbtxt.\n"
                % (versions, name))
        f.write(text_format.MessageToString(reference))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", action="append", choices=list(ACTORS), help="export only these actors")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name, builder in ACTORS.items():
        if args.only and name not in args.only:
            continue
        write_actor(name, builder, args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
