#!/usr/bin/env python3
"""PPO with TorchRL's ClipPPOLoss and GAE, collecting on a Ray cluster: tdpolicy.distributed's
RayCollector runs --num_collectors tdpolicy.Collector workers (Ray actor processes, each with
--num_envs C++ CartPoles and the C++ Actor), the learner trains on their batches in this process
and broadcasts the weights through Ray's object store after every update. The trained policy is
then exported with tdpolicy.export and evaluated by the C++ Actor on the C++ CartPole, as in
ppo_torchrl.py (whose modules, training step and evaluation this sample imports).

    # a local cluster (this process is the head's driver; 2 worker processes), on loopback only:
    unshare -n sh -c 'ip link set lo up && ~/.cache/tdpolicy/venv/bin/python3 samples/python/ppo_ray.py'
    # an existing cluster (ray start --head / ray start --address=...):
    ~/.cache/tdpolicy/venv/bin/python3 samples/python/ppo_ray.py --address auto

Needs the tdpolicy package with its extension (pip install ./sdk/python) and ray on every node.
Exits non-zero when the C++ evaluation's mean return is below --target (475).
"""

import argparse
import os
import sys
import time
import warnings

import ray
import torch

from tdpolicy.distributed import RayCollector

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ppo_torchrl import add_training_args, evaluate_in_cpp, make_modules, train  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--address", default=None,
                        help="a running cluster's address (auto: the one `ray start` left); none: a local cluster")
    parser.add_argument("--num_collectors", type=int, default=2, help="Ray worker processes collecting")
    parser.add_argument("--sync", type=int, default=1, help="1: each batch has one part from every worker")
    add_training_args(parser, frames_per_batch=2048, num_envs=4)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    started = time.perf_counter()
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=args.num_collectors, include_dashboard=False, log_to_driver=False)
    policy, value = make_modules()
    collector = RayCollector("cartpole", policy, frames_per_batch=args.frames_per_batch,
                             total_frames=args.total_frames, num_collectors=args.num_collectors,
                             num_envs=args.num_envs, sync=bool(args.sync), seed=args.seed)
    nodes = collector.node_info()
    print("%d workers: pids %s on %d node(s); cluster and workers up in %.1f s" % (
        len(nodes), [n["pid"] for n in nodes], len({n["node_id"] for n in nodes}), time.perf_counter() - started),
        flush=True)
    frames, collect_s, train_s = train(collector, policy, value, args)
    collector.shutdown()
    ray.shutdown()

    score, path = evaluate_in_cpp(policy)
    print("C++ evaluation (tdpolicy.export -> tdpolicy.Actor, deterministic, 16 episodes): mean return %.1f (%s)"
          % (score, path))
    print("collecting %.1f s, training %.1f s, %d frames on %d Ray workers x %d environments; %.1f s in all"
          % (collect_s, train_s, frames, args.num_collectors, args.num_envs, time.perf_counter() - started))
    return 0 if score >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
