#!/usr/bin/python3
"""Writes tdpolicy specs for policies built in PyTorch, and what PyTorch computes with them.

A policy trained in Python reaches the C++ SDK as a spec (the module tree, in text form) plus
its weights embedded as tensors. This script builds two small actors from torch.nn layers and
torch.distributions, the way a tensordict/TorchRL trainer would:

  gaussian_actor:    observation [3] -> Linear/Tanh MLP (32, 32) -> [2]
                     -> NormalParamExtractor (loc, biased_softplus_1.0(scale) >= 1e-4)
                     -> Normal(loc, scale), action [1]
  categorical_actor: observation [4] -> Linear/Tanh MLP (32, 32) -> logits [3]
                     -> Categorical, action [] int64

For each NAME it writes, under the output folder (default: policies/pytorch next to this file):
  NAME.pbtxt            the tdpolicy.PolicySpec, weights embedded, with a self test (the
                        deterministic action and log-probs that PyTorch computed) so that
                        load_policy(..., {.run_self_tests = true}) proves the C++ side agrees;
  NAME.reference.pbtxt  a tdpolicy.Parameters message used as a list of named tensors:
                        inputs/observation, given/action, and PyTorch's results:
                        mode/action, log_prob/action (of the given actions), entropy, plus
                        the distribution parameters (params/loc, params/scale or params/logits).

Parameter names are what the C++ loader's named_parameters() gives for the spec's module tree
(a TensorDictSequential keeps its children in a `module` ModuleDict, a TensorDictModule its
network in `module`, an Mlp its layers in `layers`), so the Python modules below are nested the
same way and their named_parameters() are written as they are. A tensordict model of the same
shape (TensorDictSequential(OrderedDict(backbone=TensorDictModule(mlp, ...), ...))) gives the
same names.

Only torch is needed (Debian: apt-get install python3-torch); the text format is written
directly, so no protobuf runtime is involved. Run from the repository root:

  /usr/bin/python3 policies/export_from_pytorch.py            # rewrites policies/pytorch/
  /usr/bin/python3 policies/export_from_pytorch.py --out DIR  # elsewhere (the interop test)
"""

import argparse
import math
import os
import struct
import sys

import torch
from torch import nn
from torch import distributions as D

DTYPES = {torch.float32: "FLOAT32", torch.float64: "FLOAT64", torch.int64: "INT64"}


# ---- the same functions tensordict uses (tensordict/nn/utils.py, distributions/continuous.py) --

def inv_softplus(bias):
    # tensordict computes it on a default-dtype (float32) tensor and returns the float.
    return torch.tensor(bias).expm1().clamp_min(1e-6).log().item()


class BiasedSoftplus(nn.Module):
    def __init__(self, bias, min_val=0.01):
        super().__init__()
        self.bias = inv_softplus(bias - min_val)
        self.min_val = min_val

    def forward(self, x):
        return nn.functional.softplus(x + self.bias) + self.min_val


class NormalParamExtractor(nn.Module):
    """scale_mapping "biased_softplus_1.0", scale_lb 1e-4: tensordict's defaults."""

    def __init__(self, scale_lb=1e-4):
        super().__init__()
        self.mapping = BiasedSoftplus(1.0)
        self.scale_lb = scale_lb

    def forward(self, x):
        loc, scale = x.chunk(2, -1)
        return loc, self.mapping(scale).clamp_min(self.scale_lb)


# ---- modules nested as the C++ module tree names its parameters ------------------------------

class Mlp(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers, width = [], in_features
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), nn.Tanh()]
            width = size
        layers.append(nn.Linear(width, out_features))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


