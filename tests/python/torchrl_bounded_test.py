"""TorchRL's bounded and deterministic actors exported with tdpolicy.export and compared with the C++
`tdp` by tdpolicy.check: TD3's TanhModule actor, DDPG's TanhDelta actor, safe=True projections
onto Bounded / OneHot / Categorical specs, per-dimension and per-agent tensor bounds, TorchRL's
TruncatedNormal, and check(interaction="mean") on a distribution without a mean.

Run by tests/python/exporter_test.sh with the package built into PYTHONPATH and TDP_BIN set.
"""

import unittest
import warnings

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.data import Binary, Bounded, Categorical, OneHot
from torchrl.modules import (
    MLP,
    Actor,
    IndependentNormal,
    OneHotCategorical,
    ProbabilisticActor,
    TanhDelta,
    TanhModule,
    TanhNormal,
)
from torchrl.modules import TruncatedNormal as TorchRLTruncatedNormal

import tdpolicy

from export_case import ExportTestCase  # beside this file, on sys.path by junit_runner.py

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
torch.set_num_threads(1)

BATCH = 6


def mlp(in_features, cells, out_features, activation=nn.ReLU):
    return MLP(in_features=in_features, out_features=out_features, num_cells=list(cells),
               activation_class=activation)


class TorchRLBoundedTest(ExportTestCase):
    formats = (".pbtxt", ".pb", ".json")  # each export in the three forms tdp reads

    def assert_not_lowered(self, path, td, why):
        result = self.tdp_run(path, td, "--backend=fused")
        self.assertNotEqual(result.returncode, 0)
        self.assertRegex(result.stderr, why)

    # ---- TD3 / DDPG deterministic actors --------------------------------------------------------

    def test_td3_actor_with_tanh_module(self):
        # torchrl sota-implementations/td3/utils.py: make_td3_agent.
        action_spec = Bounded(low=torch.tensor([-1.0, -2.0, 0.0]), high=torch.tensor([1.0, 0.5, 3.0]), shape=(3,))
        actor_module = TensorDictModule(mlp(5, [32, 32], 3), in_keys=["observation"], out_keys=["param"])
        actor = TensorDictSequential(
            actor_module, TanhModule(in_keys=["param"], out_keys=["action"], spec=action_spec))
        td = TensorDict({"observation": torch.randn(BATCH, 5) * 2}, [BATCH])
        spec, report = self.export_and_check(actor, td, "td3", fused=True)
        tanh = spec.module.sequential.modules[1].tanh
        self.assertEqual(list(tanh.in_keys), ["param"])
        self.assertEqual(list(tanh.out_keys), ["action"])
        self.assertEqual(list(tanh.bounds[0].low.shape), [3])
        self.assertFalse(tanh.clamp)
        self.assertEqual(self.entries(report), {"observation", "param", "action"})

    def test_tanh_module_in_place_with_clamp_and_per_agent_bounds(self):
        low = torch.tensor([[-1.0, -2.0], [0.0, -0.5]])
        high = torch.tensor([[1.0, 2.0], [4.0, 0.5]])
        actor = TensorDictSequential(
            TensorDictModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["action"]),
            TanhModule(in_keys=["action"], low=low, high=high, clamp=True))
        td = TensorDict({"observation": torch.randn(BATCH, 2, 3) * 20}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "tanh_clamp")
        tanh = spec.module.sequential.modules[1].tanh
        self.assertTrue(tanh.clamp)
        self.assertEqual(list(tanh.out_keys), [])
        self.assertEqual(list(tanh.bounds[0].high.shape), [2, 2])
        # Per-agent inputs are 2-D per environment: the fused plan's Linear reads vectors only.
        self.assert_not_lowered(self.path("tanh_clamp.pbtxt"), td, "not lowerable to the fused CPU plan")

    def test_ddpg_actor_with_tanh_delta(self):
        # torchrl sota-implementations/ddpg/utils.py: make_ddpg_agent.
        action_spec = Bounded(low=torch.tensor([-1.0, -3.0]), high=torch.tensor([2.0, 3.0]), shape=(2,))
        actor = ProbabilisticActor(
            TensorDictModule(mlp(4, [16, 16], 2), in_keys=["observation"], out_keys=["param"]),
            in_keys=["param"], spec=action_spec, distribution_class=TanhDelta,
            distribution_kwargs={"low": action_spec.space.low, "high": action_spec.space.high},
            return_log_prob=False)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "ddpg", fused=True)
        prob = spec.module.probabilistic_sequential.modules[1].probabilistic
        self.assertEqual(prob.distribution, "tanh_delta")
        self.assertEqual(list(prob.distribution_kwargs["low"].tensor_value.shape), [2])
        # MEAN: TanhDelta has no closed-form mean, so TorchRL (and LibTorch) average draws, each the
        # Delta's squashed point; the fused plan writes that point (to 1e-5 of the average).
        self.export_and_check(actor, td, "ddpg_mean", fused=True, formats=(".pbtxt",), interaction="mean")

    def test_tanh_delta_log_prob_and_scalar_bounds(self):
        actor = ProbabilisticActor(
            TensorDictModule(nn.Linear(4, 2), in_keys=["observation"], out_keys=["param"]),
            in_keys=["param"], distribution_class=TanhDelta, distribution_kwargs={"low": -2.0, "high": 2.0},
            return_log_prob=True)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        with torch.no_grad():
            action = actor(td.clone())["action"]
        actions = TensorDict({"action": torch.cat([action[:3], action[3:] + 0.5])}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "tanh_delta", actions, fused=True, formats=(".pbtxt",))
        prob = spec.module.probabilistic_sequential.modules[1].probabilistic
        self.assertEqual(prob.distribution_kwargs["low"].double_value, -2.0)

    # ---- safe=True ------------------------------------------------------------------------------

    def test_safe_actor_bounded(self):
        spec = Bounded(low=-0.5, high=torch.tensor([0.5, 0.25]), shape=(2,))
        actor = Actor(mlp(3, [16], 2), in_keys=["observation"], spec=spec, safe=True)
        td = TensorDict({"observation": torch.randn(BATCH, 3) * 3}, [BATCH])
        with torch.no_grad():
            raw = actor.module(td["observation"])
        self.assertTrue(((raw < -0.5) | (raw > 0.25)).any())  # the projection does something
        exported, _ = self.export_and_check(actor, td, "safe_bounded", fused=True)
        self.assertEqual([p.key for p in exported.module.projections], ["action"])
        self.assertTrue(exported.module.projections[0].spec.HasField("bounded"))

    def test_safe_probabilistic_actor_bounded(self):
        # The scale is an input, so that the deterministic loc (beyond the bounds) is projected.
        actor = ProbabilisticActor(
            TensorDictModule(mlp(3, [16], 2), in_keys=["observation"], out_keys=["loc"]),
            in_keys=["loc", "scale"], spec=Bounded(-0.2, 0.2, shape=(2,)), safe=True,
            distribution_class=IndependentNormal, return_log_prob=True)
        td = TensorDict({"observation": torch.randn(BATCH, 3) * 3, "scale": torch.full((BATCH, 2), 0.3)}, [BATCH])
        actions = TensorDict({"action": torch.randn(BATCH, 2) * 0.1}, [BATCH])
        exported, _ = self.export_and_check(actor, td, "safe_normal", actions)
        prob_module = exported.module.probabilistic_sequential.modules[1]
        self.assertEqual([p.key for p in prob_module.projections], ["action"])
        self.assert_not_lowered(self.path("safe_normal.pbtxt"), td, "only Bounded ones around a network are lowered")

    def test_safe_one_hot_and_categorical(self):
        # OneHot: the sample (float) is not in the spec (bool): projected, one-hot in bool (which
        # OneHotCategorical cannot score, in Python as in C++: no log-prob here).
        logits = TensorDictModule(mlp(4, [16], 3), in_keys=["observation"], out_keys=["logits"])
        actor = ProbabilisticActor(logits, in_keys=["logits"], spec=OneHot(3), safe=True,
                                   distribution_class=OneHotCategorical)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        exported, _ = self.export_and_check(actor, td, "safe_one_hot")
        self.assertEqual(exported.module.probabilistic_sequential.modules[1].projections[0].spec.one_hot.n, 3)
        with torch.no_grad():
            self.assertEqual(actor(td.clone())["action"].dtype, torch.bool)
        # A float OneHot spec holds the sample already: nothing is projected, log-probs as usual.
        actor = ProbabilisticActor(logits, in_keys=["logits"], spec=OneHot(3, dtype=torch.float32), safe=True,
                                   distribution_class=OneHotCategorical, return_log_prob=True)
        actions = TensorDict({"action": nn.functional.one_hot(torch.randint(0, 3, (BATCH,)), 3).float()}, [BATCH])
        self.export_and_check(actor, td, "safe_one_hot_float", actions, formats=(".pbtxt",))
        # Categorical: a network's float output rounded and clamped into [0, n - 1].
        actor = Actor(nn.Linear(4, 2), in_keys=["observation"], spec=Categorical(4, shape=(2,)), safe=True)
        with torch.no_grad():
            actor.module.weight.mul_(5)
        exported, _ = self.export_and_check(actor, td, "safe_categorical")
        self.assertEqual(exported.module.projections[0].spec.categorical.n, 4)
        self.assert_not_lowered(self.path("safe_categorical.pbtxt"), td, "only float32 Bounded ones are lowered")
        with torch.no_grad():
            out = actor(td.clone())["action"]
        self.assertTrue(((out == 0) | (out == 3)).any())

    def test_safe_refusals_name_the_spec(self):
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        masked = OneHot(3)
        masked.update_mask(torch.tensor([True, False, True]))
        # (The network writes a bool one-hot: TorchRL itself cannot test a float against a mask.)
        def one_hot(x):
            return nn.functional.one_hot(x[..., :3].argmax(-1), 3).bool()
        self.assert_export_error(Actor(one_hot, in_keys=["observation"], spec=masked, safe=True), td,
                                 "actor", "Actor", r"masked OneHot spec at actor spec\['action'\]")
        self.assert_export_error(Actor(nn.Linear(4, 3), in_keys=["observation"], spec=Binary(3), safe=True), td,
                                 "actor", "Actor", "Bounded, OneHot and Categorical")

    # ---- tensor bounds ----------------------------------------------------------------------------

    def tanh_normal_actor(self, in_features, act, low, high, agents=None):
        shape = (agents, act) if agents else (act,)
        net = TensorDictModule(nn.Linear(in_features, 2 * act), in_keys=["observation"], out_keys=["p"])
        split = TensorDictModule(tdpolicy_extractor(), in_keys=["p"], out_keys=["loc", "scale"])
        return ProbabilisticActor(TensorDictSequential(net, split), in_keys=["loc", "scale"],
                                  distribution_class=TanhNormal, distribution_kwargs={"low": low, "high": high},
                                  return_log_prob=True), shape

    def test_tanh_normal_per_dimension_bounds(self):
        low, high = torch.tensor([-1.0, -2.0, 0.5]), torch.tensor([1.0, 0.0, 3.0])
        actor, shape = self.tanh_normal_actor(4, 3, low, high)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        actions = TensorDict({"action": low + (high - low) * torch.rand(BATCH, 3)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "tanh_normal_dims", actions, fused=True)
        kwargs = spec.module.probabilistic_sequential.modules[1].probabilistic.distribution_kwargs
        self.assertEqual(list(kwargs["low"].tensor_value.shape), [3])
        # One bound a tensor, the other a number.
        actor, _ = self.tanh_normal_actor(4, 3, low, 4.0)
        self.export_and_check(actor, td, "tanh_normal_mixed", actions, fused=True, formats=(".pbtxt",))

    def test_tanh_normal_per_agent_bounds(self):
        agents, act = 2, 3
        low = torch.tensor([[-1.0, -2.0, 0.5], [-3.0, -1.0, 0.0]])
        high = torch.tensor([[1.0, 0.0, 3.0], [3.0, 1.0, 0.25]])
        actor, _ = self.tanh_normal_actor(4, act, low, high, agents)
        td = TensorDict({"observation": torch.randn(BATCH, agents, 4)}, [BATCH])
        actions = TensorDict({"action": low + (high - low) * torch.rand(BATCH, agents, act)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "tanh_normal_agents", actions)
        kwargs = spec.module.probabilistic_sequential.modules[1].probabilistic.distribution_kwargs
        self.assertEqual(list(kwargs["high"].tensor_value.shape), [agents, act])
        # A constant per-agent bound is one value: written as a number.
        actor, _ = self.tanh_normal_actor(4, act, torch.full((agents, act), -2.0), torch.full((agents, act), 2.0),
                                          agents)
        spec, _ = self.export_and_check(actor, td, "tanh_normal_agents_constant", None, formats=(".pbtxt",))
        kwargs = spec.module.probabilistic_sequential.modules[1].probabilistic.distribution_kwargs
        self.assertEqual(kwargs["low"].double_value, -2.0)

    # ---- TorchRL's TruncatedNormal ---------------------------------------------------------------

    def test_torchrl_truncated_normal(self):
        net = TensorDictModule(nn.Linear(4, 4), in_keys=["observation"], out_keys=["p"])
        split = TensorDictModule(tdpolicy_extractor(), in_keys=["p"], out_keys=["loc", "scale"])
        for kwargs in ({"low": -2.0, "high": 1.5, "tanh_loc": True, "upscale": 3.0},
                       {"low": torch.tensor([-1.0, -2.0]), "high": torch.tensor([1.0, 0.5])}):
            actor = ProbabilisticActor(TensorDictSequential(net, split), in_keys=["loc", "scale"],
                                       distribution_class=TorchRLTruncatedNormal, distribution_kwargs=kwargs,
                                       return_log_prob=True)
            td = TensorDict({"observation": torch.randn(BATCH, 4) * 2}, [BATCH])
            actions = torch.rand(BATCH, 2) * 2 - 1.5
            actions[0, 1] = 5.0  # outside [low, high]: -inf
            actions = TensorDict({"action": actions}, [BATCH])
            spec, _ = self.export_and_check(actor, td, "torchrl_truncated_normal", actions, formats=(".pbtxt",))
            self.export_and_check(actor, td, "torchrl_truncated_normal_mode", None, formats=(".json",),
                                  interaction="mode")
            prob = spec.module.probabilistic_sequential.modules[1].probabilistic
            self.assertEqual(prob.distribution, "torchrl_truncated_normal")

    # ---- check(interaction="mean") ------------------------------------------------------------

    def test_check_mean_without_a_python_mean_reports_it(self):
        actor, _ = self.tanh_normal_actor(4, 2, -1.0, 1.0)
        td = TensorDict({"observation": torch.randn(BATCH, 4)}, [BATCH])
        path = self.path("tanh_normal_mean.pbtxt")
        tdpolicy.export(actor, path, example=td)
        report = tdpolicy.check(path, actor, td, interaction="mean")
        self.assertTrue(report.ok, str(report))
        self.assertGreater(len(report.skipped()), 0)
        self.assertIn("NotImplementedError", str(report))
        self.assertIn("SKIP", str(report))


def tdpolicy_extractor():
    from tensordict.nn import NormalParamExtractor
    return NormalParamExtractor()


if __name__ == "__main__":
    unittest.main()
