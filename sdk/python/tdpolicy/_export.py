"""tdpolicy.export: a tensordict / TorchRL module tree -> a tdpolicy.PolicySpec file.

The walk maps each tensordict object to its tdpolicy.Module (TensorDictSequential -> sequential,
ProbabilisticTensorDictSequential / ProbabilisticActor -> probabilistic_sequential,
TensorDictModule / Actor -> network, ProbabilisticTensorDictModule -> probabilistic) and each
network to its tdpolicy.Network (an nn.Sequential of Linear / LayerNorm / activation layers, such
as TorchRL's MLP -> mlp; nn.Linear -> linear; nn.GRUCell -> gru_cell; tdpolicy.LSTMCell ->
lstm_cell; a ScriptModule -> torchscript; NormalParamExtractor; AddStateIndependentNormalScale;
a tensordict mapping or softplus/ReLU/Identity module -> mapping). Anything the spec cannot express
raises ExportError naming the submodule's path and type: nothing is approximated.

Parameters are written under the names the C++ loader's named_parameters() gives the same tree
(an Mlp keeps its layers in `layers`, a GruCell its torch cell in `cell`, a
probabilistic_sequential numbers its children), and every parameter and buffer of the module must
be written exactly once.
"""

import os
import re

import torch
from torch import distributions as D
from torch import nn

import tensordict
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import (
    EnsembleModule,
    AddStateIndependentNormalScale,
    CompositeDistribution,
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
    set_interaction_type,
)
from tensordict.nn.distributions.continuous import Delta
from tensordict.nn.distributions.discrete import OneHotCategorical
from tensordict.nn.distributions.truncated_normal import TruncatedNormal
from tensordict.nn.probabilistic import composite_lp_aggregate
from tensordict.nn.utils import _MAPPINGS, biased_softplus, mappings
from tensordict.utils import unravel_key

from tdpolicy._errors import ExportError
from tdpolicy._modules import LSTMCell
from tdpolicy._proto import json_format, spec_pb2, text_format
from tdpolicy._tensors import dtype_enum, key_text, leaves, to_tensor_proto

try:  # TorchRL is optional: without it, its classes are simply never met.
    import torchrl
    from torchrl.modules import MLP as TorchRLMLP
    from torchrl.modules.distributions import (
        Delta as TorchRLDelta,
        IndependentNormal,
        OneHotCategorical as TorchRLOneHotCategorical,
        TanhNormal,
    )
    from torchrl.modules.distributions import TruncatedNormal as TorchRLTruncatedNormal
    from torchrl.modules.distributions import MaskedCategorical, MaskedOneHotCategorical
    from torchrl.modules import DistributionalQValueActor, DistributionalQValueModule, EGreedyModule, QValueModule
    from torchrl.modules.tensordict_module.common import DistributionalDQNnet
except ImportError:  # pragma: no cover
    torchrl = None
    TorchRLMLP = IndependentNormal = TanhNormal = TorchRLDelta = None
    TorchRLOneHotCategorical = TorchRLTruncatedNormal = None
    MaskedCategorical = MaskedOneHotCategorical = None
    QValueModule = DistributionalQValueModule = DistributionalQValueActor = EGreedyModule = None
    DistributionalDQNnet = None

# File extensions, as sdk/policy/spec_io.cc reads them.
_FORMATS = {".pbtxt": "text", ".textproto": "text", ".txtpb": "text", ".txt": "text",
            ".json": "json", ".pb": "binary", ".binpb": "binary", ".bin": "binary"}


def spec_format(path):
    """"text", "binary" or "json" by the file's extension (the C++ loader's rule)."""
    lower = str(path).lower()
    for ext, fmt in _FORMATS.items():
        if lower.endswith(ext):
            return fmt
    raise ValueError("%s: unknown spec extension; use one of %s" % (path, ", ".join(_FORMATS)))


# ---- distributions: Python class -> (registry name, {python kwarg: C++ kwarg or None to drop}) ----

def _must_be(value_ok, expected):
    def check(value):
        return None if value_ok(value) else expected
    return check


def _distributions():
    validate = {"validate_args": "validate_args"}
    table = {
        D.Normal: ("normal", dict(validate)),
        D.Categorical: ("categorical", dict(validate)),
        OneHotCategorical: ("one_hot_categorical", dict(validate)),
        D.Bernoulli: ("bernoulli", dict(validate)),
        D.Beta: ("beta", dict(validate)),
        D.Uniform: ("uniform", dict(validate)),
        Delta: ("delta", {"atol": "atol", "rtol": "rtol"}),
        TruncatedNormal: ("truncated_normal", {"a": "a", "b": "b", **validate}),
    }
    if torchrl is not None:
        table.update({
            # event_dim is event_dims in tdpolicy's registry. TorchRL 0.13 applies tanh_loc only in
            # update(), never when the distribution is built, so tanh_loc=True is refused below.
            IndependentNormal: ("independent_normal", {"event_dim": "event_dims", "upscale": "upscale",
                                                       "tanh_loc": "tanh_loc", **validate}),
            TanhNormal: ("tanh_normal", {"upscale": "upscale", "low": "low", "high": "high",
                                         "event_dims": "event_dims", "tanh_loc": "tanh_loc",
                                         "safe_tanh": "safe_tanh"}),
            # grad_method only chooses how rsample's gradients flow (training); the samples, modes
            # and log-probs are tensordict's OneHotCategorical's, which the C++ one mirrors.
            TorchRLOneHotCategorical: ("one_hot_categorical", {"grad_method": None, **validate}),
            TorchRLDelta: ("delta", {"atol": "atol", "rtol": "rtol"}),
            # The mask is a parameter read from a key (in_keys={"logits": ..., "mask": ...}).
            # padding_value and padding_side only apply to the sparse forms, which are refused
            # below; grad_method only chooses how rsample's gradients flow.
            MaskedCategorical: ("masked_categorical", {"neg_inf": "neg_inf", "use_cross_entropy": "use_cross_entropy",
                                                       "padding_value": None, "padding_side": None}),
            MaskedOneHotCategorical: ("masked_one_hot_categorical", {"neg_inf": "neg_inf", "padding_value": None,
                                                                     "grad_method": None}),
        })
    return table


