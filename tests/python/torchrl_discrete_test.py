"""Value-based actors and action masking, exported from TorchRL as its DQN tutorial builds them:
QValueActor / QValueModule (one_hot and categorical, with an action mask), the distributional
DistributionalQValueActor, EGreedyModule exploration, and the MaskedCategorical /
MaskedOneHotCategorical distributions with their mask read from a key. Each is exported with
tdpolicy.export (.pbtxt, .pb, .json), checked through the C++ `tdp` by tdpolicy.check to 1e-6
(deterministic outputs, log-probs of given actions; the masked distributions on the fused CPU
plan too), and the RANDOM paths are checked by what they draw (only allowed actions, on both
backends for the masked distributions, the fraction eps replaced, the same draws for the same
seed).

Run by tests/python/exporter_test.sh with the package built into PYTHONPATH and TDP_BIN set.
"""

import os
import subprocess
import unittest
import warnings

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.data import Categorical, MultiOneHot, OneHot
from torchrl.modules import (
    MLP,
    DistributionalQValueActor,
    DistributionalQValueModule,
    EGreedyModule,
    MaskedCategorical,
    MaskedOneHotCategorical,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
)
from torchrl.modules.tensordict_module.common import DistributionalDQNnet

import tdpolicy

from export_case import ExportTestCase  # beside this file, on sys.path by junit_runner.py

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.set_num_threads(1)

BATCH = 6
ACTIONS = 4


def q_net(out_features=ACTIONS):
    return MLP(in_features=3, out_features=out_features, num_cells=[16, 16])


def random_mask(batch, n=ACTIONS):
    """A boolean mask with at least one allowed action per row."""
    mask = torch.rand(batch, n) > 0.4
    mask[torch.arange(batch), torch.randint(0, n, (batch,))] = True
    return mask


def atoms_net(atoms, n=ACTIONS, script=False):
    """[..., 3] -> [..., atoms, n] as users write it: a Linear and an nn.Unflatten (the spec's
    sequence with an unflatten layer), or that network in TorchScript."""
    net = nn.Sequential(nn.Linear(3, atoms * n), nn.Unflatten(-1, (atoms, n)))
    return torch.jit.script(net) if script else net


