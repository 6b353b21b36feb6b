"""tdpolicy.export: a tensordict / TorchRL module tree -> a tdpolicy.PolicySpec file.

The walk maps each tensordict object to its tdpolicy.Module (TensorDictSequential -> sequential,
ProbabilisticTensorDictSequential / ProbabilisticActor -> probabilistic_sequential,
TensorDictModule / Actor -> network, ProbabilisticTensorDictModule -> probabilistic, TorchRL's
LSTMModule / GRUModule -> lstm / gru, their keys unchanged) and each
network to its tdpolicy.Network (an nn.Sequential of Linear / LayerNorm / activation layers, such
as TorchRL's MLP -> mlp; nn.Linear -> linear; nn.GRUCell -> gru_cell; tdpolicy.LSTMCell ->
lstm_cell; a ScriptModule -> torchscript; NormalParamExtractor; AddStateIndependentNormalScale;
a tensordict mapping or softplus/ReLU/Identity module -> mapping). Anything the spec cannot express
raises ExportError naming the submodule's path and type: nothing is approximated. With
fallback="aoti", a network no kind expresses is compiled instead (torch.export + AOTInductor, a .pt2
file next to the spec: _aoti.py); TorchScript modules still export as torchscript.

Parameters are written under the names the C++ loader's named_parameters() gives the same tree
(an Mlp keeps its layers in `layers`, a GruCell its torch cell in `cell`, a
probabilistic_sequential numbers its children), and every parameter and buffer of the module must
be written exactly once.
"""

import os
import re
import shutil
import tempfile

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

from tdpolicy import _aoti
from tdpolicy._errors import ExportError
from tdpolicy._modules import LSTMCell
from tdpolicy._proto import json_format, spec_pb2, tensor_pb2, text_format
from tdpolicy._tensors import dtype_enum, key_text, leaves, tensor_array, to_tensor_proto

try:  # TorchRL is optional: without it, its classes are simply never met.
    import torchrl
    from torchrl.modules import MLP as TorchRLMLP
    from torchrl.modules import MultiAgentMLP as TorchRLMultiAgentMLP
    from torchrl.modules import ConvNet as TorchRLConvNet
    from torchrl.modules import DdpgMlpActor as TorchRLDdpgMlpActor
    from torchrl.modules import DuelingCnnDQNet as TorchRLDuelingCnnDQNet
    from torchrl.modules.models.models import DuelingMlpDQNet as TorchRLDuelingMlpDQNet
    from torchrl.modules.models.utils import SquashDims as TorchRLSquashDims
    from torchrl.modules.models.utils import Squeeze2dLayer as TorchRLSqueeze2dLayer
    from torchrl.modules.models.utils import SqueezeLayer as TorchRLSqueezeLayer
    from torchrl.modules.distributions import (
        Delta as TorchRLDelta,
        IndependentNormal,
        OneHotCategorical as TorchRLOneHotCategorical,
        TanhNormal,
    )
    from torchrl.modules.distributions import TruncatedNormal as TorchRLTruncatedNormal
    from torchrl.modules import GRUModule, LSTMModule
    from torchrl.modules.tensordict_module.rnn import GRU as TorchRLGRU, LSTM as TorchRLLSTM
    from torchrl.modules.distributions import TanhDelta
    from torchrl.modules import TanhModule as TorchRLTanhModule
    from torchrl.data import Bounded as TorchRLBounded, Categorical as TorchRLCategorical, OneHot as TorchRLOneHot
    from torchrl.modules.distributions import MaskedCategorical, MaskedOneHotCategorical
    from torchrl.modules import DistributionalQValueActor, DistributionalQValueModule, EGreedyModule, QValueModule
    from torchrl.modules.tensordict_module.common import DistributionalDQNnet
except ImportError:  # pragma: no cover
    torchrl = None
    TorchRLMLP = TorchRLMultiAgentMLP = IndependentNormal = TanhNormal = TorchRLDelta = TanhDelta = None
    TorchRLOneHotCategorical = TorchRLTruncatedNormal = TorchRLTanhModule = None
    TorchRLBounded = TorchRLCategorical = TorchRLOneHot = None
    MaskedCategorical = MaskedOneHotCategorical = None
    QValueModule = DistributionalQValueModule = DistributionalQValueActor = EGreedyModule = None
    DistributionalDQNnet = None
    GRUModule = LSTMModule = TorchRLGRU = TorchRLLSTM = None
    TorchRLConvNet = TorchRLDdpgMlpActor = TorchRLDuelingCnnDQNet = TorchRLDuelingMlpDQNet = None
    TorchRLSquashDims = TorchRLSqueeze2dLayer = TorchRLSqueezeLayer = None

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
            TanhDelta: ("tanh_delta", {"low": "low", "high": "high", "event_dims": "event_dims", "atol": "atol",
                                       "rtol": "rtol", "safe": "safe"}),
            # TorchRL's own TruncatedNormal (an Independent over the action dim, with tanh_loc),
            # not tensordict's truncated_normal.
            TorchRLTruncatedNormal: ("torchrl_truncated_normal", {"upscale": "upscale", "low": "low", "high": "high",
                                                                  "tanh_loc": "tanh_loc"}),
            # The mask is a parameter read from a key (in_keys={"logits": ..., "mask": ...}).
            # padding_value and padding_side only apply to the sparse forms, which are refused
            # below; grad_method only chooses how rsample's gradients flow.
            MaskedCategorical: ("masked_categorical", {"neg_inf": "neg_inf", "use_cross_entropy": "use_cross_entropy",
                                                       "padding_value": None, "padding_side": None}),
            MaskedOneHotCategorical: ("masked_one_hot_categorical", {"neg_inf": "neg_inf", "padding_value": None,
                                                                     "grad_method": None}),
        })
    return table


# Registry kwargs that the C++ registry also takes as tensors (it passes them as parameters of
# the same name): per-dimension or per-agent bounds.
_TENSOR_KWARGS = {
    "tanh_normal": {"low", "high"},
    "tanh_delta": {"low", "high"},
    "torchrl_truncated_normal": {"low", "high"},
    "truncated_normal": {"a", "b"},
}


def _layer_activations():
    """torch.nn activation classes -> (tdpolicy.Activation name, {argument: torch's default}); an
    argument is written only when it differs from the default. nn.Dropout is the identity: the
    exporter runs and exports the module in eval mode, where dropout does nothing."""
    return {
        nn.Tanh: ("tanh", {}),
        nn.ReLU: ("relu", {}),
        nn.ELU: ("elu", {"alpha": 1.0}),
        nn.GELU: ("gelu", {"approximate": "none"}),
        nn.LeakyReLU: ("leaky_relu", {"negative_slope": 0.01}),
        nn.Sigmoid: ("sigmoid", {}),
        nn.Softplus: ("softplus", {"beta": 1.0, "threshold": 20.0}),
        nn.SiLU: ("silu", {}),
        nn.Identity: ("identity", {}),
        nn.Dropout: ("identity", {}),
    }


def _mlp_activations():
    """tdpolicy.Mlp's activations, with the constructor arguments it uses (torch's defaults): the
    activation layers' table without SiLU (the mlp kind has none) and Dropout (not an activation)."""
    table = _layer_activations()
    del table[nn.SiLU], table[nn.Dropout]
    return table


def _type_name(obj):
    return "%s.%s" % (type(obj).__module__, type(obj).__qualname__)


def _inherits_forward(obj, base):
    """True when obj's class does not override base.forward (a subclass that computes something
    else would be exported as base silently)."""
    return type(obj).forward is base.forward


# ---- the walk ----------------------------------------------------------------------------------

