#!/usr/bin/env python3
"""Exports tensordict/TorchRL actors to tdpolicy specs, with what Python computes with them.

A policy trained in Python reaches the C++ SDK as a spec (the module tree, in text form) plus
its weights embedded as tensors. This script builds small actors from the real tensordict.nn and
torchrl.modules classes, the way a tensordict/TorchRL trainer does, and exports each by walking
the module objects themselves:

  gaussian_actor       ProbabilisticActor(TensorDictSequential(
                           TensorDictModule(MLP 3 -> (32, 32) -> 2, observation -> params),
                           TensorDictModule(NormalParamExtractor(), params -> (loc, scale))),
                         Normal, action [1], return_log_prob)
  tanh_gaussian_actor  ProbabilisticActor(TensorDictSequential(
                           TensorDictModule(MLP 3 -> (32, 32) -> 2 (LayerNorm, ReLU), observation -> loc),
                           TensorDictModule(AddStateIndependentNormalScale(2), loc -> (loc, scale))),
                         TanhNormal(low=-2, high=2), action [2], return_log_prob)
  categorical_actor    ProbabilisticTensorDictSequential(
                           TensorDictModule(MLP 4 -> (32, 32) -> 3, observation -> logits),
                           ProbabilisticTensorDictModule(Categorical), action [] int64)
  composite_actor      ProbabilisticTensorDictSequential(
                           TensorDictModule(MLP, observation -> params/type/logits),
                           TensorDictModule(MLP, observation -> param_head_out),
                           TensorDictModule(NormalParamExtractor("biased_softplus_0.5", 1e-3),
                                            param_head_out -> params/param/{loc, scale}),
                           ProbabilisticTensorDictModule(in_keys="params", CompositeDistribution(
                               {type: Categorical, param: Normal},
                               name_map {type: action/type, param: action/param})))
  gru_actor            ProbabilisticTensorDictSequential(OrderedDict(
                           gru=TensorDictModule(nn.GRUCell(4, 16), (observation, hidden) -> hidden),
                           head=TensorDictModule(MLP 16 -> (32,) -> 2, hidden -> logits),
                           actor=ProbabilisticTensorDictModule(Categorical)))
  torchscript_actor    ProbabilisticTensorDictSequential(
                           TensorDictModule(torch.jit.script(LocScale), observation -> (loc, scale)),
                           ProbabilisticTensorDictModule(Normal))
                       (the scripted network is saved with torch.jit.save as
                       torchscript_actor.pt, which the spec names in network { torchscript {} })

The walk maps each tensordict/TorchRL object to its tdpolicy.Module (TensorDictSequential ->
sequential, ProbabilisticTensorDictSequential / ProbabilisticActor -> probabilistic_sequential,
TensorDictModule -> network, ProbabilisticTensorDictModule -> probabilistic) and each network to
its tdpolicy.Network (an nn.Sequential of Linear/activation layers such as TorchRL's MLP -> mlp,
nn.Linear -> linear, nn.GRUCell -> gru_cell, a ScriptModule -> torchscript,
NormalParamExtractor, AddStateIndependentNormalScale). Anything the spec cannot express raises
an UnsupportedModule error naming the submodule's path and type. The modules' real
named_parameters() are written under the names the C++ loader's named_parameters() gives the
same tree (an Mlp keeps its layers in `layers`, a GruCell its torch GRUCell in `cell`, a
probabilistic_sequential numbers its children); every parameter must be mapped exactly once.
Each actor is built and exported under both composite_lp_aggregate modes, and the two specs
must be identical: the mode changes only the log-prob keys the loaded policy writes.

For each NAME it writes, under the output folder (default: policies/pytorch next to this file):
  NAME.pbtxt            the tdpolicy.PolicySpec, weights embedded, with a self test (Python's
                        deterministic outputs and per-entry log-probs of given actions) so that
                        load_policy(..., {.run_self_tests = true}) proves the C++ side agrees;
  NAME.reference.pbtxt  a tdpolicy.Parameters message used as a list of named tensors:
                          inputs/<key>    the example inputs (every leaf of the input TensorDict)
                          actions/<key>   given actions, at the actor's sample keys
                        and, for MODE in lp_aggregate_false and lp_aggregate_true (the actor
                        built and run under tensordict.nn.set_composite_lp_aggregate(False/True)):
                          MODE/outputs/<key>   every leaf of the actor's output TensorDict under
                                               the deterministic interaction type (inputs,
                                               intermediate keys, samples, log-probs with their
                                               exact key names)
                          MODE/log_prob/<key>  actor.log_prob() of the given actions: its leaves
                                               when it returns a TensorDict, else one entry at
                                               the actor's log_prob_key.
  NAME.pt               (torchscript_actor only) the scripted network.
Keys are written with "/" between the levels of a nested key, as in specs.

Needs torch, tensordict and torchrl (the project's venv: third_party/python/requirements.txt);
the text format is written directly, so no protobuf runtime is involved. From the repository root:

  ~/.cache/tdpolicy/venv/bin/python3 policies/export_from_pytorch.py            # rewrites policies/pytorch/
  ~/.cache/tdpolicy/venv/bin/python3 policies/export_from_pytorch.py --out DIR  # elsewhere (the tests)
"""

