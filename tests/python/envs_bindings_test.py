"""tdpolicy.envs: the SDK's batched C++ simulators from Python (reset, step on TensorDicts, specs),
and the errors for bad names, options and actions.

Run by tests/python/exporter_test.sh with the package (tdpolicy/_C.so included) on PYTHONPATH.
"""

import unittest

import torch
from tensordict import TensorDict

from tdpolicy import envs


class EnvsTest(unittest.TestCase):
    def test_every_named_env_resets_and_steps(self):
        self.assertTrue({"cartpole", "pendulum", "goal"} <= set(envs.env_names()))
        for name in envs.env_names():
            with self.subTest(env=name):
                env = envs.make_env(name, num_envs=3)
                self.assertEqual(env.num_envs, 3)
                td = env.reset(seed=0)
                self.assertEqual(td.batch_size, torch.Size([3]))
                for spec in env.observation_spec:
                    self.assertEqual(td.get(spec.key).shape, (3,) + spec.shape)
                    self.assertEqual(td.get(spec.key).dtype, spec.dtype)
                action = TensorDict({}, batch_size=[3])
                for spec in env.action_spec:
                    action.set(spec.key, torch.zeros((3,) + spec.shape, dtype=spec.dtype))
                out = env.step(action)
                for key in ("observation", "final_observation"):
                    self.assertEqual(out[key].shape, td["observation"].shape, key)
                self.assertEqual(out["reward"].shape, torch.Size([3, 1]))
                self.assertEqual(out["terminated"].dtype, torch.bool)
                self.assertEqual(out["truncated"].shape, torch.Size([3, 1]))
                self.assertTrue(torch.equal(out["done"], out["terminated"] | out["truncated"]))

    def test_seeded_resets_repeat(self):
        env = envs.make_env("cartpole", num_envs=4)
        a = env.reset(seed=5)["observation"]
        b = env.reset(seed=5)["observation"]
        self.assertTrue(torch.equal(a, b))

    def test_step_limit_truncates_and_resets(self):
        env = envs.make_env("cartpole", num_envs=2, max_episode_steps=3)
        self.assertEqual(env.max_episode_steps, 3)
        env.reset(seed=0)
        push = {"action": torch.tensor([0, 1])}
        for step in range(3):
            out = env.step(push)
        self.assertTrue(out["truncated"].all())
        self.assertTrue(out["done"].all())
        self.assertTrue(torch.equal(env.episode_steps(), torch.zeros(2, dtype=torch.long)))
        self.assertFalse(torch.equal(out["observation"], out["final_observation"]))

    def test_mask_reset_and_float64(self):
        env = envs.make_env("pendulum", num_envs=3, dtype=torch.float64)
        self.assertEqual(env.dtype, torch.float64)
        env.reset(seed=1)
        before = env.state()
        env.reset(mask=torch.tensor([True, False, False]))
        after = env.state()
        self.assertTrue(torch.equal(before[1:], after[1:]))

    def test_errors_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "nope"):
            envs.make_env("nope")
        with self.assertRaisesRegex(ValueError, "num_envs=0"):
            envs.make_env("cartpole", num_envs=0)
        with self.assertRaisesRegex(ValueError, "max_episode_steps=-1"):
            envs.make_env("cartpole", max_episode_steps=-1)
        with self.assertRaisesRegex(TypeError, "dtype"):
            envs.make_env("cartpole", dtype="float")
        env = envs.make_env("cartpole", num_envs=2)
        env.reset(seed=0)
        with self.assertRaisesRegex(ValueError, "action"):
            env.step({"action": torch.zeros(2, 3)})
        with self.assertRaisesRegex(ValueError, "action"):
            env.step({"other": torch.zeros(2, dtype=torch.long)})
        with self.assertRaisesRegex(TypeError, "step"):
            env.step([1, 2])
        with self.assertRaisesRegex(TypeError, "seed"):
            env.reset()


if __name__ == "__main__":
    unittest.main()