class _Walker:
    def __init__(self, root, example, name, packager=None, recorded=None):
        self.root = root
        # fallback="aoti": what compiles the networks no kind expresses, and the inputs each
        # TensorDictModule received on the example (by id); None without the fallback.
        self.packager = packager
        self.recorded = recorded or {}
        self.packaged = []  # Python names of the parameters and buffers inside AOTInductor packages
        self.example = example
        self.example_keys = {k for k, _ in leaves(example)}
        self.name = name
        self.available = {}  # key -> who wrote it ("inputs" or a module path)
        self.inputs = []  # keys read before any module writes them, in reading order
        self.parameters = []  # (C++ name, Python name, tensor)
        self.scripts = []  # (file name, ScriptModule)
        self.probabilistic = []  # (path, ProbabilisticTensorDictModule, its spec message)
        self.input_shapes = {}  # id(nn.Module) -> the shape of its first input on the example
        self.batch_dims = example.batch_dims
        self.layer_batch_dims = None  # the batch dims the layers being walked see, when not batch_dims
        self.in_sequence = False  # walking the layers of an nn.Sequential (arity errors say so)
        self.held = []  # Python buffers the spec holds as module fields (TanhModule's bounds, eps, a support)
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
        for pname, value in _named_tensors(module):
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
                self.held.append(self.python_prefix + "support")
            kind.partial_tolerant = bool(obj.partial_tolerant)
            kind.selected_out_keys.extend(self.selected_out_keys(obj, path))
            return msg
        overwrites = []
        safe = spec_pb2.Module()
        if getattr(obj, "safe", False):
            _projections(obj, path, safe)
        saved = self.cpp_prefix
        if len(safe.projections) and not isinstance(obj, ProbabilisticTensorDictModule):
            # The C++ side wraps a projected module in a SafeModule, whose child is "module".
            self.cpp_prefix += "module."
        try:
            if isinstance(obj, ProbabilisticTensorDictModule):
                self.check_forward(obj, path, ProbabilisticTensorDictModule)
                self.probabilistic_module(obj, path, overwrites, msg.probabilistic)
            elif isinstance(obj, TensorDictModule):
                self.check_forward(obj, path, TensorDictModule)
                self.network_module(obj, path, overwrites, msg.network)
            elif TorchRLTanhModule is not None and isinstance(obj, TorchRLTanhModule):
                self.check_forward(obj, path, TorchRLTanhModule)
                _tanh_module(self, obj, path, overwrites, msg.tanh)
            elif _recurrent_kind(obj) is not None:
                self.recurrent_module(obj, path, overwrites, msg)
            elif QValueModule is not None and isinstance(obj, QValueModule):
                self.q_value(obj, path, overwrites, msg.q_value)
            elif EGreedyModule is not None and isinstance(obj, EGreedyModule):
                self.egreedy(obj, path, overwrites, msg.egreedy)
            elif DistributionalDQNnet is not None and isinstance(obj, DistributionalDQNnet):
                raise ExportError(path, obj, "the log-softmax over atoms exports only right before the "
                                  "DistributionalQValueModule that reads its output (as DistributionalQValueActor "
                                  "builds them), whose q_value spec applies it")
            else:
                raise ExportError(path, obj, "not a TensorDictModule, TensorDictSequential, "
                                  "ProbabilisticTensorDictModule or ProbabilisticTensorDictSequential "
                                  "(or a TorchRL Actor / ProbabilisticActor built on them)")
        finally:
            self.cpp_prefix = saved
        msg.overwrite_keys.extend(overwrites)
        msg.projections.extend(safe.projections)
        return msg

    # TorchRL's LSTMModule / GRUModule -> tdpolicy.RecurrentModule (Module.lstm / Module.gru): one
    # step per call, TorchRL's keys as they are (the state read at K, written at ("next", K)).
    def recurrent_module(self, obj, path, overwrites, msg):
        cls, attribute, network_classes, states = _recurrent_kind(obj)
        self.check_forward(obj, path, cls)
        net = getattr(obj, attribute)
        name = cls.__name__
        if obj.recurrent_mode:
            raise ExportError(path, obj, "recurrent mode is on (default_recurrent_mode=True, or inside "
                              "set_recurrent_mode(True)): it runs over a time dim, which training uses; the "
                              "exported actor steps once per call, as %s does outside recurrent mode: export "
                              "the acting policy, built without default_recurrent_mode" % name)
        if type(net) not in network_classes:
            raise ExportError(path + "." + attribute, net, "%s wraps %s; tdpolicy's %s runs torch's %s (or "
                              "TorchRL's python_based one)" % (name, type(net).__name__, attribute,
                                                                network_classes[0].__name__))
        if net.bidirectional:
            raise ExportError(path + "." + attribute, net, "bidirectional=True has no spec field (a policy "
                              "stepping once per call runs forward only); use bidirectional=False")
        if getattr(net, "proj_size", 0):
            raise ExportError(path + "." + attribute, net, "proj_size=%d has no spec field; use proj_size=0"
                              % net.proj_size)
        if not net.batch_first:
            raise ExportError(path + "." + attribute, net, "batch_first=False: %s needs batch_first=True" % name)
        # dropout acts only in training; the exported policy is the module in eval mode.
        kind = msg.lstm if attribute == "lstm" else msg.gru
        kind.input_size = net.input_size
        kind.hidden_size = net.hidden_size
        kind.num_layers = net.num_layers
        kind.no_bias = not net.bias
        in_keys, out_keys = list(obj.in_keys), list(obj.out_keys)
        if len(in_keys) != states + 2 or unravel_key(in_keys[-1]) != "is_init" or len(out_keys) != states + 1:
            raise ExportError(path, obj, "in_keys %r / out_keys %r are not %s's (input, %d state(s), is_init) / "
                              "(output, %d next state(s))" % (in_keys, out_keys, name, states, states))
        # The input must exist; the states and is_init are declared by the example (export adds
        # zeros / false where it lacks them), or written by an earlier module.
        kind.in_keys.append(self.read(in_keys[0], path, obj))
        for key in in_keys[1:]:
            kind.in_keys.append(self.read(key, path, obj))
        for key in out_keys:
            kind.out_keys.append(self.write(key, overwrites, path))
        self.add_parameters(obj, self.python_prefix, self.cpp_prefix)

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
        if getattr(obj, "inplace", True) is not True:
            raise ExportError(path, obj, "inplace=%r has no spec field (only the default, True)" % (obj.inplace,))
        for key in obj.in_keys:
            msg.in_keys.append(self.read(key, path, obj))
        first = len(self.parameters)
        method = getattr(obj, "method", None)
        try:
            self.network(obj.module, path + ".module", method, len(obj.in_keys), len(obj.out_keys), msg.network)
        except ExportError as error:
            if self.packager is None:
                raise _aoti.with_fallback_hint(error)
            del self.parameters[first:]
            msg.network.Clear()
            self.packager.package(obj, obj.module, path + ".module", method, self.recorded.get(id(obj)), msg.network)
            python = self.python_prefix + "module."
            self.packaged.extend(python + name for name, _ in
                                 _named_tensors(obj.module))
        for key in obj.out_keys:
            msg.out_keys.append("_" if key == "_" else self.write(key, overwrites, path))
        return msg

    def arity(self, net, path, n_in, n_out, want_in, want_out, what):
        if (want_in is not None and n_in != want_in) or n_out != want_out:
            if self.in_sequence:
                raise ExportError(path, net, "%s reads %s tensor(s) and writes %d; this layer of an nn.Sequential "
                                  "reads %d and must write %d (only the last layer writes several)"
                                  % (what, want_in, want_out, n_in, n_out))
            raise ExportError(path, net, "%s reads %s key(s) and writes %d; the TensorDictModule has %d "
                              "in_keys and %d out_keys" % (what, want_in, want_out, n_in, n_out))

    def network(self, net, path, method, n_in, n_out, msg, python=None, cpp=None):
        """Writes `net` (read with n_in tensors, writing n_out) into the tdpolicy.Network `msg`;
        its parameters are `python`<name> in Python and `cpp`<name> in C++ (by default those of
        the TensorDictModule being walked: "<prefix>module.")."""
        cpp = self.cpp_prefix + "module." if cpp is None else cpp
        python = self.python_prefix + "module." if python is None else python
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
            self.sequential(net, path, n_in, n_out, python, cpp, msg)
            return
        if TorchRLMultiAgentMLP is not None and type(net) is TorchRLMultiAgentMLP:
            self.multi_agent_mlp(net, path, n_in, n_out, python, cpp, msg.multi_agent_mlp)
            return
        mapping = self.mapping_of(net)
        if mapping is not None:
            self.arity(net, path, n_in, n_out, 1, 1, "a mapping")
            msg.mapping.name = mapping
            return
        if self.torchrl_network(net, path, n_in, n_out, python, cpp, msg) or \
                self.layer(net, path, n_in, n_out, msg, python, cpp):
            return
        raise ExportError(path, net, "no tdpolicy.Network counterpart (an nn.Sequential of exportable layers "
                          "such as TorchRL's MLP or ConvNet: mlp or sequence; linear; conv2d; layer_norm; "
                          "activations; nn.Flatten; nn.GRUCell; tdpolicy.LSTMCell; a TorchScript module; "
                          "NormalParamExtractor; AddStateIndependentNormalScale; a tensordict mapping; "
                          "TorchRL's MultiAgentMLP, DdpgMlpActor, DuelingCnnDQNet and DuelingMlpDQNet)")

    def mlp(self, seq, path, n_in, n_out, python, cpp, msg):
        """Linear, ([LayerNorm,] activation, Linear)*, [activation]: tdpolicy.Mlp's layer order, so
        the layer indices (and parameter names under `layers.`) are the same in C++."""
        self.arity(seq, path, n_in, n_out, 1, 1, "an mlp")
        layers = list(seq._modules.values())  # a module used twice (tied) at each place: children() dedups
        names = list(seq._modules)
        if names != [str(i) for i in range(len(layers))]:
            raise ExportError(path, seq, "layers must be numbered 0..n-1, got %s" % names)
        activations = _mlp_activations()

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

    def multi_agent_mlp(self, net, path, n_in, n_out, python, cpp, msg):
        """TorchRL's MultiAgentMLP: the agents' MLP read from its (parameter-less) template
        `_empty_net` as an mlp; the parameters, TorchRL's vmapped TensorDict "params.<layer>.<name>"
        ([n_agents, ...] unless share_params), under the same names in C++."""
        self.arity(net, path, n_in, n_out, None, 1, "a multi_agent_mlp")
        if not net.use_td_params:
            raise ExportError(path, net, "use_td_params=False: tdpolicy reads the agents' parameters from the "
                              "params TensorDict (the default, use_td_params=True)")
        if net.n_agent_inputs is None:
            raise ExportError(path, net, "n_agent_inputs=None (lazy): pass n_agent_inputs")
        before = len(self.parameters)
        self.mlp(net._empty_net, path + "._empty_net", 1, 1, "", "", msg.mlp)
        del self.parameters[before:]  # the template holds no parameters of its own
        if msg.mlp.layer_norm:
            raise ExportError(path, net, "a norm_class in the agents' MLP: tdpolicy's multi_agent_mlp has none")
        msg.n_agents = int(net.n_agents)
        msg.n_agent_inputs = int(net.n_agent_inputs)
        msg.n_agent_outputs = int(net.n_agent_outputs)
        msg.centralized = bool(net.centralized)
        msg.share_params = bool(net.share_params)
        self.add_parameters(net, python, cpp)
    # ---- sequences of layers: nn.Sequential, TorchRL's ConvNet and the models built on them ----

    def sequential(self, seq, path, n_in, n_out, python, cpp, msg):
        """An nn.Sequential (TorchRL's MLP among them): mlp when it is tdpolicy.Mlp's layer pattern
        (the fused plan's fast path), else a sequence of layers. TorchRL's MLP with a tuple
        out_features (its output viewed as [..., *out_features]) is a sequence of that network
        (parameters under "layers.0.") and an unflatten."""
        if TorchRLMLP is not None and isinstance(seq, TorchRLMLP) and getattr(seq, "_reshape_out", False):
            self.arity(seq, path, n_in, n_out, None, 1, "an MLP with a tuple out_features")
            sizes = [int(s) for s in seq.out_features]
            inner = msg.sequence.layers.add()
            if n_in == 1:
                try:
                    self.mlp(seq, path, n_in, 1, python, cpp + "layers.0.", inner.mlp)
                except ExportError:
                    inner.ClearField("mlp")
            if not inner.HasField("mlp"):
                self.sequence(seq, path, n_in, 1, python, cpp + "layers.0.", inner.sequence)
            msg.sequence.layers.add().unflatten.sizes.extend(sizes)
            return
        if n_in == 1 and n_out == 1:
            try:
                self.mlp(seq, path, n_in, n_out, python, cpp, msg.mlp)  # adds parameters only on success
                return
            except ExportError:
                msg.ClearField("mlp")
        self.sequence(seq, path, n_in, n_out, python, cpp, msg.sequence)

    def sequence(self, seq, path, n_in, n_out, python, cpp, msg, batch_dims=None):
        """Each child of `seq` as one layer of a tdpolicy.Sequence: layer i's parameters are
        `python`<i>.<name> and `cpp`layers.<i>.<name>. TorchRL's MLP reading several tensors
        concatenates them first: a cat layer in front. batch_dims: the batch dims the layers
        see (a ConvNet joins them into one)."""
        layers = list(seq._modules.items())
        if not layers:
            raise ExportError(path, seq, "an empty nn.Sequential")
        names = [n for n, _ in layers]
        if names != [str(i) for i in range(len(layers))]:
            raise ExportError(path, seq, "layers must be numbered 0..n-1, got %s" % names)
        first = 0
        if n_in != 1:
            if not (TorchRLMLP is not None and isinstance(seq, TorchRLMLP)) or n_in < 1:
                raise ExportError(path, seq, "an nn.Sequential reads one tensor; the TensorDictModule has %d in_keys"
                                  % n_in)
            msg.layers.add().cat.SetInParent()
            first = 1
        saved = self.layer_batch_dims, self.in_sequence
        if batch_dims is not None:
            self.layer_batch_dims = batch_dims
        self.in_sequence = True
        try:
            for i, (_, layer) in enumerate(layers):
                last = i == len(layers) - 1
                layer_path = "%s.%d" % (path, i)
                layer_msg = msg.layers.add()
                layer_in = 1 if (i > 0 or first) else n_in
                layer_out = n_out if last else 1
                layer_python, layer_cpp = python + "%d." % i, cpp + "layers.%d." % (i + first)
                if not self.layer(layer, layer_path, layer_in, layer_out, layer_msg, layer_python, layer_cpp):
                    self.network(layer, layer_path, None, layer_in, layer_out, layer_msg, layer_python, layer_cpp)
        finally:
            self.layer_batch_dims, self.in_sequence = saved

    def torchrl_network(self, net, path, n_in, n_out, python, cpp, msg):
        """TorchRL's models that are sequences or compositions of exportable networks; False for
        anything else."""
        if torchrl is None:
            return False
        kind = type(net)
        if kind is TorchRLConvNet:
            self.arity(net, path, n_in, n_out, 1, 1, "a ConvNet")
            # ConvNet.forward joins the batch dims into one around its layers.
            self.sequence(net, path, 1, 1, python, cpp, msg.sequence, batch_dims=min(self.current_batch_dims(), 1))
            return True
        if kind is TorchRLDdpgMlpActor:
            self.arity(net, path, n_in, n_out, 1, 1, "a DdpgMlpActor")
            self.network(net.mlp, path + ".mlp", None, 1, 1, msg, python + "mlp.", cpp)
            return True
        if kind in (TorchRLDuelingCnnDQNet, TorchRLDuelingMlpDQNet):
            self.arity(net, path, n_in, n_out, 1, 1, "a dueling network (%s)" % kind.__name__)
            for part in ("features", "advantage", "value"):
                self.network(getattr(net, part), "%s.%s" % (path, part), None, 1, 1, getattr(msg.dueling, part),
                             python + part + ".", cpp + part + ".")
            return True
        return False

    def current_batch_dims(self):
        return self.batch_dims if self.layer_batch_dims is None else self.layer_batch_dims

    def input_shape(self, net, path):
        shape = self.input_shapes.get(id(net))
        if shape is None:
            raise ExportError(path, net, "did not run on the example, so the dims it joins are unknown")
        return shape

    def layer(self, net, path, n_in, n_out, msg, python=None, cpp=None):
        """torch.nn's activations, LayerNorm, Conv2d, Flatten, Unflatten (of the last dim) and
        TorchRL's SquashDims / SqueezeLayer as their network kinds; False for anything else."""
        cpp = self.cpp_prefix + "module." if cpp is None else cpp
        python = self.python_prefix + "module." if python is None else python
        kind = type(net)
        activation = _layer_activations().get(kind)
        if activation is not None:
            self.arity(net, path, n_in, n_out, 1, 1, "an activation")
            name, arguments = activation
            msg.activation.name = name
            for attr, default in arguments.items():
                value = getattr(net, attr)
                if value != default:
                    setattr(msg.activation, attr, value)
            return True
        if kind is nn.LayerNorm:
            self.arity(net, path, n_in, n_out, 1, 1, "a layer_norm")
            if net.elementwise_affine and net.bias is None:
                raise ExportError(path, net, "bias=False with elementwise_affine: tdpolicy's layer_norm has a weight "
                                  "and a bias, or neither (elementwise_affine=False)")
            msg.layer_norm.normalized_shape.extend(int(s) for s in net.normalized_shape)
            msg.layer_norm.eps = float(net.eps)
            msg.layer_norm.no_affine = not net.elementwise_affine
            self.add_parameters(net, python, cpp)
            return True
        if kind is nn.Conv2d:
            self.arity(net, path, n_in, n_out, 1, 1, "a conv2d")
            self.conv2d(net, path, msg.conv2d)
            self.add_parameters(net, python, cpp)
            return True
        if kind is nn.Flatten:
            self.arity(net, path, n_in, n_out, 1, 1, "a flatten")
            rank = len(self.input_shape(net, path))
            start, end = net.start_dim % rank, net.end_dim % rank
            if end != rank - 1:
                raise ExportError(path, net, "end_dim=%d: tdpolicy's flatten joins the last dims" % net.end_dim)
            self.flatten(net, path, rank - start, rank, msg)
            return True
        if kind is nn.Unflatten:
            self.arity(net, path, n_in, n_out, 1, 1, "an unflatten")
            if not isinstance(net.dim, int):
                raise ExportError(path, net, "a named dim %r: tdpolicy's unflatten splits the last dim" % (net.dim,))
            if net.dim != -1 and net.dim % len(self.input_shape(net, path)) != len(self.input_shape(net, path)) - 1:
                raise ExportError(path, net, "dim=%d: tdpolicy's unflatten splits the last dim (dim=-1)" % net.dim)
            sizes = [int(s) for s in net.unflattened_size]
            if any(s < 1 for s in sizes):
                raise ExportError(path, net, "unflattened_size=%r: tdpolicy's unflatten takes the sizes, each "
                                  "positive (no -1)" % (tuple(net.unflattened_size),))
            msg.unflatten.sizes.extend(sizes)
            return True
        if kind is TorchRLSquashDims:
            self.arity(net, path, n_in, n_out, 1, 1, "a flatten (SquashDims)")
            self.flatten(net, path, int(net.ndims_in), len(self.input_shape(net, path)), msg)
            return True
        if kind in (TorchRLSqueezeLayer, TorchRLSqueeze2dLayer):
            # Python raised on the example unless these dims are 1: joining them to the dim before
            # gives the same tensor.
            self.arity(net, path, n_in, n_out, 1, 1, "a flatten (SqueezeLayer)")
            dims = sorted(int(d) for d in net.dims)
            if dims != list(range(-len(dims), 0)):
                raise ExportError(path, net, "dims=%s: tdpolicy squeezes the last dims only (a flatten of them "
                                  "into the dim before)" % (list(net.dims),))
            self.flatten(net, path, len(dims) + 1, len(self.input_shape(net, path)), msg)
            return True
        return False

    def flatten(self, net, path, num_dims, rank, msg):
        per_env = rank - self.current_batch_dims()
        if num_dims > per_env:
            raise ExportError(path, net, "joins %d dims of an input with %d dims per environment: it would join "
                              "batch dims, which the spec's flatten never does" % (num_dims, per_env))
        msg.flatten.num_dims = num_dims

    @staticmethod
    def conv2d(net, path, msg):
        if net.padding_mode != "zeros":
            raise ExportError(path, net, "padding_mode=%r: tdpolicy's conv2d pads with zeros" % net.padding_mode)
        padding = net.padding
        if isinstance(padding, str):
            if padding == "valid":
                padding = (0, 0)
            else:  # "same": torch pads total = dilation * (kernel - 1) per dim, the odd one on the right
                totals = [d * (k - 1) for d, k in zip(net.dilation, net.kernel_size)]
                if any(t % 2 for t in totals):
                    raise ExportError(path, net, "padding='same' with an even kernel pads one side more, which "
                                      "tdpolicy's conv2d (the same padding on both sides) cannot express")
                padding = tuple(t // 2 for t in totals)
        msg.in_channels = net.in_channels
        msg.out_channels = net.out_channels
        msg.kernel_size.extend(int(k) for k in net.kernel_size)
        msg.stride.extend(int(s) for s in net.stride)
        msg.padding.extend(int(p) for p in padding)
        msg.dilation.extend(int(d) for d in net.dilation)
        msg.groups = net.groups
        msg.no_bias = net.bias is None

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
                raise ExportError(path, obj, "distribution_class %s.%s is not in tdpolicy's registry (%s)%s"
                                  % (obj.distribution_class.__module__, obj.distribution_class.__qualname__,
                                     ", ".join(sorted({c.__name__ for c in table})), hint))
            name, accepted = entry
            msg.distribution = name
            if name.startswith("masked_"):
                _check_dense_mask(obj, dist_keys, kwargs, path)
            self.distribution_kwargs(obj.distribution_class, kwargs, accepted, path, msg.distribution_kwargs,
                                     _TENSOR_KWARGS.get(name, ()))
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

    def distribution_kwargs(self, cls, kwargs, accepted, path, out, tensors=()):
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
            self.scalar(value, where, out[target], target in tensors)

    @staticmethod
    def scalar(value, where, out, tensor_ok=False):
        """A kwarg: a number, or a tensor. A tensor of one value (whatever its shape, such as a
        constant per-agent bound) is written as that number; others as a tensor where the C++
        registry takes the kwarg as a tensor (tensor_ok)."""
        if isinstance(value, torch.Tensor):
            flat = value.detach().reshape(-1)
            if flat.numel() == 0:
                raise ExportError(where, value, "an empty tensor kwarg")
            if not bool((flat == flat[0]).all()):
                if not tensor_ok:
                    raise ExportError(where, value, "a tensor kwarg of shape %s with different values, which "
                                      "tdpolicy's registry takes as a number only" % (list(value.shape),))
                if not value.is_floating_point():
                    raise ExportError(where, value, "a tensor kwarg of dtype %s: give a floating-point tensor"
                                      % (value.dtype,))
                to_tensor_proto(value.detach().cpu(), where, out.tensor_value)
                return
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
            self.held.append(self.python_prefix + "support")
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
        _action_spec(spec, "%s.spec" % path, path, obj, msg.spec)
        self.held.extend(self.python_prefix + name for name in ("eps", "eps_init", "eps_end"))
        self.write(obj.action_key, overwrites, path)
        return msg


def _recurrent_kind(obj):
    """(class, network attribute, accepted network classes, number of states) of a TorchRL
    LSTMModule / GRUModule, else None."""
    if LSTMModule is not None and isinstance(obj, LSTMModule):
        return LSTMModule, "lstm", (nn.LSTM, TorchRLLSTM), 2
    if GRUModule is not None and isinstance(obj, GRUModule):
        return GRUModule, "gru", (nn.GRU, TorchRLGRU), 1
    return None


def _with_recurrent_inputs(module, example):
    """The example, with zeros at the recurrent states and False at is_init of every LSTMModule /
    GRUModule it lacks (what those modules assume when the keys are missing, and what the actor
    then supplies): the states are declared inputs, so that the C++ actor keeps them."""
    added = example
    for sub in module.modules():
        kind = _recurrent_kind(sub)
        if kind is None:
            continue
        net = getattr(sub, kind[1])
        keys = [unravel_key(k) for k in sub.in_keys]
        have = set(k for k, _ in leaves(example))
        weight = next(net.parameters(), None)
        dtype = weight.dtype if weight is not None else torch.get_default_dtype()
        if net.bidirectional or getattr(net, "proj_size", 0):
            continue  # refused by the walk, which names the setting
        for key in keys[1:-1]:
            if key not in have:
                added = added.clone(False) if added is example else added
                added.set(key, torch.zeros(*example.batch_size, net.num_layers, net.hidden_size, dtype=dtype))
        if keys[-1] not in have:
            added = added.clone(False) if added is example else added
            added.set(keys[-1], torch.zeros(*example.batch_size, 1, dtype=torch.bool))
    return added


# ---- TorchRL's bounded actors: TanhModule, safe=True projections ------------------------------

def _tanh_module(walker, obj, path, overwrites, msg):
    """TorchRL's TanhModule -> tdpolicy.TanhModule: its bounds are the buffers <key>_low /
    <key>_high it registered from its spec or low / high."""
    in_keys = [unravel_key(k) for k in obj.in_keys]
    out_keys = [unravel_key(k) for k in obj.out_keys]
    for key in in_keys:
        msg.in_keys.append(walker.read(key, path, obj))
    for out_key in out_keys:
        name = out_key if isinstance(out_key, str) else "_".join(out_key)
        bound = msg.bounds.add()
        for side, field in (("low", bound.low), ("high", bound.high)):
            value = getattr(obj, "%s_%s" % (name, side))
            if not value.is_floating_point():
                raise ExportError(path, obj, "the %s bound of %r has dtype %s: the spec holds floating-point "
                                  "bounds" % (side, out_key, value.dtype))
            to_tensor_proto(value.detach().cpu(), "%s %s_%s" % (path, name, side), field)
            walker.held.append(walker.python_prefix + "%s_%s" % (name, side))
    msg.clamp = bool(obj.clamp)
    if out_keys != in_keys:
        for key in out_keys:
            msg.out_keys.append(walker.write(key, overwrites, path))
    return msg


def _action_spec(leaf, where, path, obj, out):
    """A TorchRL leaf spec -> tdpolicy.ActionSpec: an unmasked floating-point Bounded, a OneHot or a
    Categorical; `where` names it in errors ("actor spec['action']")."""
    if getattr(leaf, "mask", None) is not None:
        raise ExportError(path, obj, "a masked %s spec at %s: the spec holds unmasked Bounded / OneHot / "
                          "Categorical specs" % (type(leaf).__name__, where))
    if isinstance(leaf, TorchRLBounded):
        low, high = leaf.space.low, leaf.space.high
        if not (low.is_floating_point() and high.is_floating_point()):
            raise ExportError(path, obj, "a %s spec at %s of dtype %s: the spec holds floating-point Bounded "
                              "specs" % (type(leaf).__name__, where, low.dtype))
        to_tensor_proto(low.detach().cpu(), where + " low", out.bounded.low)
        to_tensor_proto(high.detach().cpu(), where + " high", out.bounded.high)
    elif type(leaf) is TorchRLOneHot:
        out.one_hot.n = int(leaf.space.n)
    elif type(leaf) is TorchRLCategorical:
        if int(leaf.space.n) < 1:
            raise ExportError(path, obj, "a Categorical spec at %s of undefined cardinality (n=%s)"
                              % (where, leaf.space.n))
        out.categorical.n = int(leaf.space.n)
    else:
        raise ExportError(path, obj, "a %s spec at %s: tdpolicy takes Bounded, OneHot and Categorical specs"
                          % (type(leaf).__name__, where))
    out.shape.extend(int(s) for s in leaf.shape)
    out.dtype = dtype_enum(leaf.dtype, where)


def _projections(obj, path, msg):
    """TorchRL's safe=True (SafeModule / SafeProbabilisticModule): the entries of obj.spec that
    its forward hook projects, as the Module's projections."""
    spec = obj.spec
    written = {unravel_key(k) for k in obj.out_keys}
    for key in spec.keys(True, True):
        leaf = spec[key]
        if leaf is None:
            continue
        key = unravel_key(key)
        if key not in written:
            raise ExportError(path, obj, "safe=True projects %r, which the module does not write" % (key,))
        if type(leaf) is TorchRLCategorical and int(leaf.space.n) < 0:
            continue  # every value is in a Categorical(n=-1): its projection does nothing
        projection = msg.projections.add()
        projection.key = key_text(key, path + " spec key")
        _action_spec(leaf, "%s spec[%r]" % (path, key), path, obj, projection.spec)



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


# ---- environment transforms: the observation transforms a policy depends on, in front of it ----
#
# TorchRL runs ObservationNorm, VecNorm, CatTensors, DoubleToFloat, ToTensorImage inside the
# environment (a TransformedEnv); an exported spec runs them as modules in front of the policy, so
# that a C++ simulator feeds the raw observation. Each leaf transform becomes steps, one per
# (in_key, out_key): (path, transform, kind, in_keys, out_key, fill) where fill(network message,
# parameters list, C++ prefix) writes the network kind. Steps whose outputs the policy never reads
# (StepCounter, RewardSum, a normalization of the reward...) are left out.

_TRANSFORMS_HINT = ("tdpolicy exports ObservationNorm, VecNorm / VecNormV2 (their statistics frozen), "
                    "CatTensors, DoubleToFloat / DTypeCastTransform, ToTensorImage and a Compose of them; run "
                    "other transforms in the simulator")


class _Step:
    """One (in_keys -> out_key) computation of a transform at `path`; `fill` writes its network
    kind; an opaque step (a transform tdpolicy has no kind for) may only write what the policy
    does not read."""

    def __init__(self, path, transform, kind, in_keys, out_key, fill=None, opaque=False):
        self.path, self.transform, self.kind = path, transform, kind
        self.in_keys, self.out_key, self.fill, self.opaque = in_keys, out_key, fill, opaque


def _torchrl_transforms():
    from torchrl.envs import transforms as T
    return T


def _refuse_inverse(t, path):
    keys = [k for k in (getattr(t, "in_keys_inv", None) or [])]
    if keys:
        raise ExportError(path, t, "in_keys_inv=%s transforms what the env receives (after the policy), which "
                          "the spec does not hold: the spec's outputs are the policy's; build the transform "
                          "with in_keys_inv=[] and convert the action in the simulator"
                          % [key_text(k) for k in keys])


def _stat_tensor(value, path, t, what):
    value = value.detach()
    if value.dtype not in (torch.float32, torch.float64):
        raise ExportError(path, t, "%s has dtype %s; tdpolicy's observation_norm holds float32 statistics"
                          % (what, value.dtype))
    return value


def _per_env_stats(value, td, key, path, t, what):
    """Statistics one environment's observation broadcasts against (not one per env of a batch)."""
    observation = td.get(key, None)
    if observation is not None:
        per_env = list(observation.shape[td.batch_dims:])
        shape = list(value.shape)
        fits = len(shape) <= len(per_env) and all(s in (1, p) for s, p in zip(reversed(shape), reversed(per_env)))
        if not fits:
            raise ExportError(path, t, "%s has shape %s but the observation %r is %s per environment: the "
                              "statistics must be one environment's (reduce the batch dims: init_stats' "
                              "reduce_dim, VecNormV2's reduce_batch_dims=True)" % (what, shape, key, per_env))
    return value


def _norm_fill(loc, scale, standard_normal):
    def fill(msg, parameters, cpp):
        msg.observation_norm.shape.extend(int(s) for s in loc.shape)
        msg.observation_norm.standard_normal = standard_normal
        # The C++ buffers are float32 (the spec has no dtype field for them).
        parameters.append((cpp + "loc", None, loc.to(torch.float32)))
        parameters.append((cpp + "scale", None, scale.to(torch.float32)))
    return fill


def _leaf_steps(t, path, td):
    """The steps of one leaf transform, reading the keys of `td` (the example as the transforms
    before this one leave it) where the transform takes its keys from what it meets."""
    T = _torchrl_transforms()
    keys = lambda ks: [unravel_key(k) for k in (ks or [])]  # noqa: E731
    if type(t) is T.ObservationNorm:
        _refuse_inverse(t, path)
        if not t.initialized:
            raise ExportError(path, t, "loc and scale are not initialized: call init_stats() (or pass loc and scale)")
        loc = _stat_tensor(t.loc, path, t, "loc")
        scale = _stat_tensor(t.scale, path, t, "scale")
        steps = []
        for i, o in zip(keys(t.in_keys), keys(t.out_keys)):
            _per_env_stats(loc, td, i, path, t, "loc")
            _per_env_stats(scale, td, i, path, t, "scale")
            steps.append(_Step(path, t, "observation_norm", [i], o, _norm_fill(loc, scale, bool(t.standard_normal))))
        return steps
    if type(t) is T.VecNormV2:
        if not t.stateful:
            raise ExportError(path, t, "stateful=False keeps the statistics in the TensorDict, not in the "
                              "transform; use a stateful VecNormV2, whose statistics are frozen at export")
        if t._loc is None:
            raise ExportError(path, t, "has no statistics yet: run the environment (or load its state) first")
        loc, scale = t._get_loc_scale()
        steps = []
        for i, o in zip(keys(t._in_keys_safe), keys(t.out_keys)):
            fill = _norm_fill(_per_env_stats(_stat_tensor(loc.get(i), path, t, "loc"), td, i, path, t, "loc"),
                              _per_env_stats(_stat_tensor(scale.get(i), path, t, "scale"), td, i, path, t, "scale"),
                              True)
            steps.append(_Step(path, t, "observation_norm", [i], o, fill))
        return steps
    if type(t) is T.VecNorm:
        steps = []
        for i, o in zip(keys(t.in_keys), keys(t.out_keys)):
            suffix = lambda s: _append_key(i, s)  # noqa: E731
            if t._td is None or suffix("_sum") not in t._td.keys(True):
                raise ExportError(path, t, "has no statistics for %r yet: run the environment first" % (i,))
            # VecNorm's own expressions (torchrl/envs/transforms/_normalization.py, _update).
            total, ssq, count = t._td.get(suffix("_sum")), t._td.get(suffix("_ssq")), t._td.get(suffix("_count"))
            mean = total / count
            std = (ssq / count - mean.pow(2)).clamp_min(t.eps).sqrt()
            fill = _norm_fill(_per_env_stats(_stat_tensor(mean, path, t, "the mean"), td, i, path, t, "the mean"),
                              _stat_tensor(std.clamp_min(t.eps), path, t, "the std"), True)
            steps.append(_Step(path, t, "observation_norm", [i], o, fill))
        return steps
    if type(t) in (T.DTypeCastTransform, T.DoubleToFloat):
        _refuse_inverse(t, path)
        if not t.dtype_out.is_floating_point:
            raise ExportError(path, t, "dtype_out=%s: tdpolicy's to_dtype casts to a floating dtype" % t.dtype_out)
        dtype = dtype_enum(t.dtype_out, path + " dtype_out")
        in_keys = t.in_keys
        if in_keys is None:  # stand-alone: every entry of dtype_in it meets
            pairs = [(k, k) for k, v in leaves(td) if v.dtype == t.dtype_in]
        else:
            pairs = list(zip(keys(in_keys), keys(t.out_keys)))

        def fill(msg, parameters, cpp):
            msg.to_dtype.dtype = dtype
        return [_Step(path, t, "to_dtype", [i], o, fill) for i, o in pairs]
    if type(t) is T.CatTensors:
        if not t._initialized:
            raise ExportError(path, t, "in_keys=None takes its keys from the parent env on first use: pass "
                              "in_keys, or run the env once before exporting")
        if t.dim != -1:
            raise ExportError(path, t, "dim=%r: tdpolicy's cat joins on the last dim (dim=-1)" % t.dim)
        if t.unsqueeze_if_oor:
            raise ExportError(path, t, "unsqueeze_if_oor=True has no spec field (only the default, False)")

        def fill(msg, parameters, cpp):
            msg.cat.SetInParent()
        return [_Step(path, t, "cat", keys(t.in_keys), unravel_key(t.out_keys[0]), fill)]
    if type(t) is T.ToTensorImage:
        if t.unsqueeze:
            raise ExportError(path, t, "unsqueeze=True has no spec field (only the default, False)")
        if t.shape_tolerant:
            raise ExportError(path, t, "shape_tolerant=True has no spec field: tdpolicy's to_tensor_image always "
                              "permutes [..., H, W, C]")
        if t.dtype != torch.float32:
            raise ExportError(path, t, "dtype=%s: tdpolicy's to_tensor_image writes float32" % t.dtype)
        steps = []
        for i, o in zip(keys(t.in_keys), keys(t.out_keys)):
            value = td.get(i, None)
            from_int = t.from_int if t.from_int is not None else (
                value is not None and not torch.is_floating_point(value))

            def fill(msg, parameters, cpp, from_int=bool(from_int)):
                msg.to_tensor_image.from_int = from_int
            steps.append(_Step(path, t, "to_tensor_image", [i], o, fill))
        return steps
    # Any other transform: harmless when the policy reads nothing it writes.
    return [_Step(path, t, None, keys(getattr(t, "in_keys", None)), k, opaque=True)
            for k in keys(getattr(t, "out_keys", None))] or [_Step(path, t, None, [], None, opaque=True)]


def _append_key(key, suffix):
    return key + suffix if isinstance(key, str) else key[:-1] + (key[-1] + suffix,)


def _transform_leaves(t, path):
    T = _torchrl_transforms()
    if type(t) is T.Compose:
        out = []
        for i, child in enumerate(t.transforms):
            out.extend(_transform_leaves(child, "%s.transforms[%d]" % (path, i)))
        return out
    if not isinstance(t, T.Transform):
        raise ExportError(path, t, "not a TorchRL Transform; " + _TRANSFORMS_HINT)
    return [(path, t)]


class _frozen_vecnorms:
    """Freezes every VecNorm of the transforms while the exporter runs them, so that running them
    on the example does not move their statistics."""

    def __init__(self, leaves_):
        T = _torchrl_transforms()
        self.norms = [t for _, t in leaves_ if isinstance(t, (T.VecNorm, T.VecNormV2)) and not t.frozen]

    def __enter__(self):
        for t in self.norms:
            t.frozen = True

    def __exit__(self, *exc):
        for t in self.norms:
            t.frozen = False


def _run_step(step, td):
    """Runs one step's transform on td as TransformedEnv.step does (Transform._step), for its
    (in_key, out_key) pair only."""
    t = step.transform
    T = _torchrl_transforms()
    if step.kind == "cat":
        # On a shallow copy: with del_keys, CatTensors drops its inputs, which the C++ side keeps.
        td.set(step.out_key, t._call(td.clone(False)).get(step.out_key))
        return td
    if type(t) is T.VecNormV2:
        from torchrl.envs.transforms.utils import _set_missing_tolerance
        with _set_missing_tolerance(t, True):  # this step's key alone
            normalized = t._stateful_norm(td.select(step.in_keys[0]))
        td.set(step.out_key, normalized.get(step.out_key if step.out_key in normalized.keys(True)
                                            else step.in_keys[0]))
        return td
    if type(t) is T.VecNorm:
        td.set(step.out_key, t._update(step.in_keys[0], td.get(step.in_keys[0]), N=max(1, td.numel())))
        return td
    td.set(step.out_key, t._apply_transform(td.get(step.in_keys[0])))
    return td


class TransformedPolicy(TensorDictModuleBase):
    """The policy with the exported steps of the environment's transforms in front: what the
    spec computes, run by TorchRL's own transform code. Raw inputs the transforms replace stay
    in the output TensorDict under their own keys when a step writes elsewhere, as in C++."""

    def __init__(self, policy, steps, in_keys):
        super().__init__()
        self.policy = policy
        self.steps = steps
        self.in_keys = in_keys  # the raw entries read
        self.out_keys = policy.out_keys

    def transform(self, td):
        with _frozen_vecnorms([(s.path, s.transform) for s in self.steps]):
            for step in self.steps:
                td = _run_step(step, td)
        return td

    def forward(self, td):
        return self.policy(self.transform(td))


def _plan_transforms(transforms, policy, example):
    """The live steps of `transforms` for `policy`, and the example as they leave it."""
    if torchrl is None:
        raise ExportError("transforms", transforms, "TorchRL is not installed")
    leaves_ = _transform_leaves(transforms, "transforms")
    # Forward: the steps, resolving keys a transform takes from what it meets (DoubleToFloat alone).
    steps = []
    td = example.clone()
    with _frozen_vecnorms(leaves_):
        for path, t in leaves_:
            for step in _leaf_steps(t, path, td):
                steps.append(step)
                if not step.opaque and all(k in td.keys(True, True) for k in step.in_keys):
                    td = _run_step(step, td)
    # Backward: what the policy reads, and the steps that write it.
    needed = {unravel_key(k) for k in policy.in_keys}
    live = []
    for step in reversed(steps):
        if step.out_key is None or step.out_key not in needed:
            continue
        if step.opaque:
            raise ExportError(step.path, step.transform, "writes %r, which the policy reads; %s"
                              % (step.out_key, _TRANSFORMS_HINT))
        needed.discard(step.out_key)
        needed.update(step.in_keys)
        live.append(step)
    live.reverse()
    runner = TransformedPolicy(policy, live, sorted(needed, key=key_text))
    for step in live:
        missing = [k for k in step.in_keys if k not in example.keys(True, True)
                   and not any(s.out_key == k for s in live[:live.index(step)])]
        if missing:
            raise ExportError(step.path, step.transform, "reads %s, which the example (the raw env output) does "
                              "not hold" % ", ".join(repr(k) for k in missing))
    return runner


def _transform_modules(runner, walker, out_modules):
    """Appends the runner's steps to a sequential's modules as network modules named
    "transform<i>" (parameters under module.transform<i>.module.), marking overwrites."""
    for index, step in enumerate(runner.steps):
        name = "transform%d" % index
        child = out_modules.add()
        child.name = name
        net = child.network
        for key in step.in_keys:
            net.in_keys.append(walker.read(key, step.path, step.transform))
        before = len(walker.parameters)
        step.fill(net.network, walker.parameters, "module.%s.module." % name)
        walker.parameters[before:] = [(c, "%s.%s" % (step.path, c.rsplit(".", 1)[-1]), v)
                                      for c, _, v in walker.parameters[before:]]
        overwrites = []
        net.out_keys.append(walker.write(step.out_key, overwrites, step.path))
        child.overwrite_keys.extend(overwrites)


# ---- running the module in Python ---------------------------------------------------------------

def _python_outputs(module, inputs, interaction=InteractionType.DETERMINISTIC):
    with torch.no_grad(), set_interaction_type(interaction):
        return module(inputs.clone())


def _input_shapes(module, runner, example):
    """Runs `runner` (the module, or the transforms then the module) on the example and returns
    {id(submodule): the shape of its first input} for the module's torch.nn layers (a flatten's
    dims are counted from its input's)."""
    shapes = {}

    def record(layer, args):
        if args and isinstance(args[0], torch.Tensor):
            shapes.setdefault(id(layer), tuple(args[0].shape))

    hooks = [m.register_forward_pre_hook(record) for m in module.modules()
             if not isinstance(m, (TensorDictModuleBase, torch.jit.ScriptModule))]
    try:
        _python_outputs(runner, example)
    finally:
        for hook in hooks:
            hook.remove()
    return shapes


def _score(module, td):
    """Like the C++ self test's forward_scoring: runs the tree on td, except that a probabilistic
    module whose samples td holds keeps them and writes their log-probs."""
    if isinstance(module, TransformedPolicy):
        return _score(module.policy, module.transform(td))
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

def export(module, path, example, *, transforms=None, parameters="embedded", self_test=True, name=None,
           version="1", description=None, atol=1e-6, rtol=1e-6, action_seed=0, fallback=None, aoti_device="cpu"):
    """Writes `module` as a tdpolicy.PolicySpec at `path` and returns the PolicySpec message.

    module: a TensorDictModule / TensorDictSequential / ProbabilisticTensorDictModule /
        ProbabilisticTensorDictSequential tree (TorchRL's Actor and ProbabilisticActor are those).
    path: .pbtxt (text), .pb (binary) or .json (JSON), as the C++ loader reads them.
    example: a TensorDict holding every input the module reads (recurrent states included), with
        batch dims in front; it fixes the declared input shapes and dtypes and is the self test's
        input. Entries at the module's sample keys, if any, are the self test's given actions
        (otherwise one seeded RANDOM draw of the module is). With `transforms`, the example is
        the raw environment output (what `env.base_env` gives, before the transforms: float64
        observations for DoubleToFloat, uint8 [H, W, C] pixels for ToTensorImage); the exporter
        runs the transforms on it to feed the policy, and the spec declares those raw entries.
    transforms: the environment's transforms the policy depends on (`env.transform` of a
        TransformedEnv, a Compose, or one transform), exported as modules in front of the policy
        ("transform0", "transform1", ... then "policy" in a sequential), so that a C++ simulator
        feeding raw observations gets the actions Python gets from the transformed env.
        ObservationNorm (after init_stats), VecNorm and VecNormV2 (their statistics frozen at
        export, VecNorm's own loc and scale expressions, eps included), CatTensors (dim=-1),
        DoubleToFloat / DTypeCastTransform (to a floating dtype) and ToTensorImage become
        observation_norm, cat, to_dtype and to_tensor_image; a transform writing nothing the
        policy reads (by its out_keys: StepCounter, RewardSum, a reward's normalization) is left
        out; anything else the policy depends on, in_keys_inv, or an option without a spec
        field raises ExportError. observation_norm keeps its statistics in float32.
    parameters: "embedded" (one self-contained file, up to MAX_EMBEDDED_PARAMETER_BYTES = 64 MiB of
        weights) or "file" (a binary tdpolicy.Parameters file next to the spec,
        `<stem>.parameters.pb`, named by the spec's parameters_file, written one tensor at a time
        so memory stays bounded by the largest tensor: any model size the loader's limits take).
        Weights are written at every place the module uses them (tied weights become copies in
        C++); NaN or infinite weights, or a non-finite example, raise ExportError naming them.
        The files are written to temporaries first and moved into place together, the spec last:
        a failed export leaves no spec without its parameters file and no temporaries.
    self_test: record what Python computes on `example` (deterministic outputs, log-probs of the
        given actions) with tolerances atol / rtol, so `tdp validate` and load_policy(...,
        run_self_tests) prove the C++ side computes the same.
    fallback: None, or "aoti": a network (a TensorDictModule's module) that no tdpolicy.Network
        kind expresses, such as a custom nn.Module, is traced by torch.export with a dynamic batch
        dim on the inputs it received when the policy ran on `example`, and compiled by
        AOTInductor into `<stem>.<n>.pt2` next to the spec (its SHA-256 in the spec; its weights
        inside it). Compiling takes tens of seconds per network; C++ runs it on LibTorch.
    aoti_device: "cpu", or "cuda" to compile the packages for a GPU (needs a GPU and nvcc here;
        the policy then loads on a CUDA actor only, so self_test must be False: the self tests
        run on the CPU when a policy loads).
    Raises ExportError naming the submodule's path and type for anything the spec cannot express.
    """
    fmt = spec_format(path)
    if parameters not in ("embedded", "file"):
        raise ValueError("parameters=%r: expected \"embedded\" or \"file\"" % (parameters,))
    if fallback not in (None, "aoti"):
        raise ValueError("fallback=%r: expected None or \"aoti\"" % (fallback,))
    if aoti_device not in ("cpu", "cuda"):
        raise ValueError("aoti_device=%r: expected \"cpu\" or \"cuda\"" % (aoti_device,))
    if aoti_device == "cuda" and self_test:
        raise ValueError("aoti_device=\"cuda\" needs self_test=False: a CUDA package runs on a CUDA actor only, "
                         "and the self tests run on the CPU when the policy loads")
    if not isinstance(module, TensorDictModuleBase):
        raise ExportError("actor", module, "expected a tensordict.nn module (TensorDictModule, "
                          "TensorDictSequential, ProbabilisticTensorDictModule/Sequential, TorchRL Actor)")
    _check_keys(module)
    example = _with_recurrent_inputs(module, _example_td(example))
    _check_finite_example(example)
    folder = os.path.dirname(os.path.abspath(path))
    stem = os.path.basename(path)
    stem = stem[:stem.rfind(".")] if "." in stem else stem
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", stem):
        raise ValueError("%s: the file name may hold letters, digits, '_', '-' and '.' only" % path)

    was_training = module.training
    module.eval()
    packager = _aoti.AotiPackager(stem, example.batch_dims, aoti_device) if fallback == "aoti" else None
    try:
        runner = _plan_transforms(transforms, module, example) if transforms is not None else None
        computes = runner if runner is not None else module
        # Run first: lazy layers materialize, and a module that cannot run on the example fails
        # here with Python's own error rather than later in C++; the layers' input shapes are
        # recorded (a flatten's dims count from its input's). With the fallback, the inputs each
        # TensorDictModule receives are recorded too: a package is traced on them.
        recorder = _aoti.InputRecorder(module, TensorDictModule) if packager is not None else None
        try:
            input_shapes = _input_shapes(module, computes, example)
        finally:
            if recorder is not None:
                recorder.remove()
        walker = _Walker(module, example, stem, packager, recorder.inputs if recorder is not None else None)
        walker.input_shapes = input_shapes
        spec = spec_pb2.PolicySpec()
        spec.name = name if name is not None else stem
        spec.version = version
        if runner is None:
            walker.module(module, "actor", out=spec.module)
        else:
            _transform_modules(runner, walker, spec.module.sequential.modules)
            walker.module_at(module, "actor", "policy", "module.policy.", "", spec.module.sequential.modules.add())
        python = dict(module.named_parameters())
        python.update(dict(module.named_buffers()))
        mapped = [p for _, p, _ in walker.parameters] + walker.packaged + walker.held
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

        _check_finite_parameters(walker.parameters, module)
        parameters_file = None
        if parameters == "embedded":
            _check_embeddable(walker.parameters, module)
            spec.parameters.SetInParent()  # present even when empty: the policy has no weights at all
            for cpp_name, _, value in walker.parameters:
                named = spec.parameters.tensors.add()
                named.name = cpp_name
                to_tensor_proto(value, "parameter %r" % cpp_name, named.tensor)
        else:
            parameters_file = stem + ".parameters.pb"
            spec.parameters_file = parameters_file

        if self_test:
            actions = _actions_for(computes, inputs, example, sample_keys_of(walker), action_seed)
            make_self_test(computes, inputs, actions, out_keys, atol, rtol, spec.self_tests.add())
    except BaseException:
        if packager is not None:
            packager.close()
        raise
    finally:
        module.train(was_training)

    # Every file is written to a temporary next to its destination first; only when all of them
    # are complete do they replace their destinations, the spec last: a failed export leaves
    # neither a spec without its parameters nor a parameters file without its spec.
    os.makedirs(folder, exist_ok=True)
    files = _StagedFiles()
    try:
        for filename, script in walker.scripts:
            files.stage(os.path.join(folder, filename), lambda f, script=script: torch.jit.save(script, f))
        if packager is not None:
            for filename, source in packager.files:
                files.stage(os.path.join(folder, filename), lambda f, source=source: _copy_into(source, f))
        if parameters_file is not None:
            files.stage(os.path.join(folder, parameters_file),
                        lambda f: _write_parameters(f, walker.parameters))
        files.stage(path, lambda f: f.write(serialize(spec, fmt)))
        files.commit()
    finally:
        files.discard()
        if packager is not None:
            packager.close()
    return spec


def parameter_tensors(module, example, *, transforms=None):
    """[(C++ name, tensor)] for every parameter and buffer of `module` that the spec export(module,
    ..., example, transforms=transforms) writes holds, the tensors being the module's own (not
    copies): what tdpolicy.Actor.refresh_from copies into a loaded C++ actor. Frozen transform
    statistics (written as copies) are left out: they are not the module's."""
    example = _with_recurrent_inputs(module, _example_td(example))
    was_training = module.training
    module.eval()
    try:
        runner = _plan_transforms(transforms, module, example) if transforms is not None else None
        computes = runner if runner is not None else module
        input_shapes = _input_shapes(module, computes, example)
        walker = _Walker(module, example, "refresh", None, None)
        walker.input_shapes = input_shapes
        spec = spec_pb2.PolicySpec()
        if runner is None:
            walker.module(module, "actor", out=spec.module)
        else:
            _transform_modules(runner, walker, spec.module.sequential.modules)
            walker.module_at(module, "actor", "policy", "module.policy.", "", spec.module.sequential.modules.add())
    finally:
        module.train(was_training)
    return [(cpp, value) for cpp, python, value in walker.parameters if python is not None]


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


class _StagedFiles:
    """Files written to temporaries in their destination's folder, then moved into place together."""

    def __init__(self):
        self.staged = []  # (temporary, destination)

    def stage(self, destination, write):
        if os.path.isdir(destination):
            raise IsADirectoryError("%s: cannot write the export there, it is a directory" % destination)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(destination)),
                                         prefix="." + os.path.basename(destination) + ".", suffix=".tmp")
        self.staged.append((temporary, destination))
        with os.fdopen(fd, "wb") as f:
            write(f)

    def commit(self):
        # Every destination was checked before any temporary was written; moving a file within
        # its own folder does not fail for want of space.
        for temporary, destination in self.staged:
            os.replace(temporary, destination)
        self.staged = []

    def discard(self):
        for temporary, _ in self.staged:
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
        self.staged = []