class TorchRLDiscreteTest(ExportTestCase):
    backends = ("libtorch", "auto")
    fused_tolerance = 1e-6  # these policies agree with Python to 1e-6 on the fused plan too

    # ---- QValueActor / QValueModule ----

    def test_dqn_q_value_actor_one_hot(self):
        actor = QValueActor(q_net(), in_keys=["observation"], spec=OneHot(ACTIONS))
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        spec, report = self.export_and_check(actor, td, "dqn_one_hot.pbtxt")
        self.assertEqual(self.entries(report), {"observation", "action", "action_value", "chosen_action_value"})
        q = spec.module.sequential.modules[1].q_value
        self.assertEqual((q.action_space, q.action_value_key, list(q.out_keys)),
                         ("one_hot", "action_value", ["action", "action_value", "chosen_action_value"]))
        self.assertEqual(list(spec.output_keys), ["action", "action_value", "chosen_action_value"])

    def test_dqn_q_value_module_categorical_with_mask(self):
        actor = TensorDictSequential(
            TensorDictModule(q_net(), in_keys=["observation"], out_keys=["action_value"]),
            QValueModule(spec=Categorical(ACTIONS), action_mask_key="action_mask"))
        td = TensorDict({"observation": torch.randn(BATCH, 3), "action_mask": random_mask(BATCH)}, [BATCH])
        spec, report = self.export_and_check(actor, td, "dqn_categorical.pb", fused=True)
        q = spec.module.sequential.modules[1].q_value
        self.assertEqual((q.action_space, q.action_mask_key), ("categorical", "action_mask"))
        self.assertEqual([i.key for i in spec.inputs], ["observation", "action_mask"])
        # The greedy action is an allowed one, as in Python.
        out = self.tdp_outputs(self.path("dqn_categorical.pb"), td, "--interaction=deterministic")
        self.assertTrue(bool(td["action_mask"].gather(-1, out["action"].long().unsqueeze(-1)).all()))

    def test_dqn_q_value_module_one_hot_with_mask_json(self):
        actor = TensorDictSequential(
            TensorDictModule(q_net(), in_keys=["observation"], out_keys=["action_value"]),
            QValueModule(spec=OneHot(ACTIONS), action_mask_key="action_mask"))
        td = TensorDict({"observation": torch.randn(BATCH, 3), "action_mask": random_mask(BATCH)}, [BATCH])
        self.export_and_check(actor, td, "dqn_one_hot_mask.json", fused=True)

    def test_distributional_q_value_actor_torchscript(self):
        support = torch.linspace(-2.0, 2.0, 5)
        actor = DistributionalQValueActor(TensorDictModule(atoms_net(5, script=True), ["observation"],
                                                           ["action_value"]),
                                          support=support, spec=OneHot(ACTIONS))
        td = TensorDict({"observation": torch.randn(BATCH, 3) * 2}, [BATCH])
        spec, report = self.export_and_check(actor, td, "distributional.pbtxt")
        self.assertEqual(self.entries(report), {"observation", "action", "action_value"})
        modules = spec.module.sequential.modules
        self.assertEqual(len(modules), 2)  # the DQNnet's log-softmax is the q_value's
        self.assertEqual(list(modules[1].q_value.support.shape), [5])
        self.assertIn("module: LibTorch (not lowerable to the fused CPU plan: module.sequential.modules[0]: a "
                      "TensorDictModule around TorchScript", self.describe(self.path("distributional.pbtxt")))

    def describe(self, path):
        result = subprocess.run([os.environ["TDP_BIN"], "describe", path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_distributional_q_value_actor_mlp_as_in_torchrl_docs(self):
        # TorchRL's DistributionalQValueActor docstring: MLP(out_features=(nbins, 4), depth=2), its
        # LazyLinear materialized by the first call; the actor adds the DistributionalDQNnet.
        nbins = 3
        for fmt, space in [("pbtxt", OneHot(ACTIONS)), ("pb", Categorical(ACTIONS)), ("json", OneHot(ACTIONS))]:
            with self.subTest(fmt=fmt, spec=type(space).__name__):
                actor = DistributionalQValueActor(module=MLP(out_features=(nbins, ACTIONS), depth=2),
                                                  support=torch.arange(nbins), spec=space)
                td = TensorDict({"observation": torch.randn(5, 4) * 2}, [5])
                actor(td.clone())
                name = "distributional_mlp.%s" % fmt
                spec, report = self.export_and_check(actor, td, name, fused=True)
                self.assertEqual(self.entries(report), {"observation", "action", "action_value"})
                network = spec.module.sequential.modules[0].network.network
                self.assertEqual([layer.WhichOneof("kind") for layer in network.sequence.layers], ["mlp", "unflatten"])
                self.assertEqual(list(network.sequence.layers[1].unflatten.sizes), [nbins, ACTIONS])
                self.assertEqual(list(spec.module.sequential.modules[1].q_value.support.shape), [nbins])
                self.assertRegex(self.describe(self.path(name)), r"modules\[1\]: fused \(DistributionalQValue")
                out = self.tdp_outputs(self.path(name), td, "--interaction=deterministic", "--backend=fused")
                self.assertEqual(list(out["action_value"].shape), [5, nbins, ACTIONS])

    def test_distributional_q_value_actor_unflatten_with_mask(self):
        # The nn.Sequential(Linear, Unflatten) users write, a mask [..., 1, actions] (TorchRL
        # masks the [..., atoms, actions] values with torch.where), categorical and one-hot. The
        # module is written out: DistributionalQValueActor(action_mask_key=...) would log-softmax
        # the mask too (its DistributionalDQNnet reads the q-value module's in_keys).
        support = torch.linspace(-2.0, 2.0, 5)
        for fmt, space in [("pbtxt", "categorical"), ("json", "one_hot"), ("pb", "one_hot")]:
            with self.subTest(fmt=fmt, space=space):
                actor = TensorDictSequential(
                    TensorDictModule(atoms_net(5), ["observation"], ["action_value"]),
                    DistributionalDQNnet(),
                    DistributionalQValueModule(action_space=space, support=support, action_mask_key="action_mask"))
                td = TensorDict({"observation": torch.randn(BATCH, 3) * 2,
                                 "action_mask": random_mask(BATCH).unsqueeze(-2)}, [BATCH])
                name = "distributional_unflatten_%s.%s" % (space, fmt)
                spec, report = self.export_and_check(actor, td, name, fused=True)
                layers = spec.module.sequential.modules[0].network.network.sequence.layers
                self.assertEqual([layer.WhichOneof("kind") for layer in layers], ["linear", "unflatten"])
                # The fused plan's action is Python's. (Not always an allowed one: TorchRL gives a
                # masked-out action the expected value 0, exp(finfo.min) = 0 on every atom, which
                # beats allowed actions whose expected values are negative.)
                out = self.tdp_outputs(self.path(name), td, "--interaction=deterministic", "--backend=fused")
                self.assertTrue(torch.equal(out["action"].long(), actor(td.clone())["action"]))

    def test_distributional_q_value_module_categorical_with_mask(self):
        actor = TensorDictSequential(
            TensorDictModule(atoms_net(3, script=True), ["observation"], ["action_value"]),
            DistributionalDQNnet(),
            DistributionalQValueModule(action_space="categorical", support=torch.arange(3),
                                       action_mask_key="action_mask"))
        # TorchRL masks the values [..., atoms, actions] with torch.where: the mask broadcasts as
        # [..., 1, actions].
        td = TensorDict({"observation": torch.randn(BATCH, 3) * 2,
                         "action_mask": random_mask(BATCH).unsqueeze(-2)}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "distributional_mask.json")
        self.assertEqual(spec.module.sequential.modules[1].q_value.action_space, "categorical")

    # ---- EGreedyModule ----

    def egreedy_policy(self, spec, mask_key=None):
        actor = TensorDictSequential(
            TensorDictModule(q_net(), in_keys=["observation"], out_keys=["action_value"]),
            QValueModule(spec=spec, action_mask_key=mask_key))
        explore = EGreedyModule(spec, eps_init=0.5, eps_end=0.1, annealing_num_steps=10, action_mask_key=mask_key)
        explore.step(3)  # eps 0.38: the value the spec freezes
        return TensorDictSequential(actor, explore)

    def test_egreedy_deterministic_path_and_frozen_eps(self):
        policy = self.egreedy_policy(OneHot(ACTIONS))
        td = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
        spec, _ = self.export_and_check(policy, td, "egreedy.pbtxt")
        egreedy = spec.module.sequential.modules[1].egreedy
        self.assertAlmostEqual(egreedy.eps, float(torch.tensor(0.38)), places=7)
        self.assertEqual(egreedy.spec.one_hot.n, ACTIONS)

    def test_egreedy_random_path(self):
        n = 2000
        for name, spec, mask_key in [("one_hot", OneHot(ACTIONS), None),
                                     ("categorical_mask", Categorical(ACTIONS), "action_mask")]:
            with self.subTest(spec=name):
                policy = self.egreedy_policy(spec, mask_key)
                example = TensorDict({"observation": torch.randn(BATCH, 3)}, [BATCH])
                big = TensorDict({"observation": torch.randn(n, 3)}, [n])
                if mask_key:
                    example["action_mask"] = random_mask(BATCH)
                    big["action_mask"] = random_mask(n)
                path = self.path("egreedy_%s.pb" % name)
                tdpolicy.export(policy, path, example=example)
                greedy = self.tdp_outputs(path, big, "--interaction=deterministic")["action"]
                drawn = self.tdp_outputs(path, big, "--interaction=random", "--seed=7")["action"]
                again = self.tdp_outputs(path, big, "--interaction=random", "--seed=7")["action"]
                other = self.tdp_outputs(path, big, "--interaction=random", "--seed=8")["action"]
                self.assertTrue(torch.equal(drawn, again))
                self.assertFalse(torch.equal(drawn, other))
                changed = (drawn != greedy).reshape(n, -1).any(-1).double().mean().item()
                # A replaced action differs from the greedy one unless the draw picks it again:
                # 1 / (allowed actions) of the time.
                allowed = big["action_mask"].double().sum(-1) if mask_key else torch.full((n,), float(ACTIONS))
                expected = (0.38 * (1 - 1 / allowed)).mean().item()
                self.assertAlmostEqual(changed, expected, delta=0.04)  # about 4 standard deviations
                if mask_key:
                    self.assertTrue(bool(big["action_mask"].gather(-1, drawn.long().unsqueeze(-1)).all()))
                else:
                    self.assertTrue(bool((drawn.sum(-1) == 1).all()))

    # ---- masked distributions ----

    def test_masked_categorical_actor(self):
        for cls, name, fmt in [(MaskedCategorical, "masked_categorical", "pbtxt"),
                               (MaskedOneHotCategorical, "masked_one_hot_categorical", "json")]:
            with self.subTest(distribution=name):
                actor = ProbabilisticActor(
                    TensorDictModule(q_net(), in_keys=["observation"], out_keys=["logits"]),
                    in_keys={"logits": "logits", "mask": "action_mask"}, out_keys=["action"],
                    distribution_class=cls, return_log_prob=True)
                mask = random_mask(BATCH)
                td = TensorDict({"observation": torch.randn(BATCH, 3), "action_mask": mask}, [BATCH])
                # Given actions, the masked-out ones included (their log-prob is -inf in both).
                index = torch.randint(0, ACTIONS, (BATCH,))
                index[0] = (~mask[0]).nonzero()[0, 0] if (~mask[0]).any() else index[0]
                action = index if cls is MaskedCategorical else nn.functional.one_hot(index, ACTIONS)
                spec, report = self.export_and_check(actor, td, "%s.%s" % (name, fmt),
                                                     TensorDict({"action": action}, [BATCH]), fused=True)
                prob = spec.module.probabilistic_sequential.modules[1].probabilistic
                self.assertEqual(prob.distribution, name)
                self.assertEqual({(b.name, b.key) for b in prob.in_keys_map},
                                 {("logits", "logits"), ("mask", "action_mask")})
                self.assertIn("action_log_prob", self.entries(report))
                # RANDOM draws allowed actions only, from LibTorch's generator and the plan's own.
                n = 500
                big = TensorDict({"observation": torch.randn(n, 3), "action_mask": random_mask(n)}, [n])
                for backend in ("libtorch", "fused"):
                    drawn = self.tdp_outputs(self.path("%s.%s" % (name, fmt)), big, "--interaction=random", "--seed=3",
                                              "--backend=" + backend)["action"]
                    index = drawn.long() if cls is MaskedCategorical else drawn.argmax(-1)
                    self.assertTrue(bool(big["action_mask"].gather(-1, index.unsqueeze(-1)).all()), backend)

    def test_masked_categorical_kwargs(self):
        actor = ProbabilisticActor(
            TensorDictModule(q_net(), in_keys=["observation"], out_keys=["logits"]),
            in_keys={"logits": "logits", "mask": "action_mask"}, out_keys=["action"],
            distribution_class=MaskedCategorical, distribution_kwargs={"neg_inf": -1e9, "use_cross_entropy": False},
            return_log_prob=True)
        mask = random_mask(BATCH)
        td = TensorDict({"observation": torch.randn(BATCH, 3), "action_mask": mask}, [BATCH])
        actions = TensorDict({"action": torch.randint(0, ACTIONS, (BATCH,))}, [BATCH])
        spec, _ = self.export_and_check(actor, td, "masked_kwargs.pbtxt", actions, fused=True)
        kwargs = spec.module.probabilistic_sequential.modules[1].probabilistic.distribution_kwargs
        self.assertEqual(kwargs["neg_inf"].double_value, -1e9)
        self.assertFalse(kwargs["use_cross_entropy"].bool_value)

    # ---- refusals ----

    def test_refusals_name_their_path(self):
        td = TensorDict({"observation": torch.randn(BATCH, 3), "action_mask": random_mask(BATCH)}, [BATCH])
        actor = ProbabilisticActor(
            TensorDictModule(q_net(), in_keys=["observation"], out_keys=["logits"]),
            in_keys={"logits": "logits", "indices": "action_mask"}, out_keys=["action"],
            distribution_class=MaskedCategorical)
        td_indices = td.clone()
        td_indices["action_mask"] = torch.tensor([[0, 2]]).expand(BATCH, 2).clone()
        self.assert_export_error(actor, td_indices, "actor.module.1", "SafeProbabilisticModule",
                                 "the sparse form")
        multi = TensorDictSequential(
            TensorDictModule(q_net(5), in_keys=["observation"], out_keys=["action_value"]),
            QValueModule(action_space="mult_one_hot", var_nums=[2, 3]))
        self.assert_export_error(multi, td, "actor.module.1", "QValueModule", "var_nums has no spec field")
        policy = TensorDictSequential(
            TensorDictModule(q_net(5), in_keys=["observation"], out_keys=["action"]),
            EGreedyModule(MultiOneHot([2, 3]), eps_init=0.1, eps_end=0.1))
        self.assert_export_error(policy, td, "actor.module.1", "EGreedyModule",
                                 "a MultiOneHot spec at actor.module.1.spec: tdpolicy takes Bounded, OneHot and "
                                 "Categorical specs")


if __name__ == "__main__":
    unittest.main()
