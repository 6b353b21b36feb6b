"""tdpolicy.distributed.RayCollector on a local Ray cluster (a head and two worker nodes, one CPU
each), started by this test inside a private network namespace and stopped at its end:

- every socket listening in the namespace is on loopback, and the namespace has no other interface;
- batches have TorchRL's layout (the keys, shapes and dtypes of tdpolicy.Collector's) plus the
  worker id and sequence number, workers run on distinct nodes, frames add up to total_frames;
- weights broadcast through the object store change the actions the workers take: they equal
  those of an in-process tdpolicy.Actor holding the same weights, before and after;
- a worker whose process is killed is restarted by Ray; collection goes on, and no batch is lost or
  yielded twice;
- bad arguments (an unknown environment, frames_per_batch, a worker that cannot start, weights of
  another module) raise errors naming them;
- no process is left in the namespace once the cluster is stopped.

Run by tests/python/exporter_test.sh with the package (tdpolicy/_C.so included) on PYTHONPATH; the
file re-executes its runner under `unshare -n` (root, as CI) before anything starts.
"""

import os
import signal
import sys
import unittest
import warnings

# Ray binds the machine's own address unless it has no other: the whole file (its runner included,
# so the JUnit XML is written as usual) runs in a network namespace of its own.
import private_network  # noqa: E402  (tests/python, which the runner puts on sys.path)

private_network.enter()

import ray  # noqa: E402
import torch  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402

import tdpolicy  # noqa: E402
from tdpolicy.distributed import RayCollector  # noqa: E402

CLUSTER = None


def categorical_policy(seed=0):
    from torchrl.modules import MLP, ProbabilisticActor

    torch.manual_seed(seed)
    net = TensorDictModule(MLP(in_features=4, out_features=2, num_cells=[16]), ["observation"], ["logits"])
    return ProbabilisticActor(net, in_keys=["logits"], distribution_class=torch.distributions.Categorical,
                              return_log_prob=True)


def setUpModule():
    global CLUSTER
    warnings.filterwarnings("ignore")
    node = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
    CLUSTER = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
    for _ in range(2):
        CLUSTER.add_node(**node)
    ray.init(address=CLUSTER.address, log_to_driver=False)


def tearDownModule():
    ray.shutdown()
    CLUSTER.shutdown()
    private_network.stop_leftovers()


def local_actions(policy, observation):
    """What an in-process C++ Actor holding the policy's current weights does, deterministically."""
    actor = tdpolicy.Actor.load(policy, example=TensorDict(observation=torch.zeros(1, 4), batch_size=[1]),
                                interaction="deterministic")
    flat = observation.reshape(-1, observation.shape[-1])
    return actor.act(observation=flat)["action"].reshape(observation.shape[:-1])


class LayoutTest(unittest.TestCase):
    def test_sync_batches_have_the_torchrl_layout_and_frame_counts(self):
        policy = categorical_policy()
        with tdpolicy.Collector("cartpole", policy, frames_per_batch=32, num_envs=4) as local:
            want = local.next()
        with RayCollector("cartpole", policy, frames_per_batch=64, total_frames=192, num_collectors=2,
                          num_envs=4) as collector:
            nodes = collector.node_info()
            sockets = private_network.listening_sockets()
            batches = list(collector)
        self.assertEqual(len({n["node_id"] for n in nodes}), 2, nodes)
        self.assertNotIn(os.getpid(), [n["pid"] for n in nodes])
        self.assertTrue(sockets)
        self.assertEqual(private_network.beyond_loopback(sockets), [], "listening beyond loopback")
        self.assertEqual(len(batches), 3)
        self.assertEqual(sum(b.numel() for b in batches), 192)
        self.assertEqual(collector.collected_frames, 192)
        extra = {str(("collector", "worker_id")), str(("collector", "sequence"))}
        for k, batch in enumerate(batches):
            self.assertEqual(batch.batch_size, torch.Size([8, 8]))
            self.assertEqual(sorted(map(str, batch.keys(True, True))),
                             sorted(list(map(str, want.keys(True, True))) + list(extra)))
            for key in want.keys(True, True):
                self.assertEqual(batch.get(key).dtype, want.get(key).dtype, key)
                self.assertEqual(batch.get(key).shape[1:], want.get(key).shape[1:], key)
            worker = batch["collector", "worker_id"]
            self.assertTrue(bool((worker[:4] == 0).all() and (worker[4:] == 1).all()))
            self.assertTrue(bool((batch["collector", "sequence"] == k).all()))
            self.assertTrue(bool((batch["collector", "traj_ids"] % 2 == worker).all()), "trajectory ids collide")
            # ("next", "observation") of a step is the next step's observation unless it ended an episode.
            done = batch["next", "done"].squeeze(-1)[:, :-1]
            same = (batch["next", "observation"][:, :-1] == batch["observation"][:, 1:]).all(-1)
            self.assertTrue(bool(same[~done].all()))

    def test_async_yields_each_worker_batch_once(self):
        with RayCollector("cartpole", categorical_policy(), frames_per_batch=32, total_frames=32 * 7,
                          num_collectors=2, num_envs=4, sync=False) as collector:
            self.assertEqual(len(collector), 7)
            batches = list(collector)
        self.assertEqual(len(batches), 7)
        self.assertEqual(sum(b.numel() for b in batches), 32 * 7)
        tags = [(int(b["collector", "worker_id"][0, 0]), int(b["collector", "sequence"][0, 0])) for b in batches]
        self.assertEqual(len(set(tags)), 7, tags)
        for worker in (0, 1):
            sequences = sorted(s for w, s in tags if w == worker)
            self.assertEqual(sequences, list(range(len(sequences))), tags)
        self.assertTrue(all(b.batch_size == torch.Size([4, 8]) for b in batches))