def _copy_into(source, f):
    with open(source, "rb") as src:
        shutil.copyfileobj(src, f, 1 << 20)


def _write_parameters(f, parameters):
    """Writes a tdpolicy.Parameters message one tensor at a time, each tensor's bytes straight from
    its memory: the repeated field `tensors` serialized element by element is the message's own
    encoding, so memory stays bounded by the largest tensor whatever the model's size (protobuf's
    runtime would hold the whole message, and copies of it, at once)."""
    for cpp_name, _, value in parameters:
        dtype, shape, array = tensor_array(value, "parameter %r" % cpp_name)
        head = tensor_pb2.TensorProto(dtype=dtype, shape=shape).SerializeToString(deterministic=True)
        data_field = b"\x1a" + _varint(array.nbytes)  # TensorProto.data = 3, length-delimited
        tensor_length = len(head) + len(data_field) + array.nbytes
        name_field = spec_pb2.NamedTensor(name=cpp_name).SerializeToString(deterministic=True)
        tensor_field = b"\x12" + _varint(tensor_length)  # NamedTensor.tensor = 2
        named_length = len(name_field) + len(tensor_field) + tensor_length
        f.write(b"\x0a" + _varint(named_length))  # Parameters.tensors = 1
        f.write(name_field + tensor_field + head + data_field)
        f.write(array.reshape(-1).view("u1").data)


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# The most tensor data a spec embeds. Protobuf's Python runtime (4.21) holds an embedded spec in
# memory several times over while serializing it, as text above all (about 4x the weights and
# tens of seconds at 200 MB), and a binary message cannot pass 2 GiB: bigger models write their
# weights to a parameters file, streamed one tensor at a time.
MAX_EMBEDDED_PARAMETER_BYTES = 64 << 20