def _activations():
    """tdpolicy.Mlp's activations with the constructor arguments tdpolicy uses (torch's defaults)."""
    return {
        nn.Tanh: ("tanh", {}),
        nn.ReLU: ("relu", {}),
        nn.ELU: ("elu", {"alpha": 1.0}),
        nn.GELU: ("gelu", {"approximate": "none"}),
        nn.LeakyReLU: ("leaky_relu", {"negative_slope": 0.01}),
        nn.Sigmoid: ("sigmoid", {}),
        nn.Softplus: ("softplus", {"beta": 1.0, "threshold": 20.0}),
        nn.Identity: ("identity", {}),
    }


def _type_name(obj):
    return "%s.%s" % (type(obj).__module__, type(obj).__qualname__)


def _inherits_forward(obj, base):
    """True when obj's class does not override base.forward (a subclass that computes something
    else would be exported as base silently)."""
    return type(obj).forward is base.forward


# ---- the walk ----------------------------------------------------------------------------------

class _Walker:
    def __init__(self, root, example, name):
        self.root = root
        self.example = example
        self.example_keys = {k for k, _ in leaves(example)}
        self.name = name
        self.available = {}  # key -> who wrote it ("inputs" or a module path)
        self.inputs = []  # keys read before any module writes them, in reading order
        self.parameters = []  # (C++ name, Python name, tensor)
        self.scripts = []  # (file name, ScriptModule)
        self.probabilistic = []  # (path, ProbabilisticTensorDictModule, its spec message)
        self.absorbed = []  # Python names of buffers the spec holds as fields (eps, a support)
        self.cpp_prefix = ""
        self.python_prefix = ""

    # Keys.
    def read(self, key, path, obj):
        key = unravel_key(key)
        if key in self.available:
            return key_text(key, path + " in_key")
        prefix = (key,) if isinstance(key, str) else key
        under = [k for k in self.available if isinstance(k, tuple) and k[:len(prefix)] == prefix]
        if under:  # a sub-TensorDict ("params") whose leaves earlier modules wrote
            return key_text(key, path + " in_key")
        from_example = [k for k in self.example_keys
                        if k == key or (isinstance(k, tuple) and k[:len(prefix)] == prefix)]
        if not from_example:
            raise ExportError(path, obj, "reads %r, which no earlier module writes and the example "
                              "TensorDict does not hold (the example must hold every input, recurrent "
                              "states included)" % (key,))
        for k in sorted(from_example, key=lambda k: key_text(k)):
            self.available[k] = "inputs"
            self.inputs.append(k)
        return key_text(key, path + " in_key")

    def write(self, key, overwrites, path):
        key = unravel_key(key)
        text = key_text(key, path + " out_key")
        if key in self.available:
            overwrites.append(text)
        self.available[key] = path
        return text

    def add_parameters(self, module, python_prefix, cpp_prefix):
        for pname, value in list(module.named_parameters()) + list(module.named_buffers()):
            self.parameters.append((cpp_prefix + pname, python_prefix + pname, value))

    # Module kinds.
    def module(self, obj, path, name=None, out=None):
        msg = out if out is not None else spec_pb2.Module()
        if name is not None:
            msg.name = name
        if isinstance(obj, EnsembleModule):
            self.check_forward(obj, path, EnsembleModule)
            self.ensemble(obj, path, msg.ensemble)
            return msg
        if isinstance(obj, ProbabilisticTensorDictSequential):  # before TensorDictSequential
            self.check_forward(obj, path, ProbabilisticTensorDictSequential)
            self.check_sequence(obj, path)
            kind = msg.probabilistic_sequential
            children = self.children(obj, path)
            for child_path, child_name, child, index in children:
                # tdpolicy numbers a probabilistic_sequential's children (module.0, module.1, ...)
                # even when they have names; Python names them.
                self.module_at(child, child_path, child_name, "module.%d." % index,
                               "module.%s." % (child_name if child_name is not None else index), kind.modules.add())
            # tensordict's default return_composite, written only when it was overridden.
            last = children[-1][2]
            default = (not isinstance(last, (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))
                       or sum(isinstance(c[2], ProbabilisticTensorDictModule) for c in children) > 1)
            if bool(obj.return_composite) != default:
                kind.return_composite = bool(obj.return_composite)
            kind.partial_tolerant = bool(obj.partial_tolerant)
            kind.selected_out_keys.extend(self.selected_out_keys(obj, path))
            return msg
        if isinstance(obj, TensorDictSequential):
            self.check_forward(obj, path, TensorDictSequential)
            self.check_sequence(obj, path)
            kind = msg.sequential
            children = self.children(obj, path)
            for position, (child_path, child_name, child, index) in enumerate(children):
                if _folds_into_next(child, children[position + 1][2] if position + 1 < len(children) else None,
                                    child_path):
                    continue
                step = "module.%s." % (child_name if child_name is not None else index)
                cpp_step = "module.%s." % (child_name if child_name is not None else len(kind.modules))
                self.module_at(child, child_path, child_name, cpp_step, step, kind.modules.add())
            if DistributionalQValueActor is not None and isinstance(obj, DistributionalQValueActor):
                # DistributionalQValueActor registers its module's support buffer once more.
                self.absorbed.append(self.python_prefix + "support")
            kind.partial_tolerant = bool(obj.partial_tolerant)
            kind.selected_out_keys.extend(self.selected_out_keys(obj, path))
            return msg
        overwrites = []
        if isinstance(obj, ProbabilisticTensorDictModule):
            self.check_forward(obj, path, ProbabilisticTensorDictModule)
            self.probabilistic_module(obj, path, overwrites, msg.probabilistic)
        elif isinstance(obj, TensorDictModule):
            self.check_forward(obj, path, TensorDictModule)
            self.network_module(obj, path, overwrites, msg.network)
        elif QValueModule is not None and isinstance(obj, QValueModule):
            self.q_value(obj, path, overwrites, msg.q_value)
        elif EGreedyModule is not None and isinstance(obj, EGreedyModule):
            self.egreedy(obj, path, overwrites, msg.egreedy)
        elif DistributionalDQNnet is not None and isinstance(obj, DistributionalDQNnet):
            raise ExportError(path, obj, "the log-softmax over atoms exports only right before the "
                              "DistributionalQValueModule that reads its output (as DistributionalQValueActor "
                              "builds them), whose q_value spec applies it")
        elif type(obj).__name__ in ("GRUModule", "LSTMModule") and type(obj).__module__.startswith("torchrl."):
            raise ExportError(path, obj, "TorchRL's recurrent modules reset their state at is_init and write it "
                              "under ('next', ...), which the spec has no field for; tdpolicy's recurrent "
                              "networks are nn.GRUCell / tdpolicy.LSTMCell in a TensorDictModule that reads "
                              "and writes the state keys")
        else:
            raise ExportError(path, obj, "not a TensorDictModule, TensorDictSequential, "
                              "ProbabilisticTensorDictModule or ProbabilisticTensorDictSequential "
                              "(or a TorchRL Actor / ProbabilisticActor built on them)")
        msg.overwrite_keys.extend(overwrites)
        return msg

    # EnsembleModule -> tdpolicy.Ensemble. tdpolicy names the copies' stacked parameters
    # "params.<module's names>" where tensordict has "params_td.<...>"; the template's are
    # "module.<...>" in both.
    def ensemble(self, obj, path, msg):
        msg.num_copies = int(obj.params_td.batch_size[0])
        if not _ensemble_expands_input(obj, path):
            msg.expand_input = False
        first = len(self.parameters)
        self.module_at(obj.module, path + ".module", None, "module.", "module.", msg.module)
        cpp_template = self.cpp_prefix + "module."
        python_template = self.python_prefix + "module."
        for cpp, python, _ in list(self.parameters[first:]):
            inner_cpp, inner_python = cpp[len(cpp_template):], python[len(python_template):]
            stacked = obj.params_td.get(tuple(inner_python.split(".")))
            self.parameters.append((self.cpp_prefix + "params." + inner_cpp,
                                    self.python_prefix + "params_td." + inner_python, stacked))

    def module_at(self, child, path, name, cpp_step, python_step, out):
        saved = self.cpp_prefix, self.python_prefix
        self.cpp_prefix, self.python_prefix = saved[0] + cpp_step, saved[1] + python_step
        try:
            return self.module(child, path, name, out)
        finally:
            self.cpp_prefix, self.python_prefix = saved

    @staticmethod
    def check_forward(obj, path, base):
        if not _inherits_forward(obj, base):
            raise ExportError(path, obj, "overrides %s.forward: the spec can only express %s's own "
                              "computation" % (base.__name__, base.__name__))

    @staticmethod
    def children(obj, path):
        container = obj.module
        if isinstance(container, nn.ModuleDict):
            return [("%s.module.%s" % (path, k), k, m, i) for i, (k, m) in enumerate(container.items())]
        return [("%s.module.%d" % (path, i), None, m, i) for i, m in enumerate(container)]

    @staticmethod
    def check_sequence(obj, path):
        if getattr(obj, "inplace", None) is not None:
            raise ExportError(path, obj, "inplace=%r has no spec field (only the default, None)" % (obj.inplace,))

    @staticmethod
    def selected_out_keys(obj, path):
        if not getattr(obj, "_select_before_return", False):
            return []
        return [key_text(k, path + " selected_out_key") for k in obj.out_keys]

    # TensorDictModule -> tdpolicy.NetworkModule.
    def network_module(self, obj, path, overwrites, msg):
        if getattr(obj, "_kwargs", None) is not None:
            raise ExportError(path, obj, "in_keys given as a dict (keyword arguments) have no spec field; "
                              "pass in_keys as a list in the network's argument order")
        if getattr(obj, "method_kwargs", None):
            raise ExportError(path, obj, "method_kwargs have no spec field")
        if getattr(obj, "safe", False):
            raise ExportError(path, obj, "safe=True (projection onto a TensorSpec) has no spec field")
        if getattr(obj, "inplace", True) is not True:
            raise ExportError(path, obj, "inplace=%r has no spec field (only the default, True)" % (obj.inplace,))
        for key in obj.in_keys:
            msg.in_keys.append(self.read(key, path, obj))
        self.network(obj.module, path + ".module", getattr(obj, "method", None), len(obj.in_keys),
                     len(obj.out_keys), msg.network)
        for key in obj.out_keys:
            msg.out_keys.append("_" if key == "_" else self.write(key, overwrites, path))
        return msg

    def arity(self, net, path, n_in, n_out, want_in, want_out, what):
        if (want_in is not None and n_in != want_in) or n_out != want_out:
            raise ExportError(path, net, "%s reads %s key(s) and writes %d; the TensorDictModule has %d "
                              "in_keys and %d out_keys" % (what, want_in, want_out, n_in, n_out))

    def network(self, net, path, method, n_in, n_out, msg):
        cpp = self.cpp_prefix + "module."
        python = self.python_prefix + "module."
        if isinstance(net, torch.jit.ScriptModule):
            stem = self.name
            filename = "%s.pt" % stem if not self.scripts else "%s.%d.pt" % (stem, len(self.scripts))
            self.scripts.append((filename, net))
            msg.torchscript.file = filename
            if method not in (None, "forward"):
                msg.torchscript.method = method
            self.add_parameters(net, python, cpp)
            return
        if method not in (None, "forward"):
            raise ExportError(path, net, "method=%r: only TorchScript modules can call another method" % method)
        if isinstance(net, nn.Linear) and type(net) is nn.Linear:
            self.arity(net, path, n_in, n_out, 1, 1, "a linear layer")
            msg.linear.in_features = net.in_features
            msg.linear.out_features = net.out_features
            msg.linear.no_bias = net.bias is None
            self.add_parameters(net, python, cpp)
            return
        if type(net) is nn.GRUCell:
            if not net.bias:
                raise ExportError(path, net, "bias=False: tdpolicy's gru_cell has biases")
            self.arity(net, path, n_in, n_out, 2, 1, "a gru_cell (input, hidden -> hidden)")
            msg.gru_cell.input_size = net.input_size
            msg.gru_cell.hidden_size = net.hidden_size
            self.add_parameters(net, python, cpp + "cell.")
            return
        if type(net) is LSTMCell:
            if not net.bias:
                raise ExportError(path, net, "bias=False: tdpolicy's lstm_cell has biases")
            self.arity(net, path, n_in, n_out, 3, 2, "an lstm_cell (input, h, c -> h, c)")
            msg.lstm_cell.input_size = net.input_size
            msg.lstm_cell.hidden_size = net.hidden_size
            self.add_parameters(net, python, cpp + "cell.")
            return
        if type(net) is nn.LSTMCell:
            raise ExportError(path, net, "torch's LSTMCell takes its state as one (h, c) tuple, which a "
                              "TensorDictModule cannot pass from entries; use tdpolicy.LSTMCell (reads "
                              "input, h, c and writes h, c), which exports as lstm_cell")
        if isinstance(net, NormalParamExtractor) and type(net) is NormalParamExtractor:
            self.arity(net, path, n_in, n_out, 1, 2, "a normal_param_extractor (params -> loc, scale)")
            msg.normal_param_extractor.scale_mapping = self.mapping_name(net.scale_mapping, path + ".scale_mapping")
            msg.normal_param_extractor.scale_lb = self.scale_lb(net, path)
            return
        if isinstance(net, AddStateIndependentNormalScale) and type(net) is AddStateIndependentNormalScale:
            self.arity(net, path, n_in, n_out, 1, 2, "an add_state_independent_normal_scale (loc -> loc, scale)")
            kind = msg.add_state_independent_normal_scale
            kind.scale_shape.extend(int(s) for s in net.scale_shape)
            if not isinstance(net.scale_mapping, str):
                raise ExportError(path + ".scale_mapping", net.scale_mapping, "expected a mapping name")
            kind.scale_mapping = self.mapping_name(net.scale_mapping, path + ".scale_mapping")
            kind.scale_lb = self.scale_lb(net, path)
            # The initial value only matters before weights are loaded; the exported scale is the
            # parameter's (or, with make_param=False, the buffer's) current value.
            self.add_parameters(net, python, cpp)
            return
        if type(net) is nn.Sequential or (TorchRLMLP is not None and type(net) is TorchRLMLP):
            self.mlp(net, path, n_in, n_out, python, cpp, msg.mlp)
            return
        mapping = self.mapping_of(net)
        if mapping is not None:
            self.arity(net, path, n_in, n_out, 1, 1, "a mapping")
            msg.mapping.name = mapping
            return
        raise ExportError(path, net, "no tdpolicy.Network counterpart (mlp: an nn.Sequential of Linear, "
                          "LayerNorm and activation layers such as TorchRL's MLP; linear; nn.GRUCell; "
                          "tdpolicy.LSTMCell; a TorchScript module; NormalParamExtractor; "
                          "AddStateIndependentNormalScale; a tensordict mapping)")

    def mlp(self, seq, path, n_in, n_out, python, cpp, msg):
        """Linear, ([LayerNorm,] activation, Linear)*, [activation]: tdpolicy.Mlp's layer order, so
        the layer indices (and parameter names under `layers.`) are the same in C++."""
        self.arity(seq, path, n_in, n_out, 1, 1, "an mlp")
        if TorchRLMLP is not None and isinstance(seq, TorchRLMLP) and getattr(seq, "_reshape_out", False):
            raise ExportError(path, seq, "out_features=%r reshapes the output; tdpolicy's mlp writes a flat "
                              "last dim" % (seq.out_features,))
        layers = list(seq.children())
        names = [n for n, _ in seq.named_children()]
        if names != [str(i) for i in range(len(layers))]:
            raise ExportError(path, seq, "layers must be numbered 0..n-1, got %s" % names)
        activations = _activations()

        def at(i):
            return "%s.%d" % (path, i)

        def linear(i, width):
            layer = layers[i]
            if type(layer) is not nn.Linear:
                raise ExportError(at(i), layer, "tdpolicy's mlp expects an nn.Linear here (its layers are "
                                  "Linear, [LayerNorm,] activation, ..., Linear[, activation])")
            if layer.bias is None:
                raise ExportError(at(i), layer, "bias=False: tdpolicy's mlp has biases in every Linear")
            if width is not None and layer.in_features != width:
                raise ExportError(at(i), layer, "in_features %d after a layer of width %d"
                                  % (layer.in_features, width))
            return layer.out_features

        def activation(i):
            layer = layers[i]
            entry = activations.get(type(layer))
            if entry is None:
                raise ExportError(at(i), layer, "not one of tdpolicy's mlp activations (%s)"
                                  % ", ".join("nn." + c.__name__ for c in activations))
            for attr, value in entry[1].items():
                if getattr(layer, attr) != value:
                    raise ExportError(at(i), layer, "%s=%r; tdpolicy's %s uses %r"
                                      % (attr, getattr(layer, attr), entry[0], value))
            return entry[0]

        if not layers:
            raise ExportError(path, seq, "an empty nn.Sequential")
        in_features = layers[0].in_features if type(layers[0]) is nn.Linear else None
        width = linear(0, None)
        hidden, act, layer_norm, activate_last = [], None, None, False
        i = 1
        while i < len(layers):
            norm = isinstance(layers[i], nn.LayerNorm)
            if norm:
                ln = layers[i]
                if (tuple(ln.normalized_shape) != (width,) or ln.eps != 1e-5 or not ln.elementwise_affine
                        or ln.bias is None):
                    raise ExportError(at(i), ln, "tdpolicy's mlp LayerNorm is LayerNorm(%d) with eps 1e-5 and "
                                      "affine weight and bias" % width)
                i += 1
                if i >= len(layers):
                    raise ExportError(at(i - 1), ln, "a LayerNorm must be followed by an activation")
            if layer_norm is not None and norm != layer_norm:
                raise ExportError(at(i), layers[i], "LayerNorm after some hidden layers only (tdpolicy's mlp "
                                  "has it after every hidden Linear or none)")
            name = activation(i)
            if act is not None and name != act:
                raise ExportError(at(i), layers[i], "mixed activations (%s and %s): tdpolicy's mlp has one"
                                  % (act, name))
            act = name
            i += 1
            if i == len(layers):
                if norm:
                    raise ExportError(at(i - 2), layers[i - 2], "a LayerNorm after the last Linear (tdpolicy's "
                                      "mlp normalizes hidden layers only)")
                activate_last = True
                break
            layer_norm = norm
            hidden.append(width)
            width = linear(i, width)
            i += 1
        self.add_parameters(seq, python, cpp + "layers.")
        msg.in_features = in_features
        msg.hidden_sizes.extend(hidden)
        msg.out_features = width
        msg.activation = act or "tanh"
        msg.layer_norm = bool(layer_norm)
        msg.activate_last_layer = activate_last

    @staticmethod
    def scale_lb(net, path):
        value = float(net.scale_lb)
        if not (value > 0 and value != float("inf")):
            raise ExportError(path, net, "scale_lb=%r: tdpolicy needs a finite lower bound > 0 on the scale" % value)
        return value

    @staticmethod
    def mapping_of(net):
        """The mapping name of a stand-alone elementwise module or function, or None."""
        if type(net) is nn.Softplus and net.beta == 1.0 and net.threshold == 20.0:
            return "softplus"
        if type(net) is nn.ReLU:
            return "relu"
        if type(net) is nn.Identity:
            return "none"
        if isinstance(net, biased_softplus) or not isinstance(net, nn.Module):
            try:
                return _Walker.mapping_name(net, "")
            except ExportError:
                return None
        return None

    @staticmethod
    def mapping_name(mapping, path):
        """The tensordict.nn.mappings() name that gives `mapping`."""
        if isinstance(mapping, str):
            # tensordict's built-in names and biased_softplus_<bias>[_<min_val>], which the C++
            # registry knows too; a name added with add_custom_mapping exists only in Python.
            pattern = r"biased_softplus(_[-+0-9.eE]+){1,2}"
            if mapping in ("softplus", "exp", "relu", "none", "expln", "biased_softplus") or \
                    re.fullmatch(pattern, mapping):
                mappings(mapping)  # a malformed number fails here
                return mapping
            raise ExportError(path, mapping, "mapping %r is not one of tensordict's built-in mappings (softplus, "
                              "exp, relu, expln, none, biased_softplus_<bias>[_<min_val>]), which the C++ "
                              "registry shares" % mapping)
        builtins = {"softplus", "exp", "relu", "none", "expln"}
        for name, value in _MAPPINGS.items():
            if value is mapping and name in builtins:
                return name
        if mapping is torch.abs:
            return "abs"
        if isinstance(mapping, biased_softplus):
            # biased_softplus(bias, min_val) keeps inv_softplus(bias - min_val): find the shortest
            # decimal bias that gives back the same bits.
            min_val = float(mapping.min_val)
            target = torch.nn.functional.softplus(torch.tensor(float(mapping.bias), dtype=torch.float64)).item() \
                + min_val
            for digits in range(1, 18):
                bias = float("%.*g" % (digits, target))
                if biased_softplus(bias, min_val).bias == mapping.bias:
                    if min_val == 0.01:
                        return "biased_softplus_%r" % bias
                    return "biased_softplus_%r_%r" % (bias, min_val)
        raise ExportError(path, mapping, "not a mapping that tensordict.nn.mappings() names (softplus, exp, "
                          "relu, expln, none, biased_softplus_<bias>[_<min_val>])")

    # ProbabilisticTensorDictModule -> tdpolicy.ProbabilisticModule.
    def probabilistic_module(self, obj, path, overwrites, msg):
        if getattr(obj, "safe", False):
            raise ExportError(path, obj, "safe=True (projection onto a TensorSpec) has no spec field")
        if getattr(obj, "_generator", None) is not None or getattr(obj, "_generator_key", None) is not None:
            raise ExportError(path, obj, "a generator has no spec field (tdpolicy seeds the actor instead)")
        if obj._composite_lp_aggreate_at_init:
            raise ExportError(path, obj, "built under composite_lp_aggregate(True): tdpolicy chooses aggregated "
                              "log-probs when the policy is loaded (ActorOptions.composite_lp_aggregate, tdp "
                              "--lp_aggregate); build the module under tensordict's default, "
                              "set_composite_lp_aggregate(False)")
        if getattr(obj, "cache_dist", False):
            raise ExportError(path, obj, "cache_dist=True has no spec field")
        in_keys = [unravel_key(k) for k in obj.in_keys]
        dist_keys = list(obj.dist_keys)
        leaf = [k if isinstance(k, str) else k[-1] for k in in_keys]
        composite = obj.distribution_class is CompositeDistribution
        if composite or leaf == [k if isinstance(k, str) else k[-1] for k in dist_keys]:
            for key in in_keys:
                msg.in_keys.append(self.read(key, path, obj))
        else:
            for dist_key, key in zip(dist_keys, in_keys):
                binding = msg.in_keys_map.add()
                binding.name = dist_key if isinstance(dist_key, str) else dist_key[-1]
                binding.key = self.read(key, path, obj)
        sample_keys = [unravel_key(k) for k in obj.dist_sample_keys]
        if sample_keys == ["_"]:
            raise ExportError(path, obj, "no out_keys: the spec needs to know where the sample goes")
        kwargs = dict(obj.distribution_kwargs)
        if composite:
            self.composite(obj, kwargs, path, msg.composite)
        else:
            table = _distributions()
            entry = table.get(obj.distribution_class)
            if entry is None:
                hint = ""
                if obj.distribution_class is D.Independent:
                    hint = " (for a diagonal Gaussian use torchrl.modules.IndependentNormal)"
                elif TorchRLTruncatedNormal is not None and obj.distribution_class is TorchRLTruncatedNormal:
                    hint = (" (TorchRL's TruncatedNormal recentres loc on [low, high] and sums over an event "
                            "dim; tdpolicy's truncated_normal is tensordict.nn.distributions.TruncatedNormal)")
                raise ExportError(path, obj, "distribution_class %s.%s is not in tdpolicy's registry (%s)%s"
                                  % (obj.distribution_class.__module__, obj.distribution_class.__qualname__,
                                     ", ".join(sorted({c.__name__ for c in table})), hint))
            name, accepted = entry
            msg.distribution = name
            if name.startswith("masked_"):
                _check_dense_mask(obj, dist_keys, kwargs, path)
            self.distribution_kwargs(obj.distribution_class, kwargs, accepted, path, msg.distribution_kwargs)
        for key in sample_keys:
            msg.out_keys.append(self.write(key, overwrites, path))
        msg.default_interaction_type = InteractionType(obj.default_interaction_type).value
        if obj.return_log_prob:
            msg.return_log_prob = True
            # Log-prob keys are written only when they differ from the default (the sample key
            # + "_log_prob"): tdpolicy derives them from composite_lp_aggregate() at load time,
            # as tensordict does when the module is built.
            suffixed = [unravel_key(tensordict.nn.probabilistic._add_suffix(k, "_log_prob")) for k in sample_keys]
            lp_keys = [unravel_key(k) for k in obj._log_prob_keys] if obj._log_prob_keys is not None else suffixed
            if len(sample_keys) == 1:
                if unravel_key(obj._log_prob_key) != suffixed[0]:
                    msg.log_prob_key = key_text(obj._log_prob_key, path + " log_prob_key")
            elif lp_keys != suffixed:
                if composite:
                    # tensordict 0.13's forward writes a composite's log-probs under
                    # <sample>_log_prob and renames them only in log_prob(): one module, two key
                    # sets, of which a spec can hold one.
                    raise ExportError(path, obj, "log_prob_keys=%s on a CompositeDistribution: tensordict %s "
                                      "writes <sample>_log_prob in forward() and the given keys only in "
                                      "log_prob(), which a spec cannot both express; leave log_prob_keys unset"
                                      % ([key_text(k) for k in lp_keys], tensordict.__version__))
                msg.log_prob_keys.extend(key_text(k, path + " log_prob_keys") for k in lp_keys)
            for key in lp_keys:
                self.write(key, overwrites, path)
        if obj.num_samples is not None:
            msg.num_samples.extend(int(s) for s in obj.num_samples)
        self.probabilistic.append((path, obj, msg))
        return msg

    def distribution_kwargs(self, cls, kwargs, accepted, path, out):
        for pname, value in kwargs.items():
            where = "%s.distribution_kwargs[%r]" % (path, pname)
            if pname not in accepted:
                raise ExportError(where, value, "%s takes no kwarg %r in tdpolicy (it takes %s)"
                                  % (cls.__name__, pname, ", ".join(sorted(accepted)) or "none"))
            target = accepted[pname]
            if target is None or value is None:
                continue  # dropped on purpose (see the table), or the class's default
            if pname == "neg_inf" and value == float("-inf"):
                continue  # the masked distributions' default, which a spec's finite numbers cannot hold
            if pname == "tanh_loc" and cls is IndependentNormal and bool(value):
                raise ExportError(where, value, "TorchRL %s's IndependentNormal ignores tanh_loc when the "
                                  "distribution is built (only update() applies it) while tdpolicy's "
                                  "independent_normal applies it: drop it" % torchrl.__version__)
            self.scalar(value, where, out[target])

    @staticmethod
    def scalar(value, where, out):
        if isinstance(value, torch.Tensor):
            flat = value.detach().reshape(-1)
            if flat.numel() == 0 or value.dim() > 1 or not bool((flat == flat[0]).all()):
                raise ExportError(where, value, "a tensor kwarg of shape %s with different values: the spec "
                                  "holds scalar kwargs only" % (list(value.shape),))
            value = flat[0].item()
        if isinstance(value, bool):
            out.bool_value = value
        elif isinstance(value, int):
            out.int_value = value
        elif isinstance(value, float):
            out.double_value = value
        else:
            raise ExportError(where, value, "not a bool, int, float or one-valued tensor")

    def composite(self, obj, kwargs, path, msg):
        distribution_map = kwargs.pop("distribution_map")
        name_map = {unravel_key(k): v for k, v in (kwargs.pop("name_map", None) or {}).items()}
        extra = {unravel_key(k): v for k, v in (kwargs.pop("extra_kwargs", None) or {}).items()}
        table = _distributions()
        for key, dist_class in distribution_map.items():
            key = unravel_key(key)
            where = "%s.distribution_kwargs['distribution_map'][%r]" % (path, key)
            entry = table.get(dist_class)
            if entry is None or dist_class is CompositeDistribution:
                raise ExportError(where, dist_class, "%s is not in tdpolicy's registry (%s)"
                                  % (getattr(dist_class, "__name__", dist_class),
                                     ", ".join(sorted({c.__name__ for c in table}))))
            part = msg.parts.add()
            part.key = key_text(key, where)
            part.distribution = entry[0]
            if key in name_map:
                part.sample_key = key_text(name_map[key], where + " name_map")
            self.distribution_kwargs(dist_class, dict(extra.pop(key, {})), entry[1],
                                     "%s.distribution_kwargs['extra_kwargs'][%r]" % (path, key), part.kwargs)
        if extra:
            raise ExportError(path, obj, "extra_kwargs for keys the distribution_map does not have: %s"
                              % ", ".join(map(repr, extra)))
        for field in ("log_prob_key", "entropy_key"):
            value = kwargs.pop(field, None)
            if value is not None:
                setattr(msg, field, key_text(value, "%s.distribution_kwargs[%r]" % (path, field)))
        if kwargs:
            raise ExportError(path, obj, "CompositeDistribution kwargs with no spec field: %s" % ", ".join(kwargs))
        return msg


    # ---- value-based actors: QValueModule -> tdpolicy.QValue, EGreedyModule -> tdpolicy.EGreedy ----

    def q_value(self, obj, path, overwrites, msg):
        distributional = isinstance(obj, DistributionalQValueModule)
        self.check_forward(obj, path, DistributionalQValueModule if distributional else QValueModule)
        if obj.action_space == "mult_one_hot":
            raise ExportError(path, obj, "action_space='mult_one_hot': its var_nums has no spec field; use "
                              "one_hot or categorical")
        if obj.action_space not in ("one_hot", "categorical"):
            raise ExportError(path, obj, "action_space=%r: tdpolicy's q_value takes one_hot or categorical "
                              "(TorchRL does not implement binary)" % (obj.action_space,))
        if getattr(obj, "safe", False):
            raise ExportError(path, obj, "safe=True (projection onto the action spec) has no q_value field")
        msg.action_space = obj.action_space
        msg.action_value_key = self.read(obj.action_value_key, path, obj)
        if obj.action_mask_key is not None:
            msg.action_mask_key = self.read(obj.action_mask_key, path, obj)
        if distributional:
            support = obj.support.detach()
            if support.dim() != 1:
                raise ExportError(path, obj, "a support of shape %s; tdpolicy's is one-dimensional [n_atoms]"
                                  % (list(support.shape),))
            to_tensor_proto(support, "%s.support" % path, msg.support)
            self.absorbed.append(self.python_prefix + "support")
        for key in obj.out_keys:
            msg.out_keys.append(self.write(key, overwrites, path))
        return msg

    def egreedy(self, obj, path, overwrites, msg):
        self.check_forward(obj, path, EGreedyModule)
        msg.eps = float(obj.eps)
        msg.action_key = self.read(obj.action_key, path, obj)
        if obj.action_mask_key is not None:
            msg.action_mask_key = self.read(obj.action_mask_key, path, obj)
        spec = obj.spec
        if spec is not None and isinstance(spec, torchrl.data.Composite):
            spec = spec.get(obj.action_key, None)
        if spec is None:
            raise ExportError(path, obj, "no action spec: random actions are drawn from it (pass spec=...)")
        _action_spec(spec, path + ".spec", msg.spec)
        self.absorbed.extend(self.python_prefix + name for name in ("eps", "eps_init", "eps_end"))
        self.write(obj.action_key, overwrites, path)
        return msg


