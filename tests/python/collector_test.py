"""tdpolicy.Collector: C++ environments and the C++ actor stepped in C++, batches in TorchRL's layout.

- a batch has the keys, shapes and dtypes TorchRL's own Collector (SyncDataCollector before
  TorchRL 0.13) gives over a batched Gymnasium CartPole with the same policy;
- done / reset semantics: trajectory ids grow at resets only, episodes are truncated at the step
  limit, ("next", "observation") is the observation before the auto-reset, batches chain;
- weights of the live module reach the C++ actor through update_policy_weights_() on the next
  batch (the one after, with prefetch);
- TorchRL's GAE takes a batch as it is;
- bad arguments raise naming them; breaking out of iteration and shutdown() leave no thread.

Run by tests/python/exporter_test.sh with the package (tdpolicy/_C.so included) on PYTHONPATH.
"""

import gc
import os
import threading
import unittest
import warnings

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

import tdpolicy
from tdpolicy import envs

POLICY = os.path.join(os.getcwd(), "policies", "cartpole_categorical.pbtxt")


def categorical_policy(seed=0):
    from torchrl.modules import MLP, ProbabilisticActor

    torch.manual_seed(seed)
    net = TensorDictModule(MLP(in_features=4, out_features=2, num_cells=[16]), ["observation"], ["logits"])
    return ProbabilisticActor(net, in_keys=["logits"], distribution_class=torch.distributions.Categorical,
                              return_log_prob=True)


def thread_count():
    return len(threading.enumerate()), len(os.listdir("/proc/self/task"))


class LayoutTest(unittest.TestCase):
    def test_same_keys_shapes_and_dtypes_as_torchrl(self):
        warnings.filterwarnings("ignore")
        from torchrl.collectors import Collector as TorchRLCollector
        from torchrl.envs import GymEnv, SerialEnv

        policy = categorical_policy()
        env = SerialEnv(2, lambda: GymEnv("CartPole-v1", categorical_action_encoding=True))
        reference = TorchRLCollector(env, policy, frames_per_batch=20, total_frames=20)
        want = next(iter(reference))
        reference.shutdown()
        with tdpolicy.Collector("cartpole", policy, frames_per_batch=20, num_envs=2) as collector:
            got = collector.next()
        self.assertEqual(got.batch_size, want.batch_size)
        self.assertEqual(sorted(map(str, got.keys(True, True))), sorted(map(str, want.keys(True, True))))
        for key in want.keys(True, True):
            self.assertEqual((got.get(key).shape, got.get(key).dtype), (want.get(key).shape, want.get(key).dtype), key)
        self.assertFalse(got["action"].is_inference())

    def test_lengths_and_frames(self):
        collector = tdpolicy.Collector("cartpole", POLICY, frames_per_batch=32, total_frames=100, num_envs=4)
        self.assertEqual(len(collector), 4)
        batches = list(collector)
        self.assertEqual(len(batches), 4)
        self.assertEqual(collector.frames, 128)
        self.assertEqual(batches[0].batch_size, torch.Size([4, 8]))
        with self.assertRaises(TypeError):
            len(tdpolicy.Collector("cartpole", POLICY, frames_per_batch=32, num_envs=4))


class DoneResetTest(unittest.TestCase):
    def test_trajectories_truncation_and_next_observation(self):
        env = envs.make_env("cartpole", num_envs=3, max_episode_steps=6)
        collector = tdpolicy.Collector(env, POLICY, frames_per_batch=3 * 20)
        batch, second = collector.next(), collector.next()
        done = batch["next", "done"].squeeze(-1)
        truncated = batch["next", "truncated"].squeeze(-1)
        ids = batch["collector", "traj_ids"]
        self.assertTrue(torch.equal(ids[:, 0], torch.arange(3)))
        self.assertTrue(truncated[:, 5].all(), "the step limit truncates the 6th step")
        self.assertFalse(batch["done"].any() or batch["terminated"].any() or batch["truncated"].any())
        self.assertTrue(torch.equal(done, batch["next", "terminated"].squeeze(-1) | truncated))
        for i in range(3):
            steps = 0
            for t in range(19):
                steps += 1
                if done[i, t]:
                    self.assertGreater(ids[i, t + 1], ids[i, t])
                    self.assertFalse(torch.equal(batch["observation"][i, t + 1], batch["next", "observation"][i, t]))
                    self.assertLessEqual(steps, 6)
                    self.assertEqual(bool(truncated[i, t]), steps == 6 and not batch["next", "terminated"][i, t, 0])
                    steps = 0
                else:
                    self.assertEqual(ids[i, t + 1], ids[i, t])
                    self.assertTrue(torch.equal(batch["observation"][i, t + 1], batch["next", "observation"][i, t]))
        # Ids are never reused, and the next batch goes on from where this one stopped.
        self.assertEqual(len(set(ids.flatten().tolist())), int(ids.max()) + 1 - int(ids.min()))
        for i in range(3):
            if not done[i, -1]:
                self.assertEqual(second["collector", "traj_ids"][i, 0], ids[i, -1])
                self.assertTrue(torch.equal(second["observation"][i, 0], batch["next", "observation"][i, -1]))
            else:
                self.assertGreater(second["collector", "traj_ids"][i, 0], ids.max())

    def test_seeds(self):
        def first(seed):
            return tdpolicy.Collector("cartpole", tdpolicy.Actor.load(POLICY, seed=1), frames_per_batch=16,
                                      num_envs=2, seed=seed).next()["next", "observation"]
        self.assertTrue(torch.equal(first(3), first(3)))
        self.assertFalse(torch.equal(first(3), first(4)))
        collector = tdpolicy.Collector("cartpole", tdpolicy.Actor.load(POLICY, seed=1), frames_per_batch=16, num_envs=2)
        self.assertEqual(collector.set_seed(3), 3)


