"""TorchRL's sequences of layers exported unchanged with tdpolicy.export: the Gaussian actor of
the PPO tutorial and of SAC (nn.Sequential(MLP / LazyLinear + activations, NormalParamExtractor)),
activations with their arguments, nn.Dropout, ConvNet (the PPO-Atari trunk, extra batch dims,
squeeze_output), DdpgMlpActor, DuelingCnnDQNet / DuelingMlpDQNet, ActorValueOperator and
ActorCriticWrapper with their policy and value operators. Each is built as TorchRL's docs build
it, exported (.pbtxt, and .pb / .json where that matters), loaded by the C++ `tdp` and compared with
Python by tdpolicy.check to 1e-6, and to 1e-5 on the fused backend where the spec lowers to it.

Run by tests/python/exporter_test.sh with the package built into PYTHONPATH and TDP_BIN set.
"""

import unittest
import warnings

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torchrl.modules import (
    MLP,
    Actor,
    ActorCriticWrapper,
    ActorValueOperator,
    ConvNet,
    DdpgMlpActor,
    DuelingCnnDQNet,
    OneHotCategorical,
    ProbabilisticActor,
    TanhNormal,
    ValueOperator,
)
from torchrl.modules.models.models import DuelingMlpDQNet

import tdpolicy

from export_case import ExportTestCase  # beside this file, on sys.path by junit_runner.py

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
torch.set_num_threads(1)

BATCH = 6


def gaussian_actor(net, low=-1.0, high=1.0):
    """TorchRL's PPO tutorial actor around `net`, which writes loc and scale."""
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(module=module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                              distribution_kwargs={"low": low, "high": high}, return_log_prob=True)


def network_of(spec, *path):
    """The spec's module at `path` (indices into nested sequentials), as its network message."""
    module = spec.module
    for index in path:
        kind = module.WhichOneof("kind")
        module = getattr(module, kind).modules[index]
    return module.network.network