def _folds_into_next(child, following, path):
    """A DistributionalDQNnet (the log-softmax over atoms) right before the
    DistributionalQValueModule reading what it writes: the q_value spec applies that log-softmax
    itself, so the DQNnet writes no module of its own."""
    if DistributionalDQNnet is None or not isinstance(child, DistributionalDQNnet):
        return False
    if type(child).forward is not DistributionalDQNnet.forward:
        raise ExportError(path, child, "overrides DistributionalDQNnet.forward")
    if not isinstance(following, DistributionalQValueModule):
        return False
    keys = [unravel_key(k) for k in child.in_keys]
    if keys != [unravel_key(k) for k in child.out_keys] or keys != [unravel_key(following.action_value_key)]:
        raise ExportError(path, child, "reads %s and writes %s; it folds into the DistributionalQValueModule "
                          "after it only when both are that module's action_value_key %r (an action mask "
                          "would be log-softmaxed too: give DistributionalQValueActor no action_mask_key, or "
                          "make_log_softmax=False)"
                          % (child.in_keys, child.out_keys, following.action_value_key))
    return True


def _action_spec(spec, path, msg):
    """A TorchRL OneHot / Categorical / Bounded spec -> tdpolicy.ActionSpec."""
    data = torchrl.data
    kind = type(spec)
    if kind is data.OneHot:
        msg.one_hot.n = int(spec.space.n)
        default_shape = [int(spec.space.n)]
    elif kind is data.Categorical:
        if int(spec.space.n) < 1:
            raise ExportError(path, spec, "a Categorical spec of undefined cardinality (n=%s)" % spec.space.n)
        msg.categorical.n = int(spec.space.n)
        default_shape = []
    elif isinstance(spec, data.Bounded) and spec.dtype in (torch.float16, torch.bfloat16, torch.float32,
                                                            torch.float64):
        to_tensor_proto(spec.space.low.detach(), path + ".low", msg.bounded.low)
        to_tensor_proto(spec.space.high.detach(), path + ".high", msg.bounded.high)
        default_shape = None
    else:
        raise ExportError(path, spec, "tdpolicy draws random actions from OneHot, Categorical and floating-point "
                          "Bounded specs only")
    shape = [int(s) for s in spec.shape]
    # A spec expanded to batch dims keeps them: written only as the per-environment shape it is.
    if default_shape is None or shape == default_shape:
        msg.shape.extend(shape if default_shape is not None else [])
    msg.dtype = dtype_enum(spec.dtype, path + " dtype")