class GaeTest(unittest.TestCase):
    def test_torchrl_gae_takes_a_batch(self):
        from torchrl.modules import MLP
        from torchrl.objectives.value import GAE

        value = TensorDictModule(MLP(in_features=4, out_features=1, num_cells=[8]), ["observation"], ["state_value"])
        batch = tdpolicy.Collector("cartpole", POLICY, frames_per_batch=64, num_envs=4).next()
        out = GAE(gamma=0.99, lmbda=0.95, value_network=value)(batch)
        self.assertEqual(out["advantage"].shape, torch.Size([4, 16, 1]))
        self.assertTrue(torch.isfinite(out["advantage"]).all())


class WeightsTest(unittest.TestCase):
    def check_update(self, prefetch):
        policy = categorical_policy()
        collector = tdpolicy.Collector("cartpole", policy, frames_per_batch=64, num_envs=4,
                                       interaction="deterministic", prefetch=prefetch)
        first = collector.next()
        target = 1 - int(first["action"][0, 0])
        self.assertFalse(bool((first["action"] == target).all()))
        with torch.no_grad():
            for p in policy.parameters():
                p.zero_()
            list(policy.parameters())[-1][target] = 1.0  # the output bias: the target action wins
        collector.update_policy_weights_()
        if prefetch:
            self.assertFalse(bool((collector.next()["action"] == target).all()), "collected before the update")
        self.assertTrue(bool((collector.next()["action"] == target).all()))
        collector.shutdown()

    def test_update_reaches_the_next_batch(self):
        self.check_update(prefetch=False)

    def test_update_with_prefetch_reaches_the_batch_after(self):
        self.check_update(prefetch=True)

    def test_update_from_another_module(self):
        policy = categorical_policy()
        collector = tdpolicy.Collector("cartpole", POLICY, frames_per_batch=8, num_envs=2)
        with self.assertRaisesRegex(ValueError, "policy_or_weights"):
            collector.update_policy_weights_()
        with self.assertRaises((KeyError, ValueError)):
            collector.update_policy_weights_(policy)  # a 4 -> 16 -> 2 MLP, not the spec's 64, 64


class ErrorsTest(unittest.TestCase):
    def test_bad_arguments_are_named(self):
        with self.assertRaisesRegex(ValueError, "frames_per_batch=10"):
            tdpolicy.Collector("cartpole", POLICY, frames_per_batch=10, num_envs=3)
        with self.assertRaisesRegex(ValueError, "total_frames=0"):
            tdpolicy.Collector("cartpole", POLICY, frames_per_batch=6, total_frames=0, num_envs=3)
        with self.assertRaisesRegex(ValueError, "nope"):
            tdpolicy.Collector("nope", POLICY, frames_per_batch=6)
        with self.assertRaisesRegex(TypeError, "policy"):
            tdpolicy.Collector("cartpole", 42, frames_per_batch=6)
        with self.assertRaisesRegex(TypeError, "env"):
            tdpolicy.Collector(42, POLICY, frames_per_batch=6)
        with self.assertRaisesRegex(ValueError, "interaction"):
            tdpolicy.Collector("cartpole", POLICY, frames_per_batch=6, interaction="sideways")
        with self.assertRaisesRegex(ValueError, "seed"):
            tdpolicy.Collector("cartpole", POLICY, frames_per_batch=6, seed=-2)
        with self.assertRaisesRegex(ValueError, "observation"):
            tdpolicy.Collector("pendulum", POLICY, frames_per_batch=6)
        with self.assertRaisesRegex(TypeError, "frames_per_batch"):
            tdpolicy.Collector("cartpole", POLICY, frames_per_batch=6.0)


class ThreadsTest(unittest.TestCase):
    def test_break_and_shutdown_leave_no_thread(self):
        before = thread_count()
        collector = tdpolicy.Collector("cartpole", POLICY, frames_per_batch=64, num_envs=8, prefetch=True)
        for i, _ in enumerate(collector):
            if i == 2:
                break
        collector.shutdown()
        self.assertIsNone(collector.next())
        self.assertEqual(thread_count(), before)

    def test_a_dropped_collector_leaves_no_thread(self):
        before = thread_count()
        collector = tdpolicy.Collector("cartpole", POLICY, frames_per_batch=64, num_envs=8, prefetch=True)
        for i, _ in enumerate(collector):
            if i == 1:
                break
        del collector
        gc.collect()
        self.assertEqual(thread_count(), before)

    def test_collecting_does_not_hold_the_gil(self):
        # A Python thread keeps running while the main thread waits on C++ collection.
        collector = tdpolicy.Collector("cartpole", POLICY, frames_per_batch=4096, num_envs=64)
        ticks = []
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(1)

        thread = threading.Thread(target=tick)
        thread.start()
        for _ in range(3):
            collector.next()
        stop.set()
        thread.join()
        self.assertGreater(len(ticks), 0)


if __name__ == "__main__":
    unittest.main()