def _check_embeddable(parameters, module):
    total = sum(value.numel() * value.element_size() for _, _, value in parameters)
    if total > MAX_EMBEDDED_PARAMETER_BYTES:
        raise ExportError("actor", module, "its parameters hold %.1f MiB, more than a spec embeds (%d MiB, "
                          "tdpolicy._export.MAX_EMBEDDED_PARAMETER_BYTES); export with parameters=\"file\", "
                          "which streams them to <stem>.parameters.pb"
                          % (total / (1 << 20), MAX_EMBEDDED_PARAMETER_BYTES >> 20))


def _check_finite_parameters(parameters, module):
    # The C++ loader refuses non-finite parameters by default (a diverged training run): say so
    # here, naming the parameter, rather than write a spec that will not load.
    for cpp_name, python_name, value in parameters:
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            raise ExportError("actor", module, "parameter %r (%s) holds %d NaN or infinite value(s) of %d: a "
                              "diverged training run? The C++ loader refuses such parameters"
                              % (python_name or cpp_name, cpp_name, bad, value.numel()))


def _check_finite_example(example):
    for key, value in leaves(example):
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            rows = (~torch.isfinite(value)).reshape(value.shape[0], -1).any(-1).nonzero().flatten() \
                if value.dim() > 0 else torch.zeros(1, dtype=torch.long)
            raise ExportError("example", example, "entry %r holds NaN or infinite values (row %d first): the self "
                              "test needs finite inputs, as the C++ actor rejects non-finite observations"
                              % (key, int(rows[0])))


def _named_tensors(module):
    """(name, tensor) for every parameter and buffer, a tied one under each of its names: the C++
    tree holds a copy at every place the Python tree uses it."""
    return (list(module.named_parameters(remove_duplicate=False))
            + list(module.named_buffers(remove_duplicate=False)))


def _check_keys(module):
    # Specs write nested keys as "a/b": a key holding '/' or an empty level cannot round-trip.
    # Checked over the whole tree first, the innermost modules first (a sequential lists its
    # children's keys too), so the error names the module that uses the key.
    for name, sub in reversed(list(module.named_modules())):
        if not isinstance(sub, TensorDictModuleBase):
            continue
        path = "actor" + ("." + name if name else "")
        for attribute in ("in_keys", "out_keys"):
            keys = getattr(sub, attribute, None) or []
            for key in (keys.values() if isinstance(keys, dict) else keys):
                try:
                    key_text(key)
                except ValueError:
                    raise ExportError(path, sub, "%s holds %r: spec keys cannot hold '/' or empty levels"
                                      % (attribute, key)) from None
