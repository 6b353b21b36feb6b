"""Tests of the tdpolicy Python package: real tensordict / TorchRL actors exported with
tdpolicy.export, loaded by the C++ `tdp` (validate: the spec's self tests; run: every output key)
and compared with Python by tdpolicy.check to 1e-6; and the errors for what a spec cannot express.

Run by tests/python/exporter_test.sh with the package built into PYTHONPATH and TDP_BIN set.
"""

import json
import os
import unittest
import warnings

import torch
from torch import distributions as D
from torch import nn

from tensordict import TensorDict
from tensordict.nn import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    EnsembleModule,
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from tensordict.nn.distributions import Delta, OneHotCategorical as TDOneHotCategorical, TruncatedNormal
from torchrl.modules import (
    MLP,
    Actor,
    IndependentNormal,
    OneHotCategorical,
    ProbabilisticActor,
    TanhNormal,
)

import tdpolicy
from tdpolicy import spec_pb2

from export_case import ExportTestCase  # beside this file, on sys.path by junit_runner.py

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
torch.set_num_threads(1)

BATCH = 6


def mlp(in_features, cells, out_features, activation=nn.Tanh, layer_norm=False, activate_last=False):
    kwargs = {}
    if layer_norm:
        sizes = list(cells) + ([out_features] if activate_last else [])
        kwargs = {"norm_class": nn.LayerNorm, "norm_kwargs": [{"normalized_shape": c} for c in sizes]}
    net = MLP(in_features=in_features, out_features=out_features, num_cells=list(cells),
              activation_class=activation, activate_last_layer=activate_last, **kwargs)
    with torch.no_grad():  # LayerNorm starts at (1, 0): move it so that loading it is checked
        for layer in net:
            if isinstance(layer, nn.LayerNorm):
                layer.weight.add_(torch.randn_like(layer.weight) * 0.1)
                layer.bias.add_(torch.randn_like(layer.bias) * 0.1)
    return net