import argparse
import collections
import os
import struct
import sys
import warnings

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
    from tensordict.nn.distributions.continuous import Delta
    from tensordict.nn.utils import _MAPPINGS, biased_softplus

    import torchrl
    from torchrl.modules import MLP, IndependentNormal, ProbabilisticActor, TanhNormal
except ImportError as error:  # a clear message, not a bare traceback, from a wrong interpreter
    sys.exit("export_from_pytorch.py needs torch, tensordict and torchrl (run it with the project's "
             "venv, ~/.cache/tdpolicy/venv/bin/python3): %s" % error)

DTYPES = {torch.float32: "FLOAT32", torch.float64: "FLOAT64", torch.int64: "INT64",
          torch.int32: "INT32", torch.bool: "BOOL"}
PACK = {torch.float32: "<%df", torch.float64: "<%dd", torch.int64: "<%dq", torch.int32: "<%di",
        torch.bool: "<%d?"}

# tdpolicy's distribution registry (sdk/distributions/registry.cc) by Python class.
DISTRIBUTIONS = {
    D.Normal: "normal",
    IndependentNormal: "independent_normal",
    TanhNormal: "tanh_normal",
    D.Categorical: "categorical",
    D.Bernoulli: "bernoulli",
    D.Beta: "beta",
    D.Uniform: "uniform",
    Delta: "delta",
}

# tdpolicy.Mlp's activations, with the constructor arguments tdpolicy uses (torch's defaults).
ACTIVATIONS = {
    nn.Tanh: ("tanh", {}),
    nn.ReLU: ("relu", {}),
    nn.ELU: ("elu", {"alpha": 1.0}),
    nn.GELU: ("gelu", {"approximate": "none"}),
    nn.LeakyReLU: ("leaky_relu", {"negative_slope": 0.01}),
    nn.Sigmoid: ("sigmoid", {}),
    nn.Softplus: ("softplus", {"beta": 1.0, "threshold": 20.0}),
    nn.Identity: ("identity", {}),
}

MODES = (("lp_aggregate_false", False), ("lp_aggregate_true", True))


class UnsupportedModule(ValueError):
    """A module (or setting) that a tdpolicy.PolicySpec cannot express."""

    def __init__(self, path, obj, why):
        super().__init__("cannot export %s (%s.%s): %s"
                         % (path, type(obj).__module__, type(obj).__qualname__, why))


# ---- text format ------------------------------------------------------------------------------

def quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def text_bytes(data):
    return '"' + "".join("\\%03o" % b for b in data) + '"'


def number_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


class Message:
    """A text-format message: an ordered list of (field, value), value a scalar, str or Message."""

    def __init__(self, *fields):
        self.fields = list(fields)

    def add(self, field, value):
        self.fields.append((field, value))
        return self

    def text(self, indent=0):
        pad = " " * indent
        lines = []
        for field, value in self.fields:
            if isinstance(value, Message):
                lines.append("%s%s {\n%s%s}\n" % (pad, field, value.text(indent + 2), pad))
            elif isinstance(value, Raw):
                lines.append("%s%s: %s\n" % (pad, field, value.text))
            elif isinstance(value, str):
                lines.append("%s%s: %s\n" % (pad, field, quote(value)))
            else:
                lines.append("%s%s: %s\n" % (pad, field, number_text(value)))
        return "".join(lines)


