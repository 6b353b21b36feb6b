"""A user's own C++ simulator (samples/custom_env: MountainCar in a shared library declared with
TDP_ENV_LIBRARY) loaded from Python: it joins tdpolicy.envs by name, steps exactly as
Gymnasium's MountainCar-v0 does in float64, runs under tdpolicy.Collector, and bad libraries
give errors naming the file."""

import os
import tempfile
import unittest
import warnings

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential, TensorDictModule
from torch import nn

import tdpolicy
from tdpolicy import envs

warnings.filterwarnings("ignore")
LIBRARY = os.path.join(os.getcwd(), "samples", "custom_env", "libmountain_car.so")


class CustomEnvTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.added = envs.load_library(LIBRARY)

    def test_the_library_joins_make_env_by_name_once(self):
        self.assertEqual(self.added, ["mountaincar"])
        self.assertEqual(envs.load_library(LIBRARY), [])  # loaded already
        self.assertIn("mountaincar", envs.env_names())
        env = envs.make_env("MountainCar", num_envs=3)
        self.assertEqual(env.name, "MountainCar")
        td = env.reset(seed=0)
        self.assertEqual(tuple(td["observation"].shape), (3, 2))
        self.assertTrue(bool(((td["observation"][:, 0] >= -0.6) & (td["observation"][:, 0] <= -0.4)).all()))
        self.assertTrue(bool((td["observation"][:, 1] == 0).all()))

    def test_steps_equal_gymnasium_mountain_car_in_float64(self):
        reference = gym.make("MountainCar-v0")
        env = envs.make_env("mountaincar", 1, dtype=torch.float64, observation_dtype=torch.float64)
        rng = np.random.default_rng(0)
        episodes = {"terminated": 0, "truncated": 0}
        obs, _ = reference.reset(seed=0)
        env.reset_to(torch.tensor([list(reference.unwrapped.state)], dtype=torch.float64))
        pump = True  # episodes alternate: pushing with the velocity (reaches the goal) and random
        for step in range(1000):
            position, velocity = reference.unwrapped.state
            action = (2 if velocity >= 0 else 0) if pump else int(rng.integers(3))
            obs, reward, terminated, truncated, _ = reference.step(action)
            out = env.step(TensorDict(action=torch.tensor([action]), batch_size=[1]))
            expected = np.asarray(reference.unwrapped.state, dtype=np.float64)
            np.testing.assert_allclose(out["final_observation"][0].numpy(), expected, rtol=0, atol=1e-9,
                                       err_msg="step %d" % step)
            self.assertEqual(float(out["reward"][0, 0]), reward)
            self.assertEqual(bool(out["terminated"][0, 0]), terminated, "step %d" % step)
            self.assertEqual(bool(out["truncated"][0, 0]), truncated, "step %d" % step)
            if terminated or truncated:
                episodes["terminated" if terminated else "truncated"] += 1
                obs, _ = reference.reset()
                env.reset_to(torch.tensor([list(reference.unwrapped.state)], dtype=torch.float64))
                pump = not pump
        self.assertGreater(episodes["terminated"], 0)
        self.assertGreater(episodes["truncated"], 0)

    def test_the_collector_runs_a_policy_on_it(self):
        torch.manual_seed(0)
        policy = ProbabilisticTensorDictSequential(
            TensorDictModule(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3)),
                             in_keys=["observation"], out_keys=["logits"]),
            ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"],
                                          distribution_class=torch.distributions.Categorical, return_log_prob=True))
        folder = tempfile.mkdtemp(prefix="custom_env_", dir=os.environ.get("TEST_TMPDIR"))
        path = os.path.join(folder, "mountain_car.pbtxt")
        tdpolicy.export(policy, path, example=TensorDict(observation=torch.randn(4, 2), batch_size=[4]))
        frames = 0
        with tdpolicy.Collector("mountaincar", path, frames_per_batch=64, total_frames=256, num_envs=4) as collector:
            for batch in collector:
                self.assertEqual(tuple(batch["observation"].shape[-1:]), (2,))
                self.assertTrue(bool(((batch["action"] >= 0) & (batch["action"] < 3)).all()))
                self.assertTrue(bool((batch["next", "reward"] == -1).all()))
                frames += batch.numel()
        self.assertEqual(frames, 256)

    def test_bad_libraries_are_named(self):
        with self.assertRaisesRegex(ValueError, "no_such_library.so"):
            envs.load_library("/no_such_library.so")
        libc = "/lib/x86_64-linux-gnu/libc.so.6"
        with self.assertRaisesRegex(ValueError, "libc.so.6: declares no environments.*TDP_ENV_LIBRARY"):
            envs.load_library(libc)
        not_a_library = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "text.so")
        with open(not_a_library, "w") as f:
            f.write("not an ELF file")
        with self.assertRaisesRegex(ValueError, "text.so: cannot be loaded as a shared library"):
            envs.load_library(not_a_library)
        with self.assertRaisesRegex(ValueError, "unknown environment \"nosuchsim\".*mountaincar"):
            envs.make_env("nosuchsim")


if __name__ == "__main__":
    unittest.main()