def _check_dense_mask(obj, dist_keys, kwargs, path):
    names = {k if isinstance(k, str) else k[-1] for k in dist_keys}
    if "indices" in names or "indices" in kwargs:
        raise ExportError(path, obj, "%s with `indices` (the sparse form): tdpolicy's masked distributions take a "
                          "dense boolean mask, in_keys={..., \"mask\": <key>}" % obj.distribution_class.__name__)
    if "mask" not in names:
        raise ExportError(path, obj, "%s reads its mask from no key: pass in_keys={\"logits\": ..., \"mask\": "
                          "<the action mask's key>}" % obj.distribution_class.__name__)


def _ensemble_expands_input(obj, path):
    """tensordict's EnsembleModule keeps expand_input only in the in_dims of its torch.vmap
    wrapper ((None, 0): every copy reads the same input; 0: the input has the copies dim). Read
    there, by name, as torch 2.11's vmap closure holds it."""
    wrapper = obj.vmapped_forward
    try:
        cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
        in_dims = cells["in_dims"]
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ExportError(path, obj, "cannot read expand_input from this torch's vmap wrapper (no in_dims "
                          "in its closure); tdpolicy reads it as torch 2.11 keeps it")
    if in_dims == (None, 0):
        return True
    if in_dims == 0:
        return False
    raise ExportError(path, obj, "vmap in_dims %r is neither expand_input=True's (None, 0) nor False's 0"
                      % (in_dims,))