class TensorDictModuleLike(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module


class SequentialLike(nn.Module):
    def __init__(self, **children):
        super().__init__()
        self.module = nn.ModuleDict(children)


# ---- text format ------------------------------------------------------------------------------

def text_bytes(data):
    return '"' + "".join("\\%03o" % b for b in data) + '"'


def tensor_text(t, indent):
    t = t.detach().contiguous()
    fmt = {torch.float32: "<%df", torch.float64: "<%dd", torch.int64: "<%dq"}[t.dtype]
    values = t.reshape(-1).tolist()
    data = struct.pack(fmt % len(values), *values)
    pad = " " * indent
    shape = "".join("%sshape: %d\n" % (pad, s) for s in t.shape)
    return "%sdtype: %s\n%s%sdata: %s\n" % (pad, DTYPES[t.dtype], shape, pad, text_bytes(data))


def named_tensor_text(field, name, t, indent):
    pad = " " * indent
    return '%s%s {\n%s  name: "%s"\n%s  tensor {\n%s%s  }\n%s}\n' % (
        pad, field, pad, name, pad, tensor_text(t, indent + 4), pad, pad)


def mlp_text(in_features, hidden, out_features):
    sizes = ", ".join(str(h) for h in hidden)
    return ('mlp { in_features: %d hidden_sizes: [%s] out_features: %d activation: "tanh" }'
            % (in_features, sizes, out_features))


# ---- the two actors ----------------------------------------------------------------------------

def gaussian_actor(seed):
    torch.manual_seed(seed)
    obs_dim, act_dim, hidden = 3, 1, [32, 32]
    root = SequentialLike(backbone=TensorDictModuleLike(Mlp(obs_dim, hidden, 2 * act_dim)))
    extractor = NormalParamExtractor()

    def dist_of(obs):
        loc, scale = extractor(root.module["backbone"].module(obs))
        return D.Normal(loc, scale), {"loc": loc, "scale": scale}

    observation = torch.randn(8, obs_dim) * 1.5
    given = torch.randn(8, act_dim) * 1.5
    modules = """\
module {
  sequential {
    modules {
      name: "backbone"
      network { in_keys: "observation" out_keys: "params" network { %s } }
    }
    modules {
      name: "extractor"
      network {
        in_keys: "params"
        out_keys: ["loc", "scale"]
        network { normal_param_extractor { scale_mapping: "biased_softplus_1.0" scale_lb: 1e-4 } }
      }
    }
    modules {
      name: "actor"
      probabilistic {
        in_keys: ["loc", "scale"]
        out_keys: "action"
        distribution: "normal"
        default_interaction_type: "deterministic"
        return_log_prob: true
      }
    }
  }
}
""" % mlp_text(obs_dim, hidden, 2 * act_dim)
    header = ('name: "pytorch_gaussian_actor"\nversion: "1"\n'
              'description: "exported from PyTorch: MLP(32, 32) -> NormalParamExtractor -> Normal"\n'
              'inputs { key: "observation" shape: %d }\n' % obs_dim)
    # Deterministic: a Normal's deterministic sample is its mean, loc.
    return root, dist_of, observation, given, header, modules, (lambda d: d.mean)


def categorical_actor(seed):
    torch.manual_seed(seed)
    obs_dim, n_actions, hidden = 4, 3, [32, 32]
    root = SequentialLike(backbone=TensorDictModuleLike(Mlp(obs_dim, hidden, n_actions)))

    def dist_of(obs):
        logits = root.module["backbone"].module(obs)
        return D.Categorical(logits=logits), {"logits": logits}

    observation = torch.randn(8, obs_dim) * 1.5
    given = torch.randint(0, n_actions, (8,))
    modules = """\
module {
  sequential {
    modules {
      name: "backbone"
      network { in_keys: "observation" out_keys: "logits" network { %s } }
    }
    modules {
      name: "actor"
      probabilistic {
        in_keys: "logits"
        out_keys: "action"
        distribution: "categorical"
        default_interaction_type: "deterministic"
        return_log_prob: true
      }
    }
  }
}
""" % mlp_text(obs_dim, hidden, n_actions)
    header = ('name: "pytorch_categorical_actor"\nversion: "1"\n'
              'description: "exported from PyTorch: MLP(32, 32) -> logits [3] -> Categorical"\n'
              'inputs { key: "observation" shape: %d }\n' % obs_dim)
    # Deterministic: a Categorical's deterministic sample is its mode, the argmax.
    return root, dist_of, observation, given, header, modules, (lambda d: d.mode)


def write_actor(name, build, out_dir, seed):
    root, dist_of, observation, given, header, modules, deterministic = build(seed)
    with torch.no_grad():
        dist, params = dist_of(observation)
        action = deterministic(dist)
        mode = dist.mode
        results = {
            "mode/action": mode,
            "log_prob/action": dist.log_prob(given),
            "entropy": dist.entropy(),
        }
        self_test = {
            "expected": {"action": action, "action_log_prob": dist.log_prob(action)},
            "log_probs": {"action_log_prob": dist.log_prob(given)},
        }

    spec = ["# Generated by policies/export_from_pytorch.py; do not edit (rerun it).\n",
            header, 'output_keys: "action"\n', 'output_keys: "action_log_prob"\n',
            modules, "parameters {\n"]
    for pname, value in root.named_parameters():
        spec.append(named_tensor_text("tensors", pname, value, 2))
    spec.append("}\nself_tests {\n")
    spec.append(named_tensor_text("inputs", "observation", observation, 2))
    for key, value in self_test["expected"].items():
        spec.append(named_tensor_text("expected_outputs", key, value, 2))
    spec.append(named_tensor_text("actions", "action", given, 2))
    for key, value in self_test["log_probs"].items():
        spec.append(named_tensor_text("expected_log_probs", key, value, 2))
    spec.append("  atol: 1e-6\n  rtol: 1e-6\n}\n")

    reference = ["# Generated by policies/export_from_pytorch.py: PyTorch %s's results for %s.pbtxt.\n"
                 % (torch.__version__, name)]
    tensors = {"inputs/observation": observation, "given/action": given}
    tensors.update({"params/" + k: v for k, v in params.items()})
    tensors.update(results)
    for key, value in tensors.items():
        reference.append(named_tensor_text("tensors", key, value, 0))

    os.makedirs(out_dir, exist_ok=True)
    for filename, lines in ((name + ".pbtxt", spec), (name + ".reference.pbtxt", reference)):
        with open(os.path.join(out_dir, filename), "w") as f:
            f.write("".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch"))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    write_actor("gaussian_actor", gaussian_actor, args.out, args.seed)
    write_actor("categorical_actor", categorical_actor, args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
