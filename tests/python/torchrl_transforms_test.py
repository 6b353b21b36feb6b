"""The environment transforms a policy depends on, and TorchRL's MultiAgentMLP, exported with
tdpolicy.export and compared with the C++ `tdp`.

Transforms: a TransformedEnv over a small batched env that gives what Gym/MuJoCo envs give (float64
observations, uint8 [H, W, C] pixels) is built the way TorchRL users build one; the policy is
exported with transforms=env.transform and the env's raw output as the example, and the C++ spec
fed the raw observation must give what Python's policy gives on the transformed env's output
(1e-6; the fused plan 1e-5 where it lowers). MultiAgentMLP: the four (centralized, share_params)
combinations in a TensorDictModule, and MAPPO's actor as TorchRL's multi-agent tutorial writes it
(MultiAgentMLP and NormalParamExtractor in one nn.Sequential, TanhNormal with per-agent bounds,
the log-prob at ("agents", "sample_log_prob")), which the fused plan lowers whole.

Run by tests/python/exporter_test.sh with the package built into PYTHONPATH and TDP_BIN set.
"""

import os
import subprocess
import unittest
import warnings

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import (
    CatTensors,
    Compose,
    DoubleToFloat,
    DTypeCastTransform,
    EnvBase,
    ObservationNorm,
    RenameTransform,
    StepCounter,
    ToTensorImage,
    TransformedEnv,
    VecNorm,
    VecNormV2,
)
from torchrl.modules import MLP, IndependentNormal, MultiAgentMLP, ProbabilisticActor, TanhNormal

import tdpolicy
from tdpolicy import tensor_pb2

from export_case import ExportTestCase  # beside this file, on sys.path by junit_runner.py

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.set_num_threads(1)

BATCH = 5


class RawEnv(EnvBase):
    """What a Gym / MuJoCo env gives: float64 "observation" [3] and "velocity" [2], and uint8
    "pixels" [6, 5, 3] when asked; a Bounded float32 action [2]. Seeded draws."""

    def __init__(self, pixels=False, observation_dtype=torch.float64):
        super().__init__(batch_size=[BATCH])
        self.pixels = pixels
        self.observation_dtype = observation_dtype
        specs = {"observation": Unbounded((BATCH, 3), dtype=observation_dtype),
                 "velocity": Unbounded((BATCH, 2), dtype=observation_dtype)}
        if pixels:
            specs["pixels"] = Bounded(0, 255, (BATCH, 6, 5, 3), dtype=torch.uint8)
        self.observation_spec = Composite(**specs, shape=(BATCH,))
        self.action_spec = Bounded(-1.0, 1.0, (BATCH, 2))
        self.reward_spec = Unbounded((BATCH, 1))

    def _observation(self):
        dtype = self.observation_dtype
        td = TensorDict({"observation": torch.randn(BATCH, 3, dtype=dtype) * torch.tensor([3.0, 0.5, 8.0], dtype=dtype)
                         + torch.tensor([5.0, -1.0, 2.0], dtype=dtype),
                         "velocity": torch.randn(BATCH, 2, dtype=dtype)}, [BATCH])
        if self.pixels:
            td["pixels"] = torch.randint(0, 256, (BATCH, 6, 5, 3), dtype=torch.uint8)
        td["done"] = torch.zeros(BATCH, 1, dtype=torch.bool)
        td["terminated"] = torch.zeros(BATCH, 1, dtype=torch.bool)
        return td

    def _reset(self, td):
        return self._observation()

    def _step(self, td):
        out = self._observation()
        out["reward"] = torch.randn(BATCH, 1)
        return out

    def _set_seed(self, seed):
        torch.manual_seed(seed)


def gaussian_actor(in_key, in_features, cells=(16, 16)):
    """The PPO tutorial's actor: MLP -> NormalParamExtractor -> TanhNormal, in modules."""
    net = MLP(in_features=in_features, out_features=4, num_cells=list(cells), activation_class=nn.Tanh)
    backbone = TensorDictSequential(
        TensorDictModule(net, in_keys=[in_key], out_keys=["params"]),
        TensorDictModule(NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]))
    return ProbabilisticActor(backbone, in_keys=["loc", "scale"], out_keys=["action"], distribution_class=TanhNormal,
                              distribution_kwargs={"low": -1.0, "high": 1.0}, return_log_prob=True)