class SeedTest(unittest.TestCase):
    def test_set_seed_starts_new_episodes_from_seed_plus_worker(self):
        with RayCollector("cartpole", categorical_policy(), frames_per_batch=16, total_frames=48, num_collectors=2,
                          num_envs=2, seed=3) as collector:
            batches = iter(collector)
            first = next(batches)
            self.assertEqual(collector.set_seed(11), 11)
            second = next(batches)
        for worker in (0, 1):
            rows = slice(2 * worker, 2 * worker + 2)
            for batch, seed in ((first, 3), (second, 11)):
                want = tdpolicy.envs.make_env("cartpole", num_envs=2).reset(seed=seed + worker)["observation"]
                torch.testing.assert_close(batch["observation"][rows, 0], want, rtol=0, atol=0)


class WeightsTest(unittest.TestCase):
    def test_broadcast_weights_change_the_actions(self):
        policy = categorical_policy()
        collector = RayCollector("cartpole", policy, frames_per_batch=128, total_frames=128 * 3, num_collectors=2,
                                 num_envs=4, interaction="deterministic")
        batches = iter(collector)
        first = next(batches)
        torch.testing.assert_close(first["action"], local_actions(policy, first["observation"]), rtol=0, atol=0)
        with torch.no_grad():
            for p in policy.parameters():
                p.normal_()
        collector.update_policy_weights_()
        second = next(batches)
        new = local_actions(policy, second["observation"])
        torch.testing.assert_close(second["action"], new, rtol=0, atol=0)
        # ...and those are not the actions the first weights would have taken there.
        old = local_actions(categorical_policy(), second["observation"])
        self.assertFalse(bool((new == old).all()), "the new weights act as the old ones: the test shows nothing")
        # A state_dict of another structure is refused by the workers, naming the key.
        collector.update_policy_weights_({"bogus": torch.zeros(2)})
        with self.assertRaisesRegex(RuntimeError, "bogus"):
            next(batches)
        collector.shutdown()


class FaultTest(unittest.TestCase):
    def check_killed_worker(self, sync):
        frames, rounds = 4 * 1024, 6
        collector = RayCollector("cartpole", categorical_policy(), frames_per_batch=frames,
                                 total_frames=frames * rounds, num_collectors=2, num_envs=4, sync=sync)
        pids = [n["pid"] for n in collector.node_info()]
        batches = []
        for batch in collector:
            batches.append(batch)
            if len(batches) == 1:
                # Worker 0 has its next batch asked for (sync=False) or is idle (sync=True).
                os.kill(pids[0], signal.SIGKILL)
        after = [n["pid"] for n in collector.node_info()]
        collector.shutdown()
        self.assertNotEqual(after[0], pids[0], "worker 0 was not restarted")
        self.assertEqual(after[1], pids[1])
        self.assertEqual(len(batches), rounds)
        self.assertEqual(sum(b.numel() for b in batches), frames * rounds)
        tags = []  # (worker, sequence) of each worker batch yielded
        for batch in batches:
            rows = torch.stack([batch["collector", "worker_id"][:, 0], batch["collector", "sequence"][:, 0]], -1)
            tags += [tuple(t) for t in rows.unique(dim=0).tolist()]
        self.assertEqual(len(tags), rounds * (2 if sync else 1), tags)
        self.assertEqual(len(set(tags)), len(tags), "a batch yielded twice: %s" % tags)
        for worker in (0, 1):
            sequences = sorted(sq for w, sq in tags if w == worker)
            self.assertEqual(sequences, list(range(len(sequences))), "a batch lost: %s" % tags)
        return collector

    def test_killed_worker_sync(self):
        self.check_killed_worker(sync=True)

    def test_killed_worker_async(self):
        collector = self.check_killed_worker(sync=False)
        self.assertEqual(collector.restarts, [1, 0], "the batch worker 0 was collecting did not fail over")


class ErrorsTest(unittest.TestCase):
    def test_bad_arguments_are_named(self):
        policy = categorical_policy()
        with self.assertRaisesRegex(ValueError, r"env='cartpol'.*cartpole"):
            RayCollector("cartpol", policy, frames_per_batch=64)
        with self.assertRaisesRegex(ValueError, r"frames_per_batch=63: expected a multiple of num_collectors \* "
                                                r"num_envs = 8"):
            RayCollector("cartpole", policy, frames_per_batch=63, num_collectors=2, num_envs=4)
        with self.assertRaisesRegex(ValueError, "frames_per_batch=0"):
            RayCollector("cartpole", policy, frames_per_batch=0)
        with self.assertRaisesRegex(TypeError, "frames_per_batch=64.0"):
            RayCollector("cartpole", policy, frames_per_batch=64.0)
        with self.assertRaisesRegex(ValueError, "total_frames=0"):
            RayCollector("cartpole", policy, frames_per_batch=64, total_frames=0)
        with self.assertRaisesRegex(TypeError, "policy"):
            RayCollector("cartpole", torch.nn.Linear(4, 2), frames_per_batch=64)

    def test_a_worker_that_cannot_start_names_the_cause(self):
        with self.assertRaisesRegex(RuntimeError, "interaction='sideways'"):
            RayCollector("cartpole", categorical_policy(), frames_per_batch=64, interaction="sideways")


if __name__ == "__main__":
    unittest.main()