# ---- running the module in Python ---------------------------------------------------------------

def _python_outputs(module, inputs, interaction=InteractionType.DETERMINISTIC):
    with torch.no_grad(), set_interaction_type(interaction):
        return module(inputs.clone())


def _score(module, td):
    """Like the C++ self test's forward_scoring: runs the tree on td, except that a probabilistic
    module whose samples td holds keeps them and writes their log-probs."""
    if isinstance(module, TensorDictSequential):
        for child in (module.module.values() if isinstance(module.module, nn.ModuleDict) else module.module):
            td = _score(child, td)
        return td
    if isinstance(module, ProbabilisticTensorDictModule):
        samples = [unravel_key(k) for k in module.dist_sample_keys]
        if all(k in td.keys(True, True) for k in samples):
            if module.return_log_prob:
                lp = module.log_prob(td)
                if isinstance(lp, TensorDictBase):
                    td.update(lp)
                else:
                    td.set(module.log_prob_key, lp)
            return td
    return module(td)


def _example_td(example, where="example"):
    if not isinstance(example, TensorDictBase):
        raise TypeError("%s: expected a TensorDict of the policy's inputs, got %s" % (where, type(example).__name__))
    return example


def make_self_test(module, inputs, actions, out_keys, atol, rtol, out=None):
    """A tdpolicy.SelfTest: Python's deterministic outputs at out_keys, and the log-probs of
    `actions` (a TensorDict at the sample keys, or None)."""
    test = out if out is not None else spec_pb2.SelfTest()
    for key, value in leaves(inputs):
        named = test.inputs.add()
        named.name = key_text(key)
        to_tensor_proto(value, "self test input %r" % (key,), named.tensor)
    outputs = _python_outputs(module, inputs)
    for key in out_keys:
        if key not in outputs.keys(True, True):
            raise ExportError("actor", module, "its out_keys list %r, which it did not write on the example"
                              % (key,))
        named = test.expected_outputs.add()
        named.name = key_text(key)
        to_tensor_proto(outputs.get(key), "output %r" % (key,), named.tensor)
    if actions is not None and len(actions.keys()):
        given = inputs.clone().update(actions.clone())
        before = {k for k, _ in leaves(given)}
        with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
            scored = _score(module, given)
        lp_keys = [k for k, _ in leaves(scored)
                   if k not in before and key_text(k).endswith("_log_prob")]
        if lp_keys:
            for key, value in leaves(actions):
                named = test.actions.add()
                named.name = key_text(key)
                to_tensor_proto(value, "action %r" % (key,), named.tensor)
            for key in lp_keys:
                named = test.expected_log_probs.add()
                named.name = key_text(key)
                to_tensor_proto(scored.get(key), "log-prob %r" % (key,), named.tensor)
    test.atol = atol
    test.rtol = rtol
    return test