# tdp run's flags for the deterministic comparisons, as tdpolicy.check runs it.
DETERMINISTIC = ("--lp_aggregate=false", "--interaction=deterministic")


def max_diff(cpp, python):
    return (cpp.to(torch.float64) - python.detach().to(torch.float64)).abs().max().item()


class TransformsTest(ExportTestCase):
    max_diffs = {}  # the largest |C++ - Python| per check, printed after the tests

    def export_env_policy(self, env, actor, name, seed=3, backends=("libtorch",), atol=1e-6):
        """Exports actor with env.transform, raw env output as the example; checks the spec
        against Python on the transformed env's own output (same seed), and tdpolicy.check."""
        env.base_env.set_seed(seed)
        raw = env.base_env.reset()
        env.set_seed(seed)
        transformed = env.reset()
        path = self.path(name)
        spec = tdpolicy.export(actor, path, raw, transforms=env.transform)
        with torch.no_grad():
            from tensordict.nn import InteractionType, set_interaction_type
            with set_interaction_type(InteractionType.DETERMINISTIC):
                python = actor(transformed.clone())
        inputs = raw.select(*[tuple(i.key.split("/")) if "/" in i.key else i.key for i in spec.inputs])
        for backend in backends:
            tol = 1e-6 if backend == "libtorch" else 1e-5
            cpp = self.tdp_outputs(path, inputs, *DETERMINISTIC, "--backend=" + backend)
            for key in actor.out_keys:
                diff = max_diff(cpp[key], python.get(key))
                self.record_diff("%s %s" % (backend, name.split(".")[0]), diff)
                self.assertLessEqual(diff, tol, "%s %s %s" % (name, backend, key))
            report = tdpolicy.check(path, actor, raw, transforms=env.transform, backend=backend, atol=tol, rtol=tol,
                                    self_tests=backend == backends[0])
            self.assertTrue(report.ok, str(report))
        return spec

    # ---- transforms ----

    def test_double_to_float_observation_norm_cat_compose_in_a_transformed_env(self):
        env = TransformedEnv(RawEnv(), Compose(
            DoubleToFloat(), ObservationNorm(in_keys=["observation"], standard_normal=True),
            CatTensors(in_keys=["observation", "velocity"], out_key="observation_vector"), StepCounter()))
        env.transform[1].init_stats(32, reduce_dim=(0, 1), cat_dim=0)
        actor = gaussian_actor("observation_vector", 5)
        for name in ("compose.pbtxt", "compose.pb", "compose.json"):
            spec = self.export_env_policy(env, actor, name, backends=("libtorch", "fused"))
        self.assertEqual([(i.key, list(i.shape), i.dtype) for i in spec.inputs],
                         [("observation", [3], tensor_pb2.FLOAT64), ("velocity", [2], tensor_pb2.FLOAT64)])
        modules = spec.module.sequential.modules
        self.assertEqual([m.name for m in modules], ["transform0", "transform1", "transform2", "transform3", "policy"])
        self.assertEqual([m.network.network.WhichOneof("kind") for m in modules[:4]],
                         ["to_dtype", "to_dtype", "observation_norm", "cat"])
        self.assertEqual(list(modules[0].overwrite_keys), ["observation"])
        self.assertTrue(modules[2].network.network.observation_norm.standard_normal)

    def test_observation_norm_affine_form_before_double_to_float(self):
        # The tutorial's order: ObservationNorm on the raw float64 observation (float64 statistics,
        # stored as float32 in the spec), then DoubleToFloat.
        env = TransformedEnv(RawEnv(), Compose(ObservationNorm(in_keys=["observation"]), DoubleToFloat()))
        env.transform[0].init_stats(32, reduce_dim=(0, 1), cat_dim=0)
        self.assertEqual(env.transform[0].loc.dtype, torch.float64)
        self.assertFalse(bool(env.transform[0].standard_normal))
        actor = gaussian_actor("observation", 3)
        spec = self.export_env_policy(env, actor, "affine.pbtxt")
        self.assertFalse(spec.module.sequential.modules[0].network.network.observation_norm.standard_normal)

    def test_float32_observation_norm_lowers_to_the_fused_plan(self):
        env = TransformedEnv(RawEnv(observation_dtype=torch.float32),
                             ObservationNorm(in_keys=["observation"], standard_normal=True))
        env.transform.init_stats(32, reduce_dim=(0, 1), cat_dim=0)
        self.export_env_policy(env, gaussian_actor("observation", 3), "norm32.pbtxt",
                               backends=("libtorch", "auto", "fused"))

    def test_vecnorm_and_vecnormv2_statistics_frozen_at_export(self):
        for vecnorm in (VecNorm(in_keys=["observation"], decay=0.99),
                        VecNormV2(in_keys=["observation"], decay=0.99, reduce_batch_dims=True)):
            with self.subTest(type(vecnorm).__name__):
                env = TransformedEnv(RawEnv(), Compose(DoubleToFloat(), vecnorm))
                env.rollout(20)  # the running statistics
                vecnorm.freeze()
                spec = self.export_env_policy(env, gaussian_actor("observation", 3),
                                              "%s.pbtxt" % type(vecnorm).__name__, backends=("libtorch", "fused"))
                norm = spec.module.sequential.modules[1].network.network.observation_norm
                self.assertTrue(norm.standard_normal)
                self.assertEqual(list(norm.shape), [3])

    def test_vecnorm_is_not_moved_by_export(self):
        vecnorm = VecNormV2(in_keys=["observation"], decay=0.99, reduce_batch_dims=True)
        env = TransformedEnv(RawEnv(), Compose(DoubleToFloat(), vecnorm))
        env.rollout(10)
        before = vecnorm._get_loc_scale()
        env.base_env.set_seed(1)
        tdpolicy.export(gaussian_actor("observation", 3), self.path("v.pbtxt"), env.base_env.reset(),
                        transforms=env.transform)
        after = vecnorm._get_loc_scale()
        self.assertTrue((before[0] == after[0]).all() and (before[1] == after[1]).all())
        self.assertFalse(vecnorm.frozen)

    def test_to_tensor_image_uint8_pixels_runs_on_libtorch(self):
        env = TransformedEnv(RawEnv(pixels=True), Compose(ToTensorImage(in_keys=["pixels"]), DoubleToFloat()))
        policy = TensorDictModule(nn.Softplus(), in_keys=["pixels"], out_keys=["features"])
        env.base_env.set_seed(0)
        raw = env.base_env.reset()
        env.set_seed(0)
        transformed = env.reset()
        spec = tdpolicy.export(policy, self.path("pixels.json"), raw, transforms=env.transform)
        self.assertEqual([(i.key, list(i.shape)) for i in spec.inputs], [("pixels", [6, 5, 3])])
        self.assertTrue(spec.module.sequential.modules[0].network.network.to_tensor_image.from_int)
        cpp = self.tdp_outputs(self.path("pixels.json"), raw.select("pixels"), *DETERMINISTIC)
        expected = policy(transformed.clone())["features"]
        self.assertEqual(list(cpp["features"].shape), [BATCH, 3, 6, 5])
        diff = max_diff(cpp["features"], expected)
        self.record_diff("libtorch pixels", diff)
        self.assertLessEqual(diff, 1e-6)
        report = tdpolicy.check(self.path("pixels.json"), policy, raw, transforms=env.transform)
        self.assertTrue(report.ok, str(report))
        # auto runs it on LibTorch; fused refuses, naming the module and why.
        self.assertTrue(tdpolicy.check(self.path("pixels.json"), policy, raw, transforms=env.transform,
                                       backend="auto", self_tests=False).ok)
        with self.assertRaisesRegex(tdpolicy.CheckError, r"module.sequential.modules\[0\]: a ToTensorImage reads "
                                    r"an image \[H, W, C\]; the plan's values are vectors"):
            tdpolicy.check(self.path("pixels.json"), policy, raw, transforms=env.transform, backend="fused")

    # ---- what cannot be exported ----

    def test_unsupported_transforms_are_export_errors(self):
        actor = gaussian_actor("observation", 3)
        cases = [
            (Compose(DoubleToFloat(in_keys=["observation"], in_keys_inv=["action"])),
             r"transforms.transforms\[0\] \(torchrl.envs.transforms._device.DoubleToFloat\): in_keys_inv=\['action'\] "
             r"transforms what the env receives"),
            (Compose(RenameTransform(in_keys=["velocity"], out_keys=["observation"], create_copy=True)),
             r"transforms.transforms\[0\] \(torchrl.envs.transforms._keys.RenameTransform\): writes 'observation', "
             r"which the policy reads; tdpolicy exports ObservationNorm"),
            (Compose(ObservationNorm(in_keys=["observation"])),
             r"transforms.transforms\[0\] .*ObservationNorm\): loc and scale are not initialized: call init_stats"),
            (Compose(DTypeCastTransform(torch.float64, torch.int64, in_keys=["observation"])),
             r"DTypeCastTransform\): dtype_out=torch.int64: tdpolicy's to_dtype casts to a floating dtype"),
        ]
        raw = RawEnv()._observation()
        for transforms, message in cases:
            with self.subTest(message):
                with self.assertRaisesRegex(tdpolicy.ExportError, message):
                    tdpolicy.export(actor, self.path("bad.pbtxt"), raw, transforms=transforms)
        image = TensorDictModule(nn.Softplus(), in_keys=["pixels"], out_keys=["features"])
        pixels = RawEnv(pixels=True)._observation()
        for transform, message in [
                (ToTensorImage(in_keys=["pixels"], unsqueeze=True), r"unsqueeze=True has no spec field"),
                (ToTensorImage(in_keys=["pixels"], dtype=torch.float64), r"dtype=torch.float64: tdpolicy's "
                                                                         r"to_tensor_image writes float32")]:
            with self.subTest(message):
                with self.assertRaisesRegex(tdpolicy.ExportError, message):
                    tdpolicy.export(image, self.path("bad.pbtxt"), pixels, transforms=transform)
        cat = TensorDictModule(nn.Softplus(), in_keys=["joined"], out_keys=["features"])
        with self.assertRaisesRegex(tdpolicy.ExportError, r"CatTensors\): dim=-2: tdpolicy's cat joins on the last"):
            tdpolicy.export(cat, self.path("bad.pbtxt"), raw,
                            transforms=CatTensors(in_keys=["observation", "velocity"], out_key="joined", dim=-2))
        env = TransformedEnv(RawEnv(), VecNormV2(in_keys=["observation"], decay=0.99))
        env.rollout(3)
        with self.assertRaisesRegex(tdpolicy.ExportError, r"VecNormV2\): loc has shape \[5, 3\] but the "
                                    r"observation 'observation' is \[3\] per environment"):
            tdpolicy.export(actor, self.path("bad.pbtxt"), raw, transforms=env.transform)

    # ---- MultiAgentMLP ----

    def multi_agent_td(self, n_agents=3, n_inputs=4):
        return TensorDict({"agents": TensorDict({"observation": torch.randn(BATCH, n_agents, n_inputs) * 2},
                                                [BATCH, n_agents])}, [BATCH])

    def test_multi_agent_mlp_four_ways(self):
        formats = iter(["pbtxt", "pb", "json", "pbtxt"])
        for centralized in (False, True):
            for share_params in (False, True):
                with self.subTest(centralized=centralized, share_params=share_params):
                    net = MultiAgentMLP(n_agent_inputs=4, n_agent_outputs=6, n_agents=3, centralized=centralized,
                                        share_params=share_params, depth=2, num_cells=16, activation_class=nn.Tanh)
                    module = TensorDictModule(net, in_keys=[("agents", "observation")], out_keys=[("agents", "out")])
                    td = self.multi_agent_td()
                    name = "mappo_%d%d.%s" % (centralized, share_params, next(formats))
                    spec = tdpolicy.export(module, self.path(name), td)
                    m = spec.module.network.network.multi_agent_mlp
                    self.assertEqual((m.n_agents, m.n_agent_inputs, m.n_agent_outputs, m.centralized, m.share_params),
                                     (3, 4, 6, centralized, share_params))
                    self.assertEqual((m.mlp.in_features, list(m.mlp.hidden_sizes), m.mlp.out_features),
                                     (12 if centralized else 4, [16, 16], 6))
                    report = tdpolicy.check(self.path(name), module, td)
                    self.assertTrue(report.ok, str(report))
                    # The fused plan lowers every variant (each agent's MLP on its columns of the row).
                    report_fused = tdpolicy.check(self.path(name), module, td, backend="fused", atol=1e-5, rtol=1e-5,
                                                  self_tests=False)
                    self.assertTrue(report_fused.ok, str(report_fused))
                    cpp = self.tdp_outputs(self.path(name), td, *DETERMINISTIC)
                    self.record_diff("libtorch multi_agent_mlp", max_diff(cpp[("agents", "out")], module(td.clone())[
                        ("agents", "out")]))
                    fused = self.tdp_outputs(self.path(name), td, *DETERMINISTIC, "--backend=fused")
                    self.record_diff("fused multi_agent_mlp", max_diff(fused[("agents", "out")], module(td.clone())[
                        ("agents", "out")]))

    def test_mappo_actor_with_a_separate_normal_param_extractor(self):
        for centralized, share_params in ((False, True), (True, False)):
            with self.subTest(centralized=centralized, share_params=share_params):
                net = MultiAgentMLP(n_agent_inputs=4, n_agent_outputs=2 * 2, n_agents=3, centralized=centralized,
                                    share_params=share_params, depth=2, num_cells=32, activation_class=nn.Tanh)
                backbone = TensorDictSequential(
                    TensorDictModule(net, in_keys=[("agents", "observation")], out_keys=[("agents", "params")]),
                    TensorDictModule(NormalParamExtractor(), in_keys=[("agents", "params")],
                                     out_keys=[("agents", "loc"), ("agents", "scale")]))
                actor = ProbabilisticActor(backbone, in_keys=[("agents", "loc"), ("agents", "scale")],
                                           out_keys=[("agents", "action")], distribution_class=TanhNormal,
                                           distribution_kwargs={"low": -1.0, "high": 1.0}, return_log_prob=True)
                td = self.multi_agent_td()
                td.set(("agents", "action"), torch.rand(BATCH, 3, 2) * 1.8 - 0.9)
                path = self.path("mappo_actor_%d%d.pbtxt" % (centralized, share_params))
                tdpolicy.export(actor, path, td)
                report = tdpolicy.check(path, actor, td)
                self.assertTrue(report.ok, str(report))
                self.assertIn("agents/action_log_prob", {k for k, _, _ in report.entries})
                # The fused plan lowers the whole actor: the NormalParamExtractor splits each
                # agent's row, TanhNormal writes one log-prob per agent.
                report_fused = tdpolicy.check(path, actor, td, backend="fused", atol=1e-5, rtol=1e-5, self_tests=False)
                self.assertTrue(report_fused.ok, str(report_fused))

    def test_mappo_actor_as_the_multi_agent_tutorial_writes_it(self):
        # TorchRL's multi-agent PPO tutorial: one TensorDictModule over nn.Sequential(MultiAgentMLP,
        # NormalParamExtractor()), a ProbabilisticActor with TanhNormal bounded by the action spec's
        # per-agent low / high, the log-prob at ("agents", "sample_log_prob").
        n_agents, act = 3, 2
        low = torch.tensor([[-1.0, -2.0], [-0.5, 0.0], [-3.0, -1.0]])
        high = torch.tensor([[1.0, 0.5], [2.0, 1.0], [3.0, 0.25]])
        action_spec = Composite(agents=Composite(action=Bounded(low=low, high=high, shape=(n_agents, act)),
                                                 shape=(n_agents,)))
        formats = iter(["pbtxt", "pb", "json", "pbtxt"])
        for centralized in (False, True):
            for share_params in (False, True):
                with self.subTest(centralized=centralized, share_params=share_params):
                    policy_net = nn.Sequential(
                        MultiAgentMLP(n_agent_inputs=4, n_agent_outputs=2 * act, n_agents=n_agents,
                                      centralized=centralized, share_params=share_params, depth=2, num_cells=32,
                                      activation_class=nn.Tanh),
                        NormalParamExtractor())
                    policy_module = TensorDictModule(policy_net, in_keys=[("agents", "observation")],
                                                     out_keys=[("agents", "loc"), ("agents", "scale")])
                    policy = ProbabilisticActor(
                        module=policy_module, spec=action_spec, in_keys=[("agents", "loc"), ("agents", "scale")],
                        out_keys=[("agents", "action")], distribution_class=TanhNormal,
                        distribution_kwargs={"low": action_spec["agents", "action"].space.low,
                                             "high": action_spec["agents", "action"].space.high},
                        return_log_prob=True, log_prob_key=("agents", "sample_log_prob"))
                    td = self.multi_agent_td(n_agents)
                    td.set(("agents", "action"), low + (high - low) * torch.rand(BATCH, n_agents, act))
                    path = self.path("mappo_tutorial_%d%d.%s" % (centralized, share_params, next(formats)))
                    spec = tdpolicy.export(policy, path, td)
                    prob = spec.module.probabilistic_sequential.modules[1].probabilistic
                    self.assertEqual(list(prob.distribution_kwargs["low"].tensor_value.shape), [n_agents, act])
                    report = tdpolicy.check(path, policy, td)
                    self.assertTrue(report.ok, str(report))
                    self.assertIn("agents/sample_log_prob", {k for k, _, _ in report.entries})
                    # The whole actor on the fused plan, to 1e-5: what `tdp describe` says and the
                    # outputs (action [B, 3, 2], one log-prob per agent [B, 3]).
                    report_fused = tdpolicy.check(path, policy, td, backend="fused", atol=1e-5, rtol=1e-5,
                                                  self_tests=False)
                    self.assertTrue(report_fused.ok, str(report_fused))
                    described = subprocess.run([os.environ["TDP_BIN"], "describe", path], stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT, text=True).stdout
                    self.assertIn("modules[0]: fused (Sequence of 2 layers)", described)
                    self.assertIn("modules[1]: fused (tanh_normal", described)
                    with torch.no_grad():
                        expected = policy(td.clone().exclude(("agents", "action")))
                    fused = self.tdp_outputs(path, td.clone().exclude(("agents", "action")), *DETERMINISTIC,
                                                 "--backend=fused")
                    self.assertEqual(list(fused[("agents", "sample_log_prob")].shape), [BATCH, n_agents])
                    for key in (("agents", "action"), ("agents", "sample_log_prob")):
                        diff = max_diff(fused[key], expected[key])
                        self.assertLessEqual(diff, 1e-5, key)
                        self.record_diff("fused mappo actor " + "/".join(key), diff)

    def test_mappo_actor_with_an_independent_normal_head(self):
        # The same actor with an unbounded Gaussian head (IndependentNormal), two agents.
        for centralized, share_params in ((False, False), (True, True)):
            with self.subTest(centralized=centralized, share_params=share_params):
                policy_net = nn.Sequential(
                    MultiAgentMLP(n_agent_inputs=4, n_agent_outputs=2 * 2, n_agents=2, centralized=centralized,
                                  share_params=share_params, depth=1, num_cells=16, activation_class=nn.Tanh),
                    NormalParamExtractor())
                policy = ProbabilisticActor(
                    TensorDictModule(policy_net, in_keys=[("agents", "observation")],
                                     out_keys=[("agents", "loc"), ("agents", "scale")]),
                    in_keys=[("agents", "loc"), ("agents", "scale")], out_keys=[("agents", "action")],
                    distribution_class=IndependentNormal, return_log_prob=True,
                    log_prob_key=("agents", "sample_log_prob"))
                td = self.multi_agent_td(2)
                td.set(("agents", "action"), torch.randn(BATCH, 2, 2))
                path = self.path("mappo_normal_%d%d.pbtxt" % (centralized, share_params))
                tdpolicy.export(policy, path, td)
                self.assertTrue(tdpolicy.check(path, policy, td).ok)
                for interaction in ("deterministic", "mean", "mode"):
                    report_fused = tdpolicy.check(path, policy, td, backend="fused", atol=1e-5, rtol=1e-5,
                                                  interaction=interaction, self_tests=False)
                    self.assertTrue(report_fused.ok, str(report_fused))


if __name__ == "__main__":
    unittest.main()
