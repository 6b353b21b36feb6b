"""samples/python/ppo_torchrl.py, in short runs (a few batches: whether it runs, not whether it
learns; the learning runs are in samples/README.md):

- Pendulum through tdpolicy.Collector and through TorchRL's Collector over Gymnasium's
  Pendulum-v1: the batches train, the policy exports, the C++ evaluation runs and reports a
  return Pendulum can give;
- HalfCheetah-v5, whose actor and critic normalize the observation inside them: the exported
  spec reads the raw observation, and the C++ actor acting on raw observations agrees with the
  Python policy (deterministic) to 1e-5, normalization included;
- a task the sample does not know is refused naming the flag and the choices.

Run by tests/python/exporter_test.sh with the package (tdpolicy/_C.so included) on PYTHONPATH.
"""

import contextlib
import io
import math
import os
import re
import sys
import tempfile
import unittest
import warnings

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "samples", "python"))
import ppo_torchrl  # noqa: E402

EVALUATION = re.compile(r"C\+\+ evaluation .*: mean return (\S+) \((\S+)\)")


def run_sample(*args):
    """main(args) with its output captured: (exit status, output, C++ mean return, spec path)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = ppo_torchrl.main(list(args))
    text = out.getvalue()
    match = EVALUATION.search(text)
    if match is None:
        raise AssertionError("no C++ evaluation line in the sample's output:\n" + text)
    return status, text, float(match.group(1)), match.group(2)


SHORT = ["--num_envs", "4", "--frames_per_batch", "256", "--total_frames", "512", "--epochs", "2",
         "--minibatch", "128", "--eval_episodes", "4"]


class PendulumTest(unittest.TestCase):
    def check_run(self, collector):
        status, text, score, path = run_sample("--env", "pendulum", "--collector", collector, *SHORT)
        self.assertEqual(len(re.findall(r"^frames ", text, re.M)), 2, text)  # two batches of 256
        self.assertIn("512 frames (%s collector)" % collector, text)
        self.assertTrue(os.path.isfile(path), path)
        # Pendulum's reward per step is in [-16.27, 0] over 200 steps; a few hundred frames of
        # training leave it far below the -250 target, so the exit status says "not reached".
        self.assertTrue(-16.3 * 200 <= score <= 0 and math.isfinite(score), score)
        self.assertEqual(status, 0 if score >= -250 else 1)

    def test_cpp_collector(self):
        self.check_run("tdpolicy")

    def test_torchrl_collector_over_gymnasium(self):
        self.check_run("torchrl")


class HalfCheetahTest(unittest.TestCase):
    def test_normalization_travels_with_the_policy(self):
        import tdpolicy
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        torch.manual_seed(0)
        policy, value = ppo_torchrl.make_modules("halfcheetah")
        loc, scale = ppo_torchrl.observation_stats("halfcheetah")
        self.assertEqual(tuple(loc.shape), (17,))
        self.assertTrue(bool((scale > 0).all()))
        # Raw observations of the C++ task after some random steps, where velocities are far from
        # the normalized range.
        sim = tdpolicy.envs.make_env("halfcheetah-v5", num_envs=8)
        obs = sim.reset(seed=3)["observation"]
        for _ in range(20):
            obs = sim.step(TensorDict(action=torch.rand(8, 6) * 2 - 1, batch_size=[8]))["observation"]
        self.assertGreater(obs.abs().max().item(), 2.0)
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, "halfcheetah.pbtxt")
        tdpolicy.export(policy, path, example=TensorDict(observation=torch.zeros(1, 17), batch_size=[1]))
        actor = tdpolicy.Actor.load(path, interaction="deterministic", seed=0)
        self.assertEqual(actor.in_keys, ["observation"])
        cpp = actor.act(observation=obs)["action"]
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            python = policy(TensorDict(observation=obs, batch_size=[8]))["action"]
        self.assertEqual(tuple(cpp.shape), (8, 6))
        torch.testing.assert_close(cpp, python, atol=1e-5, rtol=1e-5)
        # What the actor's networks read is (observation - loc) / scale, the statistics of
        # random-action steps; the C++ actor above agreed with it on raw observations.
        written = policy(TensorDict(observation=obs, batch_size=[8]))["observation_norm"]
        torch.testing.assert_close(written, (obs - loc) / scale, atol=1e-4, rtol=1e-4)
        self.assertLess(written.abs().mean().item(), obs.abs().mean().item())

    def test_short_run(self):
        status, text, score, path = run_sample("--env", "halfcheetah", "--num_envs", "2", "--frames_per_batch", "512",
                                               "--total_frames", "1024", "--epochs", "1", "--minibatch", "256",
                                               "--eval_episodes", "2")
        self.assertIn("1024 frames (tdpolicy collector)", text)
        self.assertTrue(os.path.isfile(path), path)
        self.assertTrue(math.isfinite(score), score)
        self.assertEqual(status, 0 if score >= 1000 else 1)


class ArgumentTest(unittest.TestCase):
    def test_unknown_task(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as raised:
            ppo_torchrl.main(["--env", "acrobot"])
        self.assertEqual(raised.exception.code, 2)
        self.assertIn("--env: invalid choice: 'acrobot'", err.getvalue())
        self.assertIn("halfcheetah", err.getvalue())


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    unittest.main()