class Raw:
    def __init__(self, text):
        self.text = text


def tensor_message(t):
    t = t.detach().cpu().contiguous()
    if t.dtype not in DTYPES:
        raise ValueError("no tdpolicy.DType for %s" % t.dtype)
    values = t.reshape(-1).tolist()
    msg = Message(("dtype", Raw(DTYPES[t.dtype])))
    for size in t.shape:
        msg.add("shape", int(size))
    return msg.add("data", Raw(text_bytes(struct.pack(PACK[t.dtype] % len(values), *values))))


def named_tensor(name, t):
    return Message(("name", name), ("tensor", tensor_message(t)))


def key_text(key):
    key = tensordict.utils.unravel_key(key)
    parts = (key,) if isinstance(key, str) else key
    for part in parts:
        if "/" in part or not part:
            raise ValueError("key %r: spec keys cannot hold '/' or empty levels" % (key,))
    return "/".join(parts)


def leaves(td):
    """(key text, tensor) for every leaf of a TensorDict, in its order."""
    return [(key_text(key), value) for key, value in td.items(include_nested=True, leaves_only=True)]


# ---- the walk: tensordict / TorchRL module objects -> tdpolicy.Module --------------------------

class Exporter:
    """Walks one actor. Collects the spec's Module message, the parameters under the C++
    loader's names, and the TorchScript files to save."""

    def __init__(self, actor, input_keys, name):
        self.actor = actor
        self.name = name
        self.available = set(input_keys)  # keys declared as inputs or written so far
        self.parameters = []  # (C++ name, Python name, tensor)
        self.scripts = []  # (file name, ScriptModule)
        self.cpp_prefix = ""  # of the module being walked, in C++ and in Python
        self.python_prefix = ""

    def export(self):
        module = self.module(self.actor, "actor")
        python = dict(self.actor.named_parameters())
        mapped = [python_name for _, python_name, _ in self.parameters]
        if sorted(mapped) != sorted(python):
            missing = sorted(set(python) - set(mapped))
            raise UnsupportedModule("actor", self.actor,
                                    "parameters the spec does not hold: %s" % ", ".join(missing))
        if list(dict(self.actor.named_buffers())):
            raise UnsupportedModule("actor", self.actor, "buffers are not exported: %s"
                                    % ", ".join(dict(self.actor.named_buffers())))
        return module

    def add_parameters(self, module, python_prefix, cpp_prefix):
        for pname, value in module.named_parameters():
            self.parameters.append((cpp_prefix + pname, python_prefix + pname, value))

    # Module kinds.
    def module(self, obj, path, name=None):
        msg = Message()
        if name is not None:
            msg.add("name", name)
        if isinstance(obj, ProbabilisticTensorDictSequential):  # before TensorDictSequential
            self.check_sequence(obj, path)
            kind = Message()
            children = self.children(obj, path)
            for child_path, child_name, child, index in children:
                # tdpolicy numbers a probabilistic_sequential's children (module.0, module.1, ...)
                # even when they have names.
                kind.add("modules", self.module_at(child, child_path, child_name, "module.%d." % index,
                                                   "module.%s." % (child_name or index)))
            # tensordict's default for return_composite, written only when it was overridden.
            default = (not isinstance(children[-1][2],
                                      (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))
                       or sum(isinstance(c[2], ProbabilisticTensorDictModule) for c in children) > 1)
            if obj.return_composite != default:
                kind.add("return_composite", bool(obj.return_composite))
            if obj.partial_tolerant:
                kind.add("partial_tolerant", True)
            for key in self.selected_out_keys(obj):
                kind.add("selected_out_keys", key_text(key))
            return msg.add("probabilistic_sequential", kind)
        if isinstance(obj, TensorDictSequential):
            self.check_sequence(obj, path)
            kind = Message()
            for child_path, child_name, child, index in self.children(obj, path):
                step = "module.%s." % (child_name if child_name is not None else index)
                kind.add("modules", self.module_at(child, child_path, child_name, step, step))
            if obj.partial_tolerant:
                kind.add("partial_tolerant", True)
            for key in self.selected_out_keys(obj):
                kind.add("selected_out_keys", key_text(key))
            return msg.add("sequential", kind)
        overwrites = []  # what it writes over an input or an earlier module's output
        if isinstance(obj, ProbabilisticTensorDictModule):
            msg.add("probabilistic", self.probabilistic(obj, path, overwrites))
        elif isinstance(obj, TensorDictModule):
            msg.add("network", self.network_module(obj, path, overwrites))
        else:
            raise UnsupportedModule(path, obj, "not a TensorDictSequential, ProbabilisticTensorDictSequential, "
                                    "TensorDictModule or ProbabilisticTensorDictModule")
        for key in overwrites:
            msg.add("overwrite_keys", key)
        return msg

    def module_at(self, child, path, name, cpp_step, python_step):
        """The child's Module message, its parameters named under the parent's prefixes plus
        `cpp_step` (C++) and `python_step` (Python)."""
        saved = self.cpp_prefix, self.python_prefix
        self.cpp_prefix, self.python_prefix = saved[0] + cpp_step, saved[1] + python_step
        try:
            return self.module(child, path, name)
        finally:
            self.cpp_prefix, self.python_prefix = saved

    def children(self, obj, path):
        container = obj.module
        if isinstance(container, nn.ModuleDict):
            return [("%s.module.%s" % (path, k), k, m, i) for i, (k, m) in enumerate(container.items())]
        return [("%s.module.%d" % (path, i), None, m, i) for i, m in enumerate(container)]

    @staticmethod
    def check_sequence(obj, path):
        if getattr(obj, "inplace", None) is not None:
            raise UnsupportedModule(path, obj, "inplace=%r has no spec field" % (obj.inplace,))

    @staticmethod
    def selected_out_keys(obj):
        return list(obj.out_keys) if getattr(obj, "_select_before_return", False) else []

    def writes(self, key, overwrites):
        """Records that `key` is written; an already available key goes to `overwrites`."""
        key = tensordict.utils.unravel_key(key)
        if key in self.available:
            overwrites.append(key_text(key))
        self.available.add(key)
        return key_text(key)

    # TensorDictModule -> tdpolicy.NetworkModule.
    def network_module(self, obj, path, overwrites):
        if getattr(obj, "_kwargs", None) is not None:
            raise UnsupportedModule(path, obj, "dict in_keys (keyword arguments) have no spec field")
        if obj.method_kwargs:
            raise UnsupportedModule(path, obj, "method_kwargs have no spec field")
        if getattr(obj, "safe", False):
            raise UnsupportedModule(path, obj, "safe=True (projection onto a spec) has no spec field")
        if getattr(obj, "inplace", True) is not True:
            raise UnsupportedModule(path, obj, "inplace=%r has no spec field" % (obj.inplace,))
        msg = Message()
        for key in obj.in_keys:
            msg.add("in_keys", key_text(key))
        for key in obj.out_keys:
            msg.add("out_keys", "_" if key == "_" else self.writes(key, overwrites))
        msg.add("network", self.network(obj.module, path + ".module", obj.method))
        return msg

    def network(self, net, path, method):
        cpp = self.cpp_prefix + "module."
        python = self.python_prefix + "module."
        if isinstance(net, torch.jit.ScriptModule):
            filename = "%s.pt" % self.name if not self.scripts else "%s.%d.pt" % (self.name, len(self.scripts))
            self.scripts.append((filename, net))
            kind = Message(("file", filename))
            if method not in (None, "forward"):
                kind.add("method", method)
            self.add_parameters(net, python, cpp)
            return Message(("torchscript", kind))
        if method not in (None, "forward"):
            raise UnsupportedModule(path, net, "method=%r: only TorchScript modules can call another method" % method)
        if isinstance(net, nn.Linear):
            kind = Message(("in_features", net.in_features), ("out_features", net.out_features))
            if net.bias is None:
                kind.add("no_bias", True)
            self.add_parameters(net, python, cpp)
            return Message(("linear", kind))
        if isinstance(net, nn.GRUCell):
            if not net.bias:
                raise UnsupportedModule(path, net, "bias=False: tdpolicy's gru_cell has biases")
            self.add_parameters(net, python, cpp + "cell.")
            return Message(("gru_cell", Message(("input_size", net.input_size), ("hidden_size", net.hidden_size))))
        if isinstance(net, NormalParamExtractor):
            kind = Message(("scale_mapping", self.mapping_name(net.scale_mapping, path + ".scale_mapping")),
                           ("scale_lb", float(net.scale_lb)))
            return Message(("normal_param_extractor", kind))
        if isinstance(net, AddStateIndependentNormalScale):
            if not isinstance(net.state_independent_scale, nn.Parameter):
                raise UnsupportedModule(path, net, "make_param=False (a buffer) has no spec field")
            kind = Message()
            for size in net.scale_shape:
                kind.add("scale_shape", int(size))
            kind.add("scale_mapping", self.mapping_name(net.scale_mapping, path + ".scale_mapping"))
            kind.add("scale_lb", float(net.scale_lb))
            self.add_parameters(net, python, cpp)
            return Message(("add_state_independent_normal_scale", kind))
        if type(net) in (nn.Sequential, MLP):
            return Message(("mlp", self.mlp(net, path, python, cpp)))
        raise UnsupportedModule(path, net, "no tdpolicy.Network counterpart (mlp: an nn.Sequential of Linear "
                                "and activation layers such as torchrl's MLP, linear, gru_cell, torchscript, "
                                "normal_param_extractor, add_state_independent_normal_scale)")

    def mlp(self, seq, path, python, cpp):
        """Linear, ([LayerNorm,] activation, Linear)*, [activation]: tdpolicy.Mlp's layer order,
        so the layer indices (and parameter names under `layers.`) are the same in C++."""
        layers = list(seq.children())
        names = [n for n, _ in seq.named_children()]
        if names != [str(i) for i in range(len(layers))]:
            raise UnsupportedModule(path, seq, "layers must be numbered 0..n-1, got %s" % names)

        def at(i):
            return "%s.%d" % (path, i)

        def linear(i, width):
            layer = layers[i]
            if not isinstance(layer, nn.Linear):
                raise UnsupportedModule(at(i), layer, "tdpolicy.Mlp expects an nn.Linear here")
            if layer.bias is None:
                raise UnsupportedModule(at(i), layer, "bias=False: tdpolicy.Mlp's Linear layers have biases")
            if width is not None and layer.in_features != width:
                raise UnsupportedModule(at(i), layer, "in_features %d after a layer of width %d"
                                        % (layer.in_features, width))
            return layer.out_features

        def activation(i):
            layer = layers[i]
            entry = ACTIVATIONS.get(type(layer))
            if entry is None:
                raise UnsupportedModule(at(i), layer, "not one of tdpolicy.Mlp's activations (%s)"
                                        % ", ".join(c.__name__ for c in ACTIVATIONS))
            for attr, value in entry[1].items():
                if getattr(layer, attr) != value:
                    raise UnsupportedModule(at(i), layer, "%s=%r; tdpolicy's %s uses %r"
                                            % (attr, getattr(layer, attr), entry[0], value))
            return entry[0]

        if not layers:
            raise UnsupportedModule(path, seq, "an empty nn.Sequential")
        in_features = layers[0].in_features if isinstance(layers[0], nn.Linear) else None
        width = linear(0, None)
        hidden, act, layer_norm, activate_last = [], None, None, False
        i = 1
        while i < len(layers):
            norm = isinstance(layers[i], nn.LayerNorm)
            if norm:
                ln = layers[i]
                if (tuple(ln.normalized_shape) != (width,) or ln.eps != 1e-5 or not ln.elementwise_affine
                        or ln.bias is None):
                    raise UnsupportedModule(at(i), ln, "tdpolicy.Mlp's LayerNorm is LayerNorm([width]) "
                                            "with eps 1e-5 and affine weight and bias")
                i += 1
                if i >= len(layers):
                    raise UnsupportedModule(at(i - 1), ln, "a LayerNorm must be followed by an activation")
            if layer_norm is not None and norm != layer_norm:
                raise UnsupportedModule(at(i), layers[i - 1], "LayerNorm after some hidden layers only")
            name = activation(i)
            if act is not None and name != act:
                raise UnsupportedModule(at(i), layers[i], "mixed activations (%s and %s)" % (act, name))
            act = name
            i += 1
            if i == len(layers):
                if norm:
                    raise UnsupportedModule(at(i - 2), layers[i - 2], "a LayerNorm after the last layer")
                activate_last = True
                break
            layer_norm = norm
            hidden.append(width)
            width = linear(i, width)
            i += 1
        self.add_parameters(seq, python, cpp + "layers.")
        msg = Message(("in_features", in_features))
        for size in hidden:
            msg.add("hidden_sizes", size)
        msg.add("out_features", width)
        msg.add("activation", act or "tanh")
        if layer_norm:
            msg.add("layer_norm", True)
        if activate_last:
            msg.add("activate_last_layer", True)
        return msg

    @staticmethod
    def mapping_name(mapping, path):
        """The tensordict.nn.mappings() name that gives `mapping`."""
        if isinstance(mapping, str):
            tensordict.nn.mappings(mapping)  # a name tensordict does not know fails here
            return mapping
        for name, value in _MAPPINGS.items():
            if value is mapping and name != "biased_softplus":
                return name
        if isinstance(mapping, biased_softplus):
            target = torch.nn.functional.softplus(torch.tensor(mapping.bias, dtype=torch.float64)).item() \
                + mapping.min_val
            for digits in range(1, 18):
                bias = float("%.*g" % (digits, target))
                if biased_softplus(bias, mapping.min_val).bias == mapping.bias:
                    if mapping.min_val == 0.01:
                        return "biased_softplus_%r" % bias
                    return "biased_softplus_%r_%r" % (bias, float(mapping.min_val))
        raise UnsupportedModule(path, mapping, "not a mapping tensordict.nn.mappings() names")

    # ProbabilisticTensorDictModule -> tdpolicy.ProbabilisticModule.
    def probabilistic(self, obj, path, overwrites):
        if getattr(obj, "safe", False):
            raise UnsupportedModule(path, obj, "safe=True (projection onto a spec) has no spec field")
        if obj._generator is not None or obj._generator_key is not None:
            raise UnsupportedModule(path, obj, "a generator has no spec field")
        msg = Message()
        in_keys = [tensordict.utils.unravel_key(k) for k in obj.in_keys]
        dist_keys = list(obj.dist_keys)
        leaf = [k if isinstance(k, str) else k[-1] for k in in_keys]
        composite = obj.distribution_class is CompositeDistribution
        if composite or leaf == dist_keys:
            for key in in_keys:
                msg.add("in_keys", key_text(key))
        else:
            for name, key in zip(dist_keys, in_keys):
                msg.add("in_keys_map", Message(("name", name), ("key", key_text(key))))
        sample_keys = list(obj.dist_sample_keys)
        for key in sample_keys:
            msg.add("out_keys", self.writes(key, overwrites))
        kwargs = dict(obj.distribution_kwargs)
        if composite:
            msg.add("composite", self.composite(obj, kwargs, path))
        else:
            if obj.distribution_class not in DISTRIBUTIONS:
                raise UnsupportedModule(path, obj, "distribution_class %s is not in tdpolicy's registry (%s)"
                                        % (obj.distribution_class.__name__,
                                           ", ".join(c.__name__ for c in DISTRIBUTIONS)))
            msg.add("distribution", DISTRIBUTIONS[obj.distribution_class])
            for name, value in kwargs.items():
                msg.add("distribution_kwargs", Message(("key", name), ("value", self.scalar(value, path, name))))
        msg.add("default_interaction_type", InteractionType(obj.default_interaction_type).value)
        if obj.return_log_prob:
            msg.add("return_log_prob", True)
            # Log-prob keys are written only when they were given: otherwise tdpolicy derives
            # them from composite_lp_aggregate() at load time, as tensordict does at construction.
            unravel = tensordict.utils.unravel_key
            suffixed = [unravel(tensordict.nn.probabilistic._add_suffix(k, "_log_prob")) for k in sample_keys]
            if obj._composite_lp_aggreate_at_init:
                if unravel(obj._log_prob_key) != "sample_log_prob":
                    msg.add("log_prob_key", key_text(obj._log_prob_key))
            elif len(sample_keys) == 1:
                if unravel(obj._log_prob_key) != suffixed[0]:
                    msg.add("log_prob_key", key_text(obj._log_prob_key))
            elif [unravel(k) for k in obj._log_prob_keys] != suffixed:
                for key in obj._log_prob_keys:
                    msg.add("log_prob_keys", key_text(key))
        if obj.num_samples is not None:
            for size in obj.num_samples:
                msg.add("num_samples", int(size))
        return msg

    def composite(self, obj, kwargs, path):
        distribution_map = kwargs.pop("distribution_map")
        name_map = {tensordict.utils.unravel_key(k): v for k, v in (kwargs.pop("name_map", None) or {}).items()}
        extra = {tensordict.utils.unravel_key(k): v for k, v in (kwargs.pop("extra_kwargs", None) or {}).items()}
        msg = Message()
        for key, dist_class in distribution_map.items():
            key = tensordict.utils.unravel_key(key)
            if dist_class not in DISTRIBUTIONS:
                raise UnsupportedModule("%s.distribution_kwargs['distribution_map'][%r]" % (path, key), dist_class,
                                        "not in tdpolicy's registry")
            part = Message(("key", key_text(key)), ("distribution", DISTRIBUTIONS[dist_class]))
            if key in name_map:
                part.add("sample_key", key_text(name_map[key]))
            for name, value in extra.get(key, {}).items():
                part.add("kwargs", Message(("key", name), ("value", self.scalar(value, path, name))))
            msg.add("parts", part)
        for field in ("log_prob_key", "entropy_key"):
            value = kwargs.pop(field, None)
            if value is not None:
                msg.add(field, key_text(value))
        if kwargs:
            raise UnsupportedModule(path, obj, "CompositeDistribution kwargs with no spec field: %s"
                                    % ", ".join(kwargs))
        return msg

    @staticmethod
    def scalar(value, path, name):
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise UnsupportedModule("%s.distribution_kwargs[%r]" % (path, name), value,
                                        "only scalar kwargs are exported")
            value = value.item()
        if isinstance(value, bool):
            return Message(("bool_value", value))
        if isinstance(value, int):
            return Message(("int_value", value))
        if isinstance(value, float):
            return Message(("double_value", value))
        raise UnsupportedModule("%s.distribution_kwargs[%r]" % (path, name), value, "not a bool, int or float")


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