class ExporterTest(ExportTestCase):
    def contents(self):
        """{file name: bytes} of the test's folder."""
        out = {}
        for name in os.listdir(self.dir):
            with open(self.path(name), "rb") as f:
                out[name] = f.read()
        return out

    # ---- actors as tensordict and TorchRL build them ----

    def test_ppo_gaussian_actor(self):
        backbone = TensorDictSequential(
            TensorDictModule(mlp(5, [32, 32], 4), in_keys=["observation"], out_keys=["params"]),
            TensorDictModule(NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]))
        actor = ProbabilisticActor(backbone, in_keys=["loc", "scale"], out_keys=["action"],
                                   distribution_class=TanhNormal,
                                   distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True)
        td = TensorDict({"observation": torch.randn(BATCH, 5) * 1.5}, [BATCH])
        actions = TensorDict({"action": torch.rand(BATCH, 2) * 3.6 - 1.8}, [BATCH])
        spec, report = self.export_and_check(actor, td, "ppo_gaussian.pbtxt", actions, backends=("libtorch", "auto"))
        self.assertEqual(self.entries(report), {"observation", "params", "loc", "scale", "action", "action_log_prob"})
        prob = spec.module.probabilistic_sequential.modules[1].probabilistic
        self.assertEqual(prob.distribution, "tanh_normal")
        self.assertEqual(prob.distribution_kwargs["low"].double_value, -2.0)
        self.assertEqual(prob.distribution_kwargs["high"].double_value, 2.0)
        self.assertTrue(prob.return_log_prob)
        self.assertEqual(len(spec.self_tests), 1)
        self.assertEqual([t.name for t in spec.self_tests[0].expected_log_probs], ["action_log_prob"])
        net = spec.module.probabilistic_sequential.modules[0].sequential.modules[0].network.network.mlp
        self.assertEqual((net.in_features, list(net.hidden_sizes), net.out_features, net.activation),
                         (5, [32, 32], 4, "tanh"))

    def test_discrete_one_hot_actor(self):
        actor = ProbabilisticActor(
            TensorDictModule(mlp(4, [32], 3), in_keys=["observation"], out_keys=["logits"]),
            in_keys=["logits"], out_keys=["action"], distribution_class=OneHotCategorical, return_log_prob=True)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        actions = TensorDict({"action": nn.functional.one_hot(torch.randint(0, 3, (BATCH,)), 3)}, [BATCH])
        spec, report = self.export_and_check(actor, td, "one_hot.pbtxt", actions, backends=("libtorch", "auto"))
        self.assertEqual(spec.module.probabilistic_sequential.modules[1].probabilistic.distribution,
                         "one_hot_categorical")
        self.assertIn("action_log_prob", self.entries(report))

    def test_discrete_categorical_actor_binary_spec(self):
        actor = ProbabilisticTensorDictSequential(
            TensorDictModule(mlp(4, [32, 32], 3, nn.ReLU), in_keys=["observation"], out_keys=["logits"]),
            ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=D.Categorical,
                                          return_log_prob=True))
        td = TensorDict({"observation": torch.randn(BATCH, 4) * 2}, [BATCH])
        actions = TensorDict({"action": torch.randint(0, 3, (BATCH,))}, [BATCH])
        spec, report = self.export_and_check(actor, td, "categorical.pb", actions, backends=("libtorch", "auto"))
        parsed = spec_pb2.PolicySpec()
        with open(self.path("categorical.pb"), "rb") as f:
            parsed.ParseFromString(f.read())
        self.assertEqual(parsed, spec)
        self.assertEqual(spec.module.probabilistic_sequential.modules[1].probabilistic.distribution, "categorical")

    def test_hybrid_composite_actor_with_nested_keys_json_spec(self):
        actor = ProbabilisticTensorDictSequential(
            TensorDictModule(mlp(4, [32], 3), in_keys=[("agent", "observation")],
                             out_keys=[("params", "type", "logits")]),
            TensorDictModule(mlp(4, [32], 2), in_keys=[("agent", "observation")], out_keys=["param_head_out"]),
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
        td = TensorDict({"agent": {"observation": torch.randn(BATCH, 4)}}, [BATCH])
        actions = TensorDict({"action": {"type": torch.randint(0, 3, (BATCH,)), "param": torch.randn(BATCH, 1)}},
                             [BATCH])
        spec, report = self.export_and_check(actor, td, "hybrid.json", actions)
        with open(self.path("hybrid.json")) as f:
            self.assertIn("probabilistic_sequential", json.load(f)["module"])
        composite = spec.module.probabilistic_sequential.modules[3].probabilistic.composite
        self.assertEqual([(p.key, p.distribution, p.sample_key) for p in composite.parts],
                         [("type", "categorical", "action/type"), ("param", "normal", "action/param")])
        self.assertEqual([i.key for i in spec.inputs], ["agent/observation"])
        self.assertTrue({"action/type", "action/param", "action/type_log_prob", "action/param_log_prob",
                         "params/param/scale"} <= self.entries(report))
        self.assertEqual(
            spec.module.probabilistic_sequential.modules[2].network.network.normal_param_extractor.scale_mapping,
            "biased_softplus_0.5")

    def test_gru_actor(self):
        actor = ProbabilisticTensorDictSequential(
            TensorDictModule(nn.GRUCell(4, 16), in_keys=["observation", "hidden"], out_keys=["hidden"]),
            TensorDictModule(mlp(16, [32], 2), in_keys=["hidden"], out_keys=["logits"]),
            ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=D.Categorical,
                                          return_log_prob=True))
        td = TensorDict({"observation": torch.randn(BATCH, 4), "hidden": torch.randn(BATCH, 16) * 0.5}, [BATCH])
        spec, report = self.export_and_check(actor, td, "gru.pbtxt", backends=("libtorch", "auto"))
        gru = spec.module.probabilistic_sequential.modules[0]
        self.assertEqual(list(gru.overwrite_keys), ["hidden"])
        self.assertEqual([i.key for i in spec.inputs], ["observation", "hidden"])
        # A first step: no hidden state given, both sides start it at zeros.
        report = tdpolicy.check(self.path("gru.pbtxt"), actor, td.exclude("hidden"))
        self.assertIn("hidden", self.entries(report))

    def test_sac_actor_with_state_independent_scale_parameters_file(self):
        backbone = TensorDictSequential(
            TensorDictModule(mlp(3, [32, 32], 2, nn.ReLU, layer_norm=True), in_keys=["observation"],
                             out_keys=["loc"]),
            TensorDictModule(AddStateIndependentNormalScale(2, scale_lb=1e-3, init_value=-0.5),
                             in_keys=["loc"], out_keys=["loc", "scale"]))
        with torch.no_grad():
            backbone.module[1].module.state_independent_scale.copy_(torch.tensor([-0.5, 0.25]))
        actor = ProbabilisticActor(backbone, in_keys=["loc", "scale"], out_keys=["action"],
                                   distribution_class=TanhNormal, distribution_kwargs={"low": -1.0, "high": 1.0,
                                                                                       "tanh_loc": True},
                                   return_log_prob=True)
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        actions = TensorDict({"action": torch.rand(BATCH, 2) * 1.8 - 0.9}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "sac.pbtxt", actions, parameters="file")
        self.assertEqual(spec.parameters_file, "sac.parameters.pb")
        self.assertFalse(spec.HasField("parameters"))
        self.assertTrue(os.path.isfile(self.path("sac.parameters.pb")))
        scale = spec.module.probabilistic_sequential.modules[0].sequential.modules[1].network.network
        self.assertEqual(list(scale.add_state_independent_normal_scale.scale_shape), [2])
        self.assertTrue(spec.module.probabilistic_sequential.modules[0].sequential.modules[0]
                        .network.network.mlp.layer_norm)
        self.assertEqual(list(spec.module.probabilistic_sequential.modules[0].sequential.modules[1].overwrite_keys),
                         ["loc"])

    def test_lstm_cell_actor(self):
        actor = TensorDictSequential(
            TensorDictModule(tdpolicy.LSTMCell(4, 8), in_keys=["observation", "h", "c"], out_keys=["h", "c"]),
            Actor(nn.Linear(8, 2), in_keys=["h"], out_keys=["action"]))
        td = TensorDict({"observation": torch.randn(BATCH, 4), "h": torch.randn(BATCH, 8),
                         "c": torch.randn(BATCH, 8)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "lstm.pbtxt")
        self.assertEqual(spec.module.sequential.modules[0].network.network.lstm_cell.hidden_size, 8)
        self.assertTrue(spec.module.sequential.modules[1].network.network.HasField("linear"))

    # ---- coverage of the schema: every activation, mappings, distributions, in_keys maps ----

    def test_ensemble_of_critics(self):
        # Four critics over one observation, then a chained ensemble reading each copy's features
        # (expand_input=False): the spec's ensemble kind, stacked parameters renamed params_td -> params.
        features = EnsembleModule(TensorDictModule(mlp(5, [16], 8), in_keys=["observation"], out_keys=["features"]),
                                  num_copies=4)
        values = EnsembleModule(TensorDictModule(nn.Linear(8, 1), in_keys=["features"], out_keys=["value"]),
                                num_copies=4, expand_input=False)
        critics = TensorDictSequential(features, values)
        td = TensorDict({"observation": torch.randn(BATCH, 5)}, [BATCH])
        spec, report = self.export_and_check(critics, td, "critics.pbtxt")
        self.assertEqual(self.entries(report), {"observation", "features", "value"})
        first, second = (m.ensemble for m in spec.module.sequential.modules)
        self.assertEqual((first.num_copies, first.HasField("expand_input")), (4, False))
        self.assertEqual((second.num_copies, second.expand_input), (4, False))
        self.assertEqual(second.module.network.network.linear.out_features, 1)

    def test_every_mlp_activation(self):
        activations = [nn.Tanh, nn.ReLU, nn.ELU, nn.GELU, nn.LeakyReLU, nn.Sigmoid, nn.Softplus, nn.Identity]
        for activation in activations:
            for layer_norm, activate_last in ((False, False), (True, True)):
                with self.subTest(activation=activation.__name__, layer_norm=layer_norm):
                    net = mlp(3, [8, 8], 4, activation, layer_norm=layer_norm and not activate_last,
                              activate_last=activate_last)
                    actor = Actor(net, in_keys=["observation"], out_keys=["action"])
                    td = TensorDict({"observation": torch.randn(BATCH, 3) * 2}, [BATCH])
                    spec, _ = self.export_and_check(actor, td, "mlp_%s.pbtxt" % activation.__name__)
                    m = spec.module.network.network.mlp
                    self.assertEqual(m.activate_last_layer, activate_last)
        # A plain nn.Sequential is an mlp too.
        seq = nn.Sequential(nn.Linear(3, 8), nn.LayerNorm(8), nn.ELU(), nn.Linear(8, 2))
        spec, _ = self.export_and_check(TensorDictModule(seq, in_keys=["x"], out_keys=["y"]),
                                        TensorDict({"x": torch.randn(BATCH, 3)}, [BATCH]), "seq.pbtxt")
        self.assertEqual((spec.module.network.network.mlp.activation, spec.module.network.network.mlp.layer_norm),
                         ("elu", True))

    def test_mappings_and_in_keys_map(self):
        for mapping in ["softplus", "exp", "relu", "expln", "biased_softplus_1.0", "biased_softplus_2.0_0.1"]:
            with self.subTest(mapping=mapping):
                actor = ProbabilisticTensorDictSequential(
                    TensorDictModule(mlp(3, [8], 4), in_keys=["observation"], out_keys=["raw"]),
                    TensorDictModule(NormalParamExtractor(scale_mapping=mapping), in_keys=["raw"],
                                     out_keys=["mu", "sigma"]),
                    ProbabilisticTensorDictModule(in_keys={"loc": "mu", "scale": "sigma"}, out_keys=["action"],
                                                  distribution_class=D.Normal, return_log_prob=True))
                td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
                actions = TensorDict({"action": torch.randn(BATCH, 2)}, [BATCH])
                spec, _ = self.export_and_check(actor, td, "map.pbtxt", actions)
                prob = spec.module.probabilistic_sequential.modules[2].probabilistic
                self.assertEqual([(b.name, b.key) for b in prob.in_keys_map], [("loc", "mu"), ("scale", "sigma")])
                extractor = spec.module.probabilistic_sequential.modules[1].network.network.normal_param_extractor
                self.assertEqual(extractor.scale_mapping, mapping)
        # A stand-alone mapping module, and tensordict's mapping functions.
        for module, name in [(nn.Softplus(), "softplus"), (torch.exp, "exp")]:
            seq = TensorDictSequential(TensorDictModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["h"]),
                                       TensorDictModule(module, in_keys=["h"], out_keys=["y"]))
            spec, _ = self.export_and_check(seq, TensorDict({"x": torch.randn(BATCH, 3)}, [BATCH]), "m.pbtxt")
            self.assertEqual(spec.module.sequential.modules[1].network.network.mapping.name, name)

    def test_distributions(self):
        cases = [
            ("normal", D.Normal, {}, 2, lambda: torch.randn(BATCH, 1)),
            ("independent_normal", IndependentNormal, {}, 4, lambda: torch.randn(BATCH, 2)),
            ("tanh_normal", TanhNormal, {"upscale": 3.0, "low": -3.0, "high": 1.0, "safe_tanh": True}, 4,
             lambda: torch.rand(BATCH, 2) * 3.6 - 2.8),
            ("truncated_normal", TruncatedNormal, {"a": -1.5, "b": 2.0}, 4, lambda: torch.rand(BATCH, 2) * 3 - 1.4),
            # Bounds from an action spec: one-valued tensors become scalar kwargs (broadcast alike).
            ("tanh_normal", TanhNormal, {"low": torch.full((2,), -2.0), "high": torch.full((2,), 2.0)}, 4,
             lambda: torch.rand(BATCH, 2) * 3.6 - 1.8),
        ]
        for name, cls, kwargs, width, action in cases:
            with self.subTest(distribution=name):
                keys = ["loc", "scale"]
                actor = ProbabilisticTensorDictSequential(
                    TensorDictModule(mlp(3, [8], width), in_keys=["observation"], out_keys=["raw"]),
                    TensorDictModule(NormalParamExtractor(), in_keys=["raw"], out_keys=keys),
                    ProbabilisticTensorDictModule(in_keys=keys, out_keys=["action"], distribution_class=cls,
                                                  distribution_kwargs=kwargs, return_log_prob=True,
                                                  default_interaction_type=InteractionType.DETERMINISTIC))
                td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
                actions = TensorDict({"action": action()}, [BATCH])
                spec, _ = self.export_and_check(actor, td, "%s.pbtxt" % name, actions)
                prob = spec.module.probabilistic_sequential.modules[-1].probabilistic
                self.assertEqual(prob.distribution, name)
                for key, value in kwargs.items():
                    self.assertIn(key, prob.distribution_kwargs)
        # Beta: both concentrations through a softplus mapping module (torch's Beta has no
        # deterministic_sample: tensordict and tdpolicy fall back on its mode).
        keys = ["concentration1", "concentration0"]
        actor = ProbabilisticTensorDictSequential(
            TensorDictModule(mlp(3, [8], 2), in_keys=["observation"], out_keys=["raw1"]),
            TensorDictModule(nn.Softplus(), in_keys=["raw1"], out_keys=["concentration1"]),
            TensorDictModule(mlp(3, [8], 2), in_keys=["observation"], out_keys=["raw0"]),
            TensorDictModule(nn.Softplus(), in_keys=["raw0"], out_keys=["concentration0"]),
            ProbabilisticTensorDictModule(in_keys=keys, out_keys=["action"], distribution_class=D.Beta,
                                          return_log_prob=True))
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "beta.pbtxt",
                                        TensorDict({"action": torch.rand(BATCH, 2) * 0.9 + 0.05}, [BATCH]))
        self.assertEqual(spec.module.probabilistic_sequential.modules[-1].probabilistic.distribution, "beta")
        # Discrete: Bernoulli over logits, tensordict's OneHotCategorical, and Delta (a
        # deterministic actor as a distribution).
        for cls, name, action in [(D.Bernoulli, "bernoulli", lambda: torch.randint(0, 2, (BATCH, 3)).float()),
                                  (TDOneHotCategorical, "one_hot_categorical",
                                   lambda: nn.functional.one_hot(torch.randint(0, 3, (BATCH,)), 3))]:
            with self.subTest(distribution=name):
                actor = ProbabilisticTensorDictSequential(
                    TensorDictModule(mlp(3, [8], 3), in_keys=["observation"], out_keys=["logits"]),
                    ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=cls,
                                                  return_log_prob=True))
                td = TensorDict({"observation": torch.randn(BATCH, 3) * 3}, [BATCH])
                spec, _ = self.export_and_check(actor, td, "%s.pbtxt" % name, TensorDict({"action": action()}, [BATCH]))
                self.assertEqual(spec.module.probabilistic_sequential.modules[1].probabilistic.distribution, name)
        actor = ProbabilisticTensorDictSequential(
            TensorDictModule(mlp(3, [8], 2), in_keys=["observation"], out_keys=["param"]),
            ProbabilisticTensorDictModule(in_keys=["param"], out_keys=["action"], distribution_class=Delta,
                                          distribution_kwargs={"atol": 1e-4}, return_log_prob=True))
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "delta.pbtxt")
        self.assertEqual(spec.module.probabilistic_sequential.modules[1].probabilistic.distribution, "delta")

    def test_formats_hold_the_same_spec(self):
        actor = ProbabilisticActor(
            TensorDictModule(mlp(4, [16], 3), in_keys=["observation"], out_keys=["logits"]),
            in_keys=["logits"], out_keys=["action"], distribution_class=D.Categorical, return_log_prob=True)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        specs = []
        for name in ("f.pbtxt", "f.pb", "f.json"):
            specs.append(tdpolicy.export(actor, self.path(name), example=td))
            tdpolicy.check(self.path(name), actor, td)
        self.assertEqual(specs[0], specs[1])
        self.assertEqual(specs[0], specs[2])
        self.assertEqual(tdpolicy.spec_format("x.textproto"), "text")
        with self.assertRaisesRegex(ValueError, "unknown spec extension"):
            tdpolicy.export(actor, self.path("f.yaml"), example=td)

    def test_default_interaction_types(self):
        for interaction, name in [(InteractionType.MODE, "mode"), (InteractionType.MEAN, "mean"),
                                  (InteractionType.DETERMINISTIC, "deterministic")]:
            with self.subTest(interaction=name):
                actor = ProbabilisticTensorDictSequential(
                    TensorDictModule(mlp(3, [8], 4), in_keys=["observation"], out_keys=["raw"]),
                    TensorDictModule(NormalParamExtractor(), in_keys=["raw"], out_keys=["loc", "scale"]),
                    ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
                                                  distribution_class=D.Normal, return_log_prob=True,
                                                  default_interaction_type=interaction))
                td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
                path = self.path("interaction.pbtxt")
                spec = tdpolicy.export(actor, path, example=td)
                self.assertEqual(spec.module.probabilistic_sequential.modules[2].probabilistic.default_interaction_type,
                                 name)
                # Both sides run under the module's own default.
                report = tdpolicy.check(path, actor, td, interaction=None)
                self.assertIn("action_log_prob", self.entries(report))
        actor = ProbabilisticTensorDictSequential(
            TensorDictModule(mlp(3, [8], 3), in_keys=["observation"], out_keys=["logits"]),
            ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=D.Categorical,
                                          default_interaction_type=InteractionType.RANDOM))
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        spec = tdpolicy.export(actor, self.path("random.pbtxt"), example=td)
        self.assertEqual(spec.module.probabilistic_sequential.modules[1].probabilistic.default_interaction_type,
                         "random")
        tdpolicy.check(self.path("random.pbtxt"), actor, td)  # deterministic by default
        with self.assertRaisesRegex(ValueError, r"actor.module.1 \(ProbabilisticTensorDictModule\) samples"):
            tdpolicy.check(self.path("random.pbtxt"), actor, td, interaction=None)

    def test_custom_log_prob_keys_and_selected_out_keys(self):
        actor = ProbabilisticTensorDictSequential(
            TensorDictModule(mlp(4, [16], 3), in_keys=["observation"], out_keys=["logits"]),
            ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=D.Categorical,
                                          return_log_prob=True, log_prob_key=("stats", "lp")))
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        spec, report = self.export_and_check(actor, td, "lp_key.pbtxt",
                                             TensorDict({"action": torch.randint(0, 3, (BATCH,))}, [BATCH]))
        self.assertEqual(spec.module.probabilistic_sequential.modules[1].probabilistic.log_prob_key, "stats/lp")
        self.assertIn("stats/lp", self.entries(report))

        def composite(selected=("kind", "flag", "kind_log_prob", "flag_log_prob"), **lp):
            return ProbabilisticTensorDictSequential(
                TensorDictModule(mlp(4, [16], 3), in_keys=["observation"], out_keys=[("params", "kind", "logits")]),
                TensorDictModule(mlp(4, [16], 2), in_keys=["observation"], out_keys=[("params", "flag", "logits")]),
                ProbabilisticTensorDictModule(
                    in_keys=["params"], out_keys=["kind", "flag"], distribution_class=CompositeDistribution,
                    distribution_kwargs={"distribution_map": {"kind": D.Categorical, "flag": D.Bernoulli}},
                    return_log_prob=True, **lp),
                selected_out_keys=list(selected) if selected else None)

        actions = TensorDict({"kind": torch.randint(0, 3, (BATCH,)), "flag": torch.randint(0, 2, (BATCH, 2)).float()},
                             [BATCH])
        spec, report = self.export_and_check(composite(), td, "selected.pbtxt", actions)
        self.assertEqual(list(spec.module.probabilistic_sequential.selected_out_keys),
                         ["kind", "flag", "kind_log_prob", "flag_log_prob"])
        self.assertEqual(self.entries(report), {"observation", "kind", "flag", "kind_log_prob", "flag_log_prob"})
        self.assert_export_error(composite(None, log_prob_keys=["kind_lp", "flag_lp"]), td, "actor.module.2",
                                 "ProbabilisticTensorDictModule", "log_prob_keys=.* on a CompositeDistribution")

    # ---- check() fails when C++ and Python disagree ----

    def test_check_reports_a_changed_weight(self):
        net = mlp(4, [16], 2)
        actor = Actor(net, in_keys=["observation"], out_keys=["action"])
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        path = self.path("changed.pbtxt")
        tdpolicy.export(actor, path, example=td, self_test=False)
        with torch.no_grad():
            net[2].bias.add_(1e-3)  # Python moves, the spec does not
        with self.assertRaises(tdpolicy.CheckError) as raised:
            tdpolicy.check(path, actor, td)
        report = raised.exception.report
        self.assertEqual([key for key, status, _ in report.entries if status != "ok"], ["action"])
        self.assertIn("action", str(raised.exception))

    def test_check_reports_a_failed_self_test(self):
        actor = ProbabilisticActor(
            TensorDictModule(mlp(4, [16], 3), in_keys=["observation"], out_keys=["logits"]),
            in_keys=["logits"], out_keys=["action"], distribution_class=D.Categorical, return_log_prob=True)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        path = self.path("bad_self_test.pbtxt")
        spec = tdpolicy.export(actor, path, example=td)
        data = bytearray(spec.self_tests[0].expected_log_probs[0].tensor.data)
        data[0] ^= 0x40  # one log-prob off
        spec.self_tests[0].expected_log_probs[0].tensor.data = bytes(data)
        with open(path, "wb") as f:
            f.write(tdpolicy._export.serialize(spec, "text"))
        report = tdpolicy.check(path, actor, td, raise_on_mismatch=False)
        self.assertFalse(report.ok)
        self.assertIn("action_log_prob", str(report))
        # With actions in td, their log-probs join the spec's own self tests in `tdp run
        # --self_tests`, which still fails on the spec's; a run without them compares the outputs.
        with_actions = td.clone().set("action", torch.arange(BATCH) % 3)
        report = tdpolicy.check(path, actor, with_actions, raise_on_mismatch=False)
        self.assertEqual([ok for _, ok, _ in report.steps], [False, True], str(report))
        self.assertIn("log-probs of td's action", report.steps[0][0])
        # self_tests=False runs the deterministic comparison alone.
        report = tdpolicy.check(path, actor, td, self_tests=False)
        self.assertEqual([command.split()[:2] for command, _, _ in report.steps], [["tdp", "run"]])

    def test_check_needs_the_tdp_binary(self):
        with self.assertRaisesRegex(FileNotFoundError, "not an executable"):
            tdpolicy.find_tdp(self.path("no_such_tdp"))

    # ---- what a spec cannot express: errors naming the path and the type ----

    def test_unsupported_network_names_its_path_and_type(self):
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        actor = TensorDictSequential(
            TensorDictModule(nn.Linear(3, 8), in_keys=["observation"], out_keys=["h"]),
            TensorDictModule(nn.Sequential(nn.Linear(8, 8), nn.Softmax(-1), nn.Linear(8, 2)),
                             in_keys=["h"], out_keys=["action"]))
        self.assert_export_error(actor, td, "actor.module.1.module.1", "torch.nn.modules.activation.Softmax",
                                 "no tdpolicy.Network counterpart")
        actor = TensorDictModule(nn.Bilinear(3, 3, 2), in_keys=["observation", "observation"], out_keys=["y"])
        self.assert_export_error(actor, td, "actor.module", "torch.nn.modules.linear.Bilinear",
                                 "no tdpolicy.Network counterpart")
        actor = TensorDictModule(lambda x: x * 2, in_keys=["observation"], out_keys=["y"])
        self.assert_export_error(actor, td, "actor.module", "function", "no tdpolicy.Network counterpart")
        # Mixed activations are not tdpolicy's mlp but a sequence of layers (torchrl_layers_test).
        mixed = MLP(in_features=3, out_features=2, num_cells=[8, 8], activation_class=nn.Tanh)
        mixed[3] = nn.ReLU()
        spec = tdpolicy.export(Actor(mixed, in_keys=["observation"]), self.path("mixed.pbtxt"), example=td,
                               self_test=False)
        self.assertEqual(spec.module.network.network.WhichOneof("kind"), "sequence")
        self.assert_export_error(TensorDictModule(nn.LSTMCell(3, 4), in_keys=["observation"], out_keys=["h", "c"]),
                                 td, "actor.module", "torch.nn.modules.rnn.LSTMCell", "tdpolicy.LSTMCell")

    def test_unsupported_distribution_names_its_path_and_type(self):
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])

        def actor(cls, kwargs=None):
            return ProbabilisticActor(
                TensorDictSequential(
                    TensorDictModule(mlp(3, [8], 4), in_keys=["observation"], out_keys=["p"]),
                    TensorDictModule(NormalParamExtractor(), in_keys=["p"], out_keys=["loc", "scale"])),
                in_keys=["loc", "scale"], out_keys=["action"], distribution_class=cls,
                distribution_kwargs=kwargs or {})

        self.assert_export_error(actor(D.Cauchy), td, "actor.module.1", "SafeProbabilisticModule",
                                 "Cauchy is not in tdpolicy's registry")
        self.assert_export_error(actor(IndependentNormal, {"tanh_loc": True}), td,
                                 "actor.module.1.distribution_kwargs['tanh_loc']", "bool", "ignores tanh_loc")
        self.assert_export_error(actor(IndependentNormal, {"upscale": torch.tensor([1.0, 2.0])}), td,
                                 "actor.module.1.distribution_kwargs['upscale']", "torch.Tensor",
                                 "takes as a number only")

    def test_unsupported_settings_name_their_path(self):
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        from tensordict.nn import add_custom_mapping
        add_custom_mapping("tdpolicy_test_square", lambda x: x * x)
        for extractor, type_text, why in [
                (NormalParamExtractor(scale_lb=0.0), "NormalParamExtractor", "scale_lb=0.0"),
                (NormalParamExtractor(scale_mapping="tdpolicy_test_square"), "function",
                 r"not a mapping that tensordict.nn.mappings\(\) names"),
                (AddStateIndependentNormalScale(4, scale_mapping="tdpolicy_test_square"), "str",
                 "not one of tensordict's built-in mappings")]:
            actor = TensorDictSequential(
                TensorDictModule(nn.Linear(4, 4), in_keys=["observation"], out_keys=["p"]),
                TensorDictModule(extractor, in_keys=["p"], out_keys=["loc", "scale"]))
            self.assert_export_error(actor, td, "actor.module.1.module", type_text, why)
        actor = TensorDictSequential(
            TensorDictModule(nn.Linear(4, 4), in_keys=["observation"], out_keys=["p"], inplace=False))
        self.assert_export_error(actor, td, "actor.module.0", "TensorDictModule", "inplace=False")

    def test_subclass_overriding_forward_is_refused(self):
        class Doubling(TensorDictModule):
            def forward(self, tensordict, *args, **kwargs):
                out = super().forward(tensordict, *args, **kwargs)
                out.set("y", out.get("y") * 2)
                return out

        td = TensorDict({"x": torch.randn(BATCH, 3)}, [BATCH])
        self.assert_export_error(TensorDictSequential(Doubling(nn.Linear(3, 2), in_keys=["x"], out_keys=["y"])), td,
                                 "actor.module.0", "Doubling", "overrides TensorDictModule.forward")

    def test_aggregated_log_prob_mode_is_refused(self):
        from tensordict.nn import set_composite_lp_aggregate
        with set_composite_lp_aggregate(True):
            actor = ProbabilisticTensorDictSequential(
                TensorDictModule(mlp(3, [8], 3), in_keys=["observation"], out_keys=["logits"]),
                ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"],
                                              distribution_class=D.Categorical, return_log_prob=True))
            td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
            self.assert_export_error(actor, td, "actor.module.1", "ProbabilisticTensorDictModule",
                                     r"composite_lp_aggregate\(True\)")

    def test_missing_example_input_is_named(self):
        actor = TensorDictModule(nn.GRUCell(3, 4), in_keys=["observation", "hidden"], out_keys=["hidden"])
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        self.assert_export_error(actor, td, "actor", "TensorDictModule", "reads 'hidden'")

    # ---- hostile input: what the exporter refuses, and what it writes when it cannot finish ----

    def test_weights_tied_inside_one_mlp_export_at_each_place(self):
        shared = nn.Linear(4, 4)
        actor = TensorDictModule(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), shared, nn.Tanh(), shared),
                                 in_keys=["observation"], out_keys=["action"])
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "tied.pbtxt", backends=("libtorch", "fused"))
        names = [t.name for t in spec.parameters.tensors]
        self.assertIn("module.layers.2.weight", names)
        self.assertIn("module.layers.4.weight", names)
        self.assertEqual(len(names), 6)

    def test_non_finite_weights_are_named(self):
        for bad in (float("nan"), float("inf")):
            actor = TensorDictModule(mlp(3, [4], 2), in_keys=["observation"], out_keys=["action"])
            with torch.no_grad():
                actor.module[2].bias[1] = bad
            td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
            self.assert_export_error(actor, td, "actor", "TensorDictModule",
                                     r"parameter 'module\.2\.bias' \(module\.layers\.2\.bias\) holds 1 NaN or infinite")

    def test_non_finite_example_is_named(self):
        actor = TensorDictModule(mlp(3, [4], 2), in_keys=["observation"], out_keys=["action"])
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        td["observation"][2, 1] = float("nan")
        self.assert_export_error(actor, td, "example", "TensorDict", r"entry 'observation' .* \(row 2 first\)")

    def test_keys_with_a_slash_or_an_empty_level_name_the_module(self):
        for bad in ("hidden/state", ("hidden", "")):
            actor = TensorDictSequential(
                TensorDictModule(mlp(3, [4], 4), in_keys=["observation"], out_keys=["latent"]),
                TensorDictModule(nn.Linear(4, 2), in_keys=["latent"], out_keys=[bad]))
            td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
            self.assert_export_error(actor, td, "actor.module.1", "TensorDictModule", "out_keys holds")

    def test_a_failed_write_leaves_the_previous_export_whole_and_no_temporaries(self):
        actor = TensorDictModule(mlp(3, [4], 2), in_keys=["observation"], out_keys=["action"])
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        path = self.path("policy.pb")
        tdpolicy.export(actor, path, example=td, parameters="file")
        before = self.contents()
        self.assertEqual(sorted(before), ["policy.parameters.pb", "policy.pb"])
        with torch.no_grad():
            actor.module[0].weight.add_(1.0)
        # The spec fails to serialize after the parameters file was written in full.
        original = tdpolicy._export.serialize
        tdpolicy._export.serialize = lambda spec, fmt: (_ for _ in ()).throw(OSError("disk full"))
        try:
            with self.assertRaisesRegex(OSError, "disk full"):
                tdpolicy.export(actor, path, example=td, parameters="file")
        finally:
            tdpolicy._export.serialize = original
        self.assertEqual(self.contents(), before)
        # A destination that is a folder is found before anything is written.
        os.mkdir(self.path("folder.pb"))
        with self.assertRaisesRegex(IsADirectoryError, "folder.pb"):
            tdpolicy.export(actor, self.path("folder.pb"), example=td, parameters="file")
        self.assertEqual(sorted(os.listdir(self.dir)), ["folder.pb", "policy.parameters.pb", "policy.pb"])

    def test_a_50m_parameter_model_streams_to_its_parameters_file_under_a_4gb_address_space(self):
        # In a child process limited to 4 GiB of address space (torch's own mappings included),
        # as a small worker would be: protobuf's runtime fails there on a message this size.
        script = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