def sample_keys_of(walker):
    keys = []
    for _, obj, _ in walker.probabilistic:
        keys.extend(unravel_key(k) for k in obj.dist_sample_keys)
    return keys


def _actions_for(module, inputs, example, sample_keys, seed):
    """The given actions of the self test: the example's entries at the sample keys, else one
    RANDOM draw of the module (seeded, without touching the caller's random state)."""
    have = [k for k in sample_keys if k in example.keys(True, True)]
    if have:
        return example.select(*have)
    if not sample_keys:
        return None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        drawn = _python_outputs(module, inputs, InteractionType.RANDOM)
    return drawn.select(*sample_keys)


# ---- export ---------------------------------------------------------------------------------

def export(module, path, example, *, parameters="embedded", self_test=True, name=None, version="1",
           description=None, atol=1e-6, rtol=1e-6, action_seed=0):
    """Writes `module` as a tdpolicy.PolicySpec at `path` and returns the PolicySpec message.

    module: a TensorDictModule / TensorDictSequential / ProbabilisticTensorDictModule /
        ProbabilisticTensorDictSequential tree (TorchRL's Actor and ProbabilisticActor are those).
    path: .pbtxt (text), .pb (binary) or .json (JSON), as the C++ loader reads them.
    example: a TensorDict holding every input the module reads (recurrent states included), with
        batch dims in front; it fixes the declared input shapes and dtypes and is the self test's
        input. Entries at the module's sample keys, if any, are the self test's given actions
        (otherwise one seeded RANDOM draw of the module is).
    parameters: "embedded" (one self-contained file) or "file" (a binary tdpolicy.Parameters file
        next to the spec, `<stem>.parameters.pb`, named by the spec's parameters_file).
    self_test: record what Python computes on `example` (deterministic outputs, log-probs of the
        given actions) with tolerances atol / rtol, so `tdp validate` and load_policy(...,
        run_self_tests) prove the C++ side computes the same.
    Raises ExportError naming the submodule's path and type for anything the spec cannot express.
    """
    fmt = spec_format(path)
    if parameters not in ("embedded", "file"):
        raise ValueError("parameters=%r: expected \"embedded\" or \"file\"" % (parameters,))
    if not isinstance(module, TensorDictModuleBase):
        raise ExportError("actor", module, "expected a tensordict.nn module (TensorDictModule, "
                          "TensorDictSequential, ProbabilisticTensorDictModule/Sequential, TorchRL Actor)")
    example = _example_td(example)
    folder = os.path.dirname(os.path.abspath(path))
    stem = os.path.basename(path)
    stem = stem[:stem.rfind(".")] if "." in stem else stem
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", stem):
        raise ValueError("%s: the file name may hold letters, digits, '_', '-' and '.' only" % path)

    was_training = module.training
    module.eval()
    try:
        # Run first: lazy layers materialize, and a module that cannot run on the example fails
        # here with Python's own error rather than later in C++.
        _python_outputs(module, example)
        walker = _Walker(module, example, stem)
        spec = spec_pb2.PolicySpec()
        spec.name = name if name is not None else stem
        spec.version = version
        walker.module(module, "actor", out=spec.module)
        python = dict(module.named_parameters())
        python.update(dict(module.named_buffers()))
        mapped = [p for _, p, _ in walker.parameters] + walker.absorbed
        missing = sorted(set(python) - set(mapped))
        if missing:
            raise ExportError("actor", module, "parameters or buffers the spec does not hold: %s" % ", ".join(missing))
        dupes = sorted({c for c, _, _ in walker.parameters if [x for x, _, _ in walker.parameters].count(c) > 1})
        if dupes:
            raise ExportError("actor", module, "parameters mapped twice: %s" % ", ".join(dupes))

        batch_dims = example.batch_dims
        for key in walker.inputs:
            value = example.get(key)
            entry = spec.inputs.add()
            entry.key = key_text(key)
            entry.shape.extend(int(s) for s in value.shape[batch_dims:])
            entry.dtype = dtype_enum(value.dtype, "example entry %r" % (key,))
        inputs = example.select(*walker.inputs) if walker.inputs else example.empty()
        out_keys = [unravel_key(k) for k in module.out_keys]
        spec.output_keys.extend(key_text(k, "actor out_key") for k in out_keys)
        description = description if description is not None else _describe(module)
        spec.description = "exported by tdpolicy.export (torch %s, tensordict %s%s): %s" % (
            torch.__version__, tensordict.__version__,
            ", torchrl %s" % torchrl.__version__ if torchrl is not None else "", description)

        params = spec_pb2.Parameters()
        for cpp_name, _, value in walker.parameters:
            named = params.tensors.add()
            named.name = cpp_name
            to_tensor_proto(value, "parameter %r" % cpp_name, named.tensor)
        parameters_file = None
        if parameters == "embedded":
            spec.parameters.CopyFrom(params)
        else:
            parameters_file = stem + ".parameters.pb"
            spec.parameters_file = parameters_file

        if self_test:
            actions = _actions_for(module, inputs, example, sample_keys_of(walker), action_seed)
            make_self_test(module, inputs, actions, out_keys, atol, rtol, spec.self_tests.add())
    finally:
        module.train(was_training)

    os.makedirs(folder, exist_ok=True)
    for filename, script in walker.scripts:
        torch.jit.save(script, os.path.join(folder, filename))
    if parameters_file is not None:
        _write_atomic(os.path.join(folder, parameters_file), params.SerializeToString(deterministic=True))
    _write_atomic(path, serialize(spec, fmt))
    return spec


def _describe(module):
    return type(module).__name__


def serialize(spec, fmt):
    if fmt == "text":
        versions = "torch %s, tensordict %s" % (torch.__version__, tensordict.__version__)
        header = ("# proto-file: proto/tdpolicy/spec.proto\n# proto-message: tdpolicy.PolicySpec\n"
                  "# Written by tdpolicy.export (%s); re-export rather than edit.\n" % versions)
        return (header + text_format.MessageToString(spec)).encode()
    if fmt == "json":
        return (json_format.MessageToJson(spec, preserving_proto_field_name=True, sort_keys=True) + "\n").encode()
    return spec.SerializeToString(deterministic=True)


def _write_atomic(path, data):
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)