class TorchRLLayersTest(ExportTestCase):
    backends = ("libtorch", "auto")
    max_diffs = {}  # the largest |C++ - Python| per export and backend, printed after the tests

    # ---- 1. the Gaussian actor ----

    def test_ppo_tutorial_gaussian_actor_with_lazy_linear_layers(self):
        num_cells, action_dim = 32, 2
        actor_net = nn.Sequential(
            nn.LazyLinear(num_cells), nn.Tanh(),
            nn.LazyLinear(num_cells), nn.Tanh(),
            nn.LazyLinear(num_cells), nn.Tanh(),
            nn.LazyLinear(2 * action_dim),
            NormalParamExtractor(),
        )
        actor = gaussian_actor(actor_net)
        td = TensorDict({"observation": torch.randn(BATCH, 5) * 1.5}, [BATCH])
        actions = TensorDict({"action": torch.rand(BATCH, action_dim) * 1.8 - 0.9}, [BATCH])
        for name in ("ppo_gaussian.pbtxt", "ppo_gaussian.pb", "ppo_gaussian.json"):
            spec, report = self.export_and_check(actor, td, name, actions, fused=True)
        layers = network_of(spec, 0).sequence.layers
        self.assertEqual([layer.WhichOneof("kind") for layer in layers],
                         ["linear", "activation"] * 3 + ["linear", "normal_param_extractor"])
        self.assertEqual(layers[0].linear.in_features, 5)
        self.assertEqual([p.name for p in spec.parameters.tensors][:2],
                         ["module.0.module.layers.0.weight", "module.0.module.layers.0.bias"])
        self.assertIn("action_log_prob", self.entries(report))

    def test_sac_actor_mlp_without_in_features_and_biased_softplus(self):
        for scale_mapping in ("biased_softplus_1.0", "biased_softplus_0.5_0.001", "exp"):
            actor_net = nn.Sequential(
                MLP(num_cells=[32, 32], out_features=4, activation_class=nn.ReLU),
                NormalParamExtractor(scale_mapping=scale_mapping, scale_lb=1e-4))
            actor = ProbabilisticActor(
                TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
                in_keys=["loc", "scale"], distribution_class=TanhNormal,
                distribution_kwargs={"low": -2.0, "high": 2.0, "tanh_loc": False}, return_log_prob=True)
            td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
            spec, _ = self.export_and_check(actor, td, "sac_%s.pbtxt" % scale_mapping, fused=True)
            layers = network_of(spec, 0).sequence.layers
            self.assertEqual(layers[0].mlp.in_features, 3)  # materialized from the example
            self.assertEqual(layers[1].normal_param_extractor.scale_mapping, scale_mapping)

    def test_activations_with_arguments_dropout_and_layer_norm(self):
        net = nn.Sequential(
            nn.Linear(5, 16), nn.ELU(alpha=0.5), nn.Dropout(0.2),
            nn.Linear(16, 16), nn.LeakyReLU(0.2),
            nn.Linear(16, 16), nn.GELU(approximate="tanh"),
            nn.Linear(16, 16), nn.Softplus(beta=2.0, threshold=5.0),
            nn.Linear(16, 16, bias=False), nn.SiLU(), nn.LayerNorm(16, eps=1e-3),
            nn.Linear(16, 16), nn.GELU(), nn.Sigmoid(),
            nn.Linear(16, 4))
        with torch.no_grad():
            net[11].weight.add_(torch.randn(16) * 0.1)
            net[11].bias.add_(torch.randn(16) * 0.1)
        actor = Actor(net, in_keys=["observation"])
        td = TensorDict({"observation": torch.randn(BATCH, 5) * 3}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "activations.pbtxt", fused=True)
        layers = network_of(spec).sequence.layers
        self.assertEqual(layers[1].activation.name, "elu")
        self.assertAlmostEqual(layers[1].activation.alpha, 0.5)
        self.assertEqual(layers[2].activation.name, "identity")  # dropout, in eval mode
        self.assertAlmostEqual(layers[4].activation.negative_slope, 0.2)
        self.assertEqual(layers[6].activation.approximate, "tanh")
        self.assertEqual((layers[8].activation.beta, layers[8].activation.threshold), (2.0, 5.0))
        self.assertTrue(layers[9].linear.no_bias)
        self.assertEqual(layers[10].activation.name, "silu")
        self.assertAlmostEqual(layers[11].layer_norm.eps, 1e-3)
        self.assertEqual(layers[13].activation.approximate, "")

    def test_torchrl_mlp_with_dropout_norm_and_activation_kwargs(self):
        net = MLP(in_features=5, out_features=4, num_cells=[16, 16], activation_class=nn.ELU,
                  activation_kwargs={"alpha": 0.3}, dropout=0.1, norm_class=nn.LayerNorm,
                  norm_kwargs={"normalized_shape": 16})
        actor = Actor(net, in_keys=["observation"])
        td = TensorDict({"observation": torch.randn(BATCH, 5)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "mlp_kwargs.pbtxt", fused=True)
        self.assertEqual(network_of(spec).WhichOneof("kind"), "sequence")

    def test_a_plain_mlp_still_exports_as_mlp(self):
        actor = Actor(MLP(in_features=5, out_features=4, num_cells=[32, 32]), in_keys=["observation"])
        td = TensorDict({"observation": torch.randn(BATCH, 5)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "plain_mlp.pbtxt", fused=True)
        self.assertEqual(network_of(spec).WhichOneof("kind"), "mlp")

    def test_q_value_mlp_reading_observation_and_action(self):
        qvalue = ValueOperator(MLP(in_features=7, out_features=1, num_cells=[32, 32], activation_class=nn.ReLU),
                               in_keys=["observation", "action"])
        td = TensorDict({"observation": torch.randn(BATCH, 4), "action": torch.randn(BATCH, 3)}, [BATCH])
        spec, _ = self.export_and_check(qvalue, td, "qvalue.pbtxt")
        layers = network_of(spec).sequence.layers
        self.assertEqual(layers[0].WhichOneof("kind"), "cat")
        self.assertEqual([p.name for p in spec.parameters.tensors][0], "module.layers.1.weight")

    # ---- 2. ConvNet ----

    def ppo_atari_common(self, image):
        cnn = ConvNet(activation_class=nn.ReLU, num_cells=[32, 64, 64], kernel_sizes=[8, 4, 3], strides=[4, 2, 1])
        cnn_out = cnn(torch.ones(1, 4, image, image))
        mlp = MLP(in_features=cnn_out.shape[-1], activation_class=nn.ReLU, activate_last_layer=True,
                  out_features=512, num_cells=[])
        return TensorDictModule(nn.Sequential(cnn, mlp), in_keys=["pixels"], out_keys=["common_features"])

    def test_ppo_atari_actor_value_operator_and_its_operators(self):
        common = self.ppo_atari_common(84)
        policy = ProbabilisticActor(
            TensorDictModule(MLP(in_features=512, out_features=6, activation_class=nn.ReLU, num_cells=[]),
                             in_keys=["common_features"], out_keys=["logits"]),
            in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        value = ValueOperator(MLP(in_features=512, out_features=1, activation_class=nn.ReLU, num_cells=[]),
                              in_keys=["common_features"])
        operator = ActorValueOperator(common, policy, value)
        td = TensorDict({"pixels": torch.rand(2, 4, 84, 84)}, [2])
        actions = TensorDict({"action": nn.functional.one_hot(torch.tensor([1, 4]), 6)}, [2])
        spec, _ = self.export_and_check(operator, td, "atari_operator.pbtxt", actions)
        trunk = network_of(spec, 0).sequence.layers
        self.assertEqual([layer.WhichOneof("kind") for layer in trunk[0].sequence.layers],
                         ["conv2d", "activation"] * 3 + ["flatten"])
        self.assertEqual(list(trunk[0].sequence.layers[0].conv2d.stride), [4, 4])
        self.assertEqual(trunk[1].WhichOneof("kind"), "mlp")
        self.export_and_check(operator.get_policy_operator(), td, "atari_policy.pb", actions)
        self.export_and_check(operator.get_value_operator(), td, "atari_value.json")
        # The fused plan refuses the convolution, naming it; the auto backend ran it on LibTorch.
        path = self.path("atari_policy.pb")
        with self.assertRaises(tdpolicy.CheckError) as raised:
            tdpolicy.check(path, operator.get_policy_operator(), td, backend="fused")
        self.assertIn("conv2d runs on LibTorch", str(raised.exception))

    def test_convnet_with_extra_batch_dims(self):
        actor = Actor(nn.Sequential(self.ppo_atari_common(36).module, MLP(in_features=512, out_features=3)),
                      in_keys=["pixels"])
        td = TensorDict({"pixels": torch.rand(2, 3, 4, 36, 36)}, [2, 3])
        spec, _ = self.export_and_check(actor, td, "atari_time.pbtxt")
        self.assertEqual(list(spec.inputs[0].shape), [4, 36, 36])

    def test_convnet_squeeze_output_padding_and_nn_flatten(self):
        cnn = ConvNet(in_features=3, num_cells=[8, 8], kernel_sizes=[3, 3], strides=[1, 1], aggregator_class=None,
                      squeeze_output=True, activation_class=nn.Tanh)
        td = TensorDict({"pixels": torch.rand(BATCH, 3, 5, 5)}, [BATCH])
        spec, _ = self.export_and_check(Actor(cnn, in_keys=["pixels"]), td, "squeeze.pbtxt")
        self.assertEqual(network_of(spec).sequence.layers[-1].flatten.num_dims, 3)
        net = nn.Sequential(nn.Conv2d(3, 4, 3, padding="same", bias=False), nn.ReLU(),
                            nn.Conv2d(4, 2, (3, 1), stride=(2, 1), padding=(1, 0), dilation=(2, 1), groups=2),
                            nn.Flatten(), nn.LazyLinear(2))
        spec, _ = self.export_and_check(Actor(net, in_keys=["pixels"]), td, "conv_layers.pbtxt")
        layers = network_of(spec).sequence.layers
        self.assertEqual(list(layers[0].conv2d.padding), [1, 1])
        self.assertEqual(layers[2].conv2d.groups, 2)
        self.assertEqual(layers[3].flatten.num_dims, 3)

    # ---- 3. TorchRL's models ----

    def test_ddpg_mlp_actor(self):
        actor = Actor(DdpgMlpActor(action_dim=3, mlp_net_kwargs={"num_cells": [32, 16]}), in_keys=["observation"])
        td = TensorDict({"observation": torch.randn(BATCH, 5)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "ddpg.pbtxt", fused=True)
        self.assertEqual(network_of(spec).mlp.activation, "elu")
        self.assertEqual([p.name for p in spec.parameters.tensors][0], "module.layers.0.weight")

    def test_dueling_cnn_and_mlp_q_networks(self):
        cnn = DuelingCnnDQNet(out_features=5, cnn_kwargs={"num_cells": [8, 8], "kernel_sizes": [3, 3],
                                                          "strides": [2, 1]},
                              mlp_kwargs={"num_cells": 32})
        module = TensorDictModule(cnn, in_keys=["pixels"], out_keys=["action_value"])
        td = TensorDict({"pixels": torch.rand(BATCH, 3, 12, 12)}, [BATCH])
        spec, _ = self.export_and_check(module, td, "dueling_cnn.pbtxt")
        dueling = network_of(spec).dueling
        self.assertEqual(dueling.features.WhichOneof("kind"), "sequence")
        self.assertEqual(dueling.advantage.mlp.out_features, 5)
        mlp = DuelingMlpDQNet(out_features=4, mlp_kwargs_feature={"num_cells": [32], "out_features": 16},
                              mlp_kwargs_output={"num_cells": 16})
        module = TensorDictModule(mlp, in_keys=["observation"], out_keys=["action_value"])
        td = TensorDict({"observation": torch.randn(2, 3, 5)}, [2, 3])
        self.export_and_check(module, td, "dueling_mlp.json")

    def test_actor_critic_wrapper_and_its_operators(self):
        policy = gaussian_actor(nn.Sequential(MLP(in_features=4, out_features=4, num_cells=[16]),
                                              NormalParamExtractor()))
        value = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[16]), in_keys=["observation"])
        wrapper = ActorCriticWrapper(policy, value)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        actions = TensorDict({"action": torch.rand(BATCH, 2) * 1.8 - 0.9}, [BATCH])
        self.export_and_check(wrapper, td, "actor_critic.pbtxt", actions)
        self.export_and_check(wrapper.get_policy_operator(), td, "actor_critic_policy.pbtxt", actions, fused=True)
        self.export_and_check(wrapper.get_value_operator(), td, "actor_critic_value.pbtxt", fused=True)

    # ---- refusals ----

    def test_what_a_sequence_cannot_express_names_the_layer(self):
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
        self.assert_export_error(Actor(net, in_keys=["observation"]), td, "actor.module.1",
                                 "torch.nn.modules.batchnorm.BatchNorm1d", "no tdpolicy.Network counterpart")
        net = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8, bias=False))
        self.assert_export_error(Actor(net, in_keys=["observation"]), td, "actor.module.1", "LayerNorm",
                                 "bias=False")
        pixels = TensorDict({"pixels": torch.rand(BATCH, 3, 6, 6)}, [BATCH])
        net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), nn.Flatten())
        self.assert_export_error(Actor(net, in_keys=["pixels"]), pixels, "actor.module.0", "Conv2d",
                                 "padding_mode='reflect'")


if __name__ == "__main__":
    unittest.main()
