#!/usr/bin/env python3
"""Frames per second collected on Ray: tdpolicy.distributed.RayCollector with 1 and with 3 worker
processes (each a tdpolicy.Collector: N C++ CartPoles and the C++ Actor of the same 64x64 policy
collector_throughput.py uses), batches shipped to this process through Ray's object store; the
plain in-process tdpolicy.Collector (one of those workers' collectors, no Ray) as the baseline of
the same run. The cluster is local (a head and two worker nodes, one CPU each) in a private network
namespace that the script enters itself (root, as the tests).

    ~/.cache/tdpolicy/venv/bin/python3 tests/benchmarks/ray_collector_throughput.py [--seconds 5]

Needs the package with its extension (pip install ./sdk/python builds it with -c opt). Not a
test: it measures. With fewer cores than workers (this build machine has 2), 3 workers share them.
"""

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import private_network  # noqa: E402

private_network.enter()  # Ray listens on loopback only there

import ray  # noqa: E402
import torch  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import tdpolicy  # noqa: E402
from tdpolicy.distributed import RayCollector  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collector_throughput import cartpole_policy, rate  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured per configuration")
    parser.add_argument("--num_envs", type=int, default=8, help="environments per worker")
    parser.add_argument("--steps", type=int, default=256, help="steps per environment in a worker's batch")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    policy = cartpole_policy()
    per_worker = args.num_envs * args.steps

    with tdpolicy.Collector("cartpole", policy, frames_per_batch=per_worker, num_envs=args.num_envs) as local:
        baseline = rate(local, args.seconds)
    print("in-process tdpolicy.Collector, %d envs, %d frames a batch:   %10.0f frames/s (1.00x)"
          % (args.num_envs, per_worker, baseline), flush=True)
    # A worker starts its next batch as soon as it hands one out: the in-process peer of that
    # overlap is prefetch=True.
    with tdpolicy.Collector("cartpole", policy, frames_per_batch=per_worker, num_envs=args.num_envs,
                            prefetch=True) as local:
        fps = rate(local, args.seconds)
    print("in-process tdpolicy.Collector, prefetch=True:              %10.0f frames/s (%.2fx)"
          % (fps, fps / baseline), flush=True)

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                            "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        for workers in (1, 3):
            for sync in (False, True):
                collector = RayCollector("cartpole", policy, frames_per_batch=per_worker * (workers if sync else 1),
                                         num_collectors=workers, num_envs=args.num_envs, sync=sync)
                try:
                    fps = rate(collector, args.seconds)
                finally:
                    collector.shutdown()
                print("RayCollector, %d worker(s) x %d envs, sync=%-5s:        %10.0f frames/s (%.2fx)"
                      % (workers, args.num_envs, sync, fps, fps / baseline), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
