"""MuJoCo environment steps per second with a policy in the loop: the C++ tasks and the SDK's
Actor (mujoco_benchmark), beside Gymnasium's Python tasks (a synchronous vector env, as
Gymnasium and TorchRL users step several) with the same actor written in TorchRL, and EnvPool's
tasks with that actor when EnvPool is installed. One run, one table; the sides run one after the
other.

EnvPool pulls packages the project does not need (dm-env, matplotlib, optree, ...), so it lives in
a venv of its own, which this script only adds to the end of its import path (the project venv's
numpy, gymnasium and torch come first); without it the EnvPool column says so:

  ~/.cache/tdpolicy/venv/bin/python -m venv ~/.cache/tdpolicy/envpool-venv
  ~/.cache/tdpolicy/envpool-venv/bin/pip install envpool==1.2.5
  ./bazelw run -c opt //tests/benchmarks:mujoco_throughput [-- --tasks Hopper-v5 --seconds 2]
"""

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import time

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MLP, ProbabilisticActor


class ClippedStandardize(nn.Module):
    """The policy's ObservationNorm: (x - loc) / scale clipped to [-10, 10]."""

    def __init__(self, dim):
        super().__init__()
        self.register_buffer("loc", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(dim))

    def forward(self, x):
        return ((x - self.loc) / self.scale).clamp(-10, 10)


def torchrl_actor(obs_dim, act_dim):
    """samples/agents/mujoco/*_ppo.pbtxt as a TorchRL user writes it."""
    norm = TensorDictModule(ClippedStandardize(obs_dim), ["observation"], ["observation_normalized"])
    net = TensorDictModule(
        nn.Sequential(MLP(in_features=obs_dim, out_features=act_dim, num_cells=[64, 64], activation_class=nn.Tanh),
                      AddStateIndependentNormalScale(act_dim)),
        ["observation_normalized"], ["loc", "scale"])
    return ProbabilisticActor(TensorDictSequential(norm, net), in_keys=["loc", "scale"], out_keys=["action"],
                              distribution_class=torch.distributions.Normal, return_log_prob=True)


def python_steps_per_second(task, num_envs, seconds):
    envs = gym.make_vec(task, num_envs=num_envs, vectorization_mode="sync")
    obs, _ = envs.reset(seed=0)
    actor = torchrl_actor(obs.shape[1], envs.single_action_space.shape[0])
    steps = 0

    def step(obs):
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            td = actor(TensorDict({"observation": torch.as_tensor(obs, dtype=torch.float32)}, [num_envs]))
        return envs.step(td["action"].clamp(-1, 1).numpy())[0]

    for _ in range(20):
        obs = step(obs)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs = step(obs)
        steps += num_envs
    elapsed = time.perf_counter() - start
    envs.close()
    return steps / elapsed


def import_envpool(venv):
    """EnvPool's module from `venv` (a venv of the same Python), or (None, why not)."""
    try:
        import envpool  # noqa: F401  (installed beside the project's packages)
        return envpool, None
    except ImportError:
        pass
    # The venv's site-packages, as this interpreter names its own (lib/python3.11/site-packages).
    purelib = os.path.relpath(sysconfig.get_paths()["purelib"], sys.prefix)
    site = os.path.join(os.path.expanduser(venv), purelib)
    if not os.path.isdir(site):
        return None, f"no EnvPool venv at {venv} ({site} is missing)"
    sys.path.append(site)  # last: the project's numpy, gymnasium and torch stay the ones imported
    try:
        import envpool
        return envpool, None
    except ImportError as e:
        return None, f"EnvPool does not import from {site}: {e}"


def envpool_steps_per_second(envpool, task, num_envs, threads, seconds):
    envs = envpool.make_gymnasium(task, num_envs=num_envs, num_threads=threads, seed=0)
    obs, _ = envs.reset()
    actor = torchrl_actor(obs.shape[1], envs.action_space.shape[0])

    def step(obs):
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            td = actor(TensorDict({"observation": torch.as_tensor(obs, dtype=torch.float32)}, [num_envs]))
        return envs.step(td["action"].clamp(-1, 1).numpy())[0]

    for _ in range(20):
        obs = step(obs)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs = step(obs)
        steps += num_envs
    elapsed = time.perf_counter() - start
    envs.close()
    return steps / elapsed


def cpp_results(binary, tasks, seconds):
    names = "|".join(t.split("-")[0] for t in tasks)
    out = subprocess.run(
        [binary, f"--benchmark_filter=<({names})[,>]", f"--benchmark_min_time={seconds}", "--benchmark_format=json"],
        check=True, capture_output=True, text=True).stdout
    results = {}
    for b in json.loads(out)["benchmarks"]:
        # BM_WithPolicy<HalfCheetah, kHalfCheetahSpec>/envs:16/threads:2/real_time
        kind, rest = b["name"].split("<", 1)
        task = rest.split(",")[0].split(">")[0].strip()
        envs = int(b["name"].split("envs:")[1].split("/")[0])
        threads = int(b["name"].split("threads:")[1].split("/")[0])
        results[(kind, task, envs, threads)] = b["items_per_second"]
        if kind == "BM_WithPolicy" and b.get("label", "fused") != "fused":
            print(f"note: {b['name']} ran on {b['label']}")
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpp", required=True, help="the mujoco_benchmark binary")
    parser.add_argument("--tasks", nargs="+", default=["HalfCheetah-v5", "Hopper-v5", "Ant-v5"])
    parser.add_argument("--envs", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--envpool_venv", default=os.environ.get("TDP_ENVPOOL_VENV", "~/.cache/tdpolicy/envpool-venv"),
                        help="venv holding EnvPool (default $TDP_ENVPOOL_VENV or ~/.cache/tdpolicy/envpool-venv)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    envpool, why_not = import_envpool(args.envpool_venv)
    if envpool is None:
        print(f"skipping EnvPool: {why_not}")
    else:
        print(f"EnvPool {envpool.__version__} from {os.path.dirname(envpool.__file__)}")
    cpp = cpp_results(args.cpp, args.tasks, args.seconds)
    rows = ["| task | envs | C++ env alone, 1 thread | C++ env + SDK actor, 1 thread | C++ env + SDK actor, 2 threads | "
            "Gymnasium + TorchRL actor | C++ (2 threads) / Python | EnvPool (2 threads) + TorchRL actor | "
            "C++ (2 threads) / EnvPool |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for task in args.tasks:
        short = task.split("-")[0]
        for n in args.envs:
            alone = cpp.get(("BM_EnvOnly", short, n, 1))
            one = cpp.get(("BM_WithPolicy", short, n, 1))
            two = cpp.get(("BM_WithPolicy", short, n, 2))
            py = python_steps_per_second(task, n, args.seconds)
            # EnvPool's own thread pool, as many threads as the C++ column's (its default is one per
            # environment, 64 threads on this 2-core machine).
            pool = envpool_steps_per_second(envpool, task, n, min(n, 2), args.seconds) if envpool else None
            fmt = lambda v: "n/a" if v is None else f"{v:,.0f}"
            rows.append(f"| {task} | {n} | {fmt(alone)} | {fmt(one)} | {fmt(two)} | {fmt(py)} | "
                        f"{two / py:.1f}x | {fmt(pool) if pool else 'not installed'} | "
                        f"{f'{two / pool:.1f}x' if pool else 'n/a'} |")
    print("environment steps per second, policy in the loop (random actions from the PPO sample's actor)")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