# ---- running and writing ---------------------------------------------------------------------

def build(builder, seed, aggregate):
    """The actor, built under composite_lp_aggregate(aggregate) (which fixes its log-prob keys)."""
    torch.manual_seed(seed)
    with set_composite_lp_aggregate(aggregate):
        actor, inputs, actions, description = builder()
    actor.eval()
    batch = next(iter(inputs.values())).shape[:1]
    inputs = TensorDict(inputs, batch_size=batch)
    actions = TensorDict(actions, batch_size=batch)
    return actor, inputs, actions, description


def compute(actor, inputs, actions, aggregate):
    """Python's results: the whole deterministic output TensorDict, and the log-probs of the actions."""
    with torch.no_grad(), set_composite_lp_aggregate(aggregate), \
            set_interaction_type(InteractionType.DETERMINISTIC):
        outputs = actor(inputs.clone())
        given = inputs.clone().update(actions.clone())
        log_prob = actor.log_prob(given)
        if isinstance(log_prob, TensorDictBase):
            log_probs = leaves(log_prob)
        else:
            (key,) = actor.log_prob_keys  # a tensor: the log-prob at the actor's one log-prob key
            log_probs = [(key_text(key), log_prob)]
    return leaves(outputs), log_probs


def write_actor(name, builder, out_dir, seed):
    runs = {}
    specs = {}
    for mode, aggregate in MODES:
        actor, inputs, actions, description = build(builder, seed, aggregate)
        exporter = Exporter(actor, [tensordict.utils.unravel_key(k) for k in inputs.keys(True, True)], name)
        with set_composite_lp_aggregate(aggregate):
            module = exporter.export()
        specs[mode] = (module.text(), [(n, t.detach().clone()) for n, _, t in exporter.parameters])
        runs[mode] = (actor, inputs, actions, compute(actor, inputs, actions, aggregate), exporter)
    # The spec does not depend on the mode the actor was built under: only the keys it writes do.
    (text_f, params_f), (text_t, params_t) = specs["lp_aggregate_false"], specs["lp_aggregate_true"]
    if text_f != text_t or [n for n, _ in params_f] != [n for n, _ in params_t] or \
            not all(torch.equal(a, b) for (_, a), (_, b) in zip(params_f, params_t)):
        raise RuntimeError("%s: the exported spec differs between composite_lp_aggregate modes" % name)

    actor, inputs, actions, (outputs, log_probs), exporter = runs["lp_aggregate_false"]
    os.makedirs(out_dir, exist_ok=True)
    for filename, script in exporter.scripts:
        torch.jit.save(script, os.path.join(out_dir, filename))

    spec = Message(("name", "pytorch_" + name), ("version", "1"),
                   ("description", "exported from tensordict %s / TorchRL %s: %s"
                    % (tensordict.__version__, torchrl.__version__, description)))
    for key, value in leaves(inputs):
        entry = Message(("key", key))
        for size in value.shape[1:]:
            entry.add("shape", int(size))
        spec.add("inputs", entry.add("dtype", Raw(DTYPES[value.dtype])))
    # What it promises to write: the actor's out_keys (per-entry log-probs, the default mode).
    with set_composite_lp_aggregate(False):
        out_keys = [key_text(k) for k in actor.out_keys]
    for key in out_keys:
        spec.add("output_keys", key)
    spec.add("module", module_of(specs["lp_aggregate_false"][0]))
    parameters = Message()
    for cpp_name, _, value in exporter.parameters:
        parameters.add("tensors", named_tensor(cpp_name, value))
    spec.add("parameters", parameters)
    self_test = Message()
    for key, value in leaves(inputs):
        self_test.add("inputs", named_tensor(key, value))
    by_key = dict(outputs)
    for key in out_keys:
        self_test.add("expected_outputs", named_tensor(key, by_key[key]))
    for key, value in leaves(actions):
        self_test.add("actions", named_tensor(key, value))
    for key, value in log_probs:
        self_test.add("expected_log_probs", named_tensor(key, value))
    self_test.add("atol", 1e-6).add("rtol", 1e-6)
    spec.add("self_tests", self_test)

    reference = Message()
    for key, value in leaves(inputs):
        reference.add("tensors", named_tensor("inputs/" + key, value))
    for key, value in leaves(actions):
        reference.add("tensors", named_tensor("actions/" + key, value))
    for mode, _ in MODES:
        outputs, log_probs = runs[mode][3]
        for key, value in outputs:
            reference.add("tensors", named_tensor("%s/outputs/%s" % (mode, key), value))
        for key, value in log_probs:
            reference.add("tensors", named_tensor("%s/log_prob/%s" % (mode, key), value))

    versions = "torch %s, tensordict %s, torchrl %s" % (torch.__version__, tensordict.__version__,
                                                        torchrl.__version__)
    with open(os.path.join(out_dir, name + ".pbtxt"), "w") as f:
        f.write("# proto-file: proto/tdpolicy/spec.proto\n# proto-message: tdpolicy.PolicySpec\n"
                "# Generated by policies/export_from_pytorch.py (%s); do not edit (rerun it).\n" % versions)
        f.write(spec.text())
    with open(os.path.join(out_dir, name + ".reference.pbtxt"), "w") as f:
        f.write("# proto-file: proto/tdpolicy/spec.proto\n# proto-message: tdpolicy.Parameters\n"
                "# Generated by policies/export_from_pytorch.py: what %s computes with %s.pbtxt.\n"
                % (versions, name))
        f.write(reference.text())


class module_of(Message):
    """The exported Module message, from its text (so both modes' walks are compared as text)."""

    def __init__(self, text):
        super().__init__()
        self._text = text

    def text(self, indent=0):
        pad = " " * indent
        return "".join(pad + line + "\n" for line in self._text.splitlines())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch"))
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