import torch
from torch import nn
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
import tdpolicy
folder = sys.argv[1]
actor = TensorDictModule(nn.Linear(7072, 7072), in_keys=["observation"], out_keys=["action"])
td = TensorDict({"observation": torch.randn(2, 7072)}, [2])
try:
    tdpolicy.export(actor, os.path.join(folder, "big.pbtxt"), example=td)
    print("embedded: exported")
except tdpolicy.ExportError as error:
    print("embedded:", error)
tdpolicy.export(actor, os.path.join(folder, "big.pb"), example=td, parameters="file")
print("file: exported")
"""
        import subprocess
        import sys
        result = subprocess.run([sys.executable, "-c", script, self.dir], capture_output=True, text=True, timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertIn("MAX_EMBEDDED_PARAMETER_BYTES", result.stdout)
        self.assertIn("file: exported", result.stdout)
        self.assertEqual(sorted(os.listdir(self.dir)), ["big.parameters.pb", "big.pb"])
        self.assertGreater(os.path.getsize(self.path("big.parameters.pb")), 50_000_000 * 4)
        validate = subprocess.run([tdpolicy.find_tdp(), "validate", self.path("big.pb")], capture_output=True,
                                  text=True, timeout=600)
        self.assertEqual(validate.returncode, 0, validate.stderr[-2000:])
        self.assertIn("OK: big", validate.stdout)


if __name__ == "__main__":
    unittest.main()
