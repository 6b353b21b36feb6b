#!/usr/bin/env python3
"""Frames per second collected with the policy in the loop: tdpolicy.Collector (the SDK's C++
CartPole / Pendulum and the C++ Actor, stepped in C++) against TorchRL's Collector (the class
named SyncDataCollector before TorchRL 0.13) over Gymnasium's CartPole-v1 / Pendulum-v1 (N
copies in one gymnasium SyncVectorEnv, in this process like the C++ ones: TorchRL's GymWrapper of
gymnasium.make_vec(..., vectorization_mode="sync"); one plain GymEnv for N = 1), the same
tensordict policy in both
(the C++ side runs its tdpolicy.export). Then tdpolicy.Actor.act from Python at batch 1, with
plain tensors and with TensorDicts, and where the TensorDict call's time goes.

    ~/.cache/tdpolicy/venv/bin/python3 tests/benchmarks/collector_throughput.py [--quick]

Needs the package with its extension (pip install ./sdk/python builds it with -c opt). Not a
test: it measures. One thread for torch (torch.set_num_threads(1)) on both sides.
"""

import argparse
import time
import timeit
import warnings

import torch
from torch import nn
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal

import tdpolicy


def cartpole_policy():
    net = MLP(in_features=4, out_features=2, num_cells=[64, 64], activation_class=nn.Tanh)
    return ProbabilisticActor(TensorDictModule(net, ["observation"], ["logits"]), in_keys=["logits"],
                              distribution_class=torch.distributions.Categorical, return_log_prob=True)


def pendulum_policy():
    net = MLP(in_features=3, out_features=2, num_cells=[64, 64], activation_class=nn.Tanh)
    body = TensorDictSequential(TensorDictModule(net, ["observation"], ["params"]),
                                TensorDictModule(NormalParamExtractor(), ["params"], ["loc", "scale"]))
    return ProbabilisticActor(body, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                              distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True)


TASKS = {"cartpole": ("CartPole-v1", cartpole_policy), "pendulum": ("Pendulum-v1", pendulum_policy)}


def rate(batches, seconds):
    """Frames per second over whole batches, after one warm-up batch, for at least `seconds`."""
    it = iter(batches)
    next(it)
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        frames += next(it).numel()
    return frames / (time.perf_counter() - start)


def tdpolicy_rate(task, policy, n, steps, seconds):
    collector = tdpolicy.Collector(task, policy, frames_per_batch=n * steps, num_envs=n)
    try:
        return rate(collector, seconds)
    finally:
        collector.shutdown()


def torchrl_rate(gym_name, policy, n, steps, seconds):
    import gymnasium
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv, GymWrapper

    if n == 1:
        env = GymEnv(gym_name, categorical_action_encoding=True)
    else:
        # TorchRL takes a vector env that resets on the step that ends an episode (SAME_STEP).
        vector = gymnasium.make_vec(gym_name, num_envs=n, vectorization_mode="sync",
                                    vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP})
        env = GymWrapper(vector, categorical_action_encoding=True)
    collector = Collector(env, policy, frames_per_batch=n * steps, total_frames=-1)
    try:
        return rate(collector, seconds)
    finally:
        collector.shutdown()


def per_call_us(fn, number):
    """The best of 5 runs; timeit turns Python's garbage collector off while it times."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    seconds = 0.5 if args.quick else 2.0
    steps = 64

    print("frames/s, policy in the loop (%d steps per batch)" % steps)
    print("%-9s %4s %14s %14s %8s" % ("task", "envs", "tdpolicy", "torchrl", "ratio"))
    for task, (gym_name, make) in TASKS.items():
        torch.manual_seed(0)
        policy = make()
        for n in (1, 8, 64):
            ours = tdpolicy_rate(task, policy, n, steps, seconds)
            theirs = torchrl_rate(gym_name, policy, n, steps, seconds)
            print("%-9s %4d %14.0f %14.0f %7.1fx" % (task, n, ours, theirs, ours / theirs), flush=True)

    actor = tdpolicy.Actor.load("policies/cartpole_categorical.pbtxt", seed=0)
    obs = torch.zeros(1, 4)
    td = TensorDict(observation=obs, batch_size=[1])
    number = 20000 if args.quick else 100000
    print("\ntdpolicy.Actor.act from Python, batch 1, policies/cartpole_categorical.pbtxt (fused plan), us per call")
    rows = [
        ("act(tensor)", lambda: actor.act(obs)),
        ("act(observation=tensor)", lambda: actor.act(observation=obs)),
        ("act(td) (TensorDict in and out)", lambda: actor.act(td)),
        ("  TensorDict(observation=..., batch_size=[1]) alone", lambda: TensorDict(observation=obs, batch_size=[1])),
        ("  TensorDict._new_unsafe({2 entries}) alone",
         lambda: TensorDict._new_unsafe(source={"action": obs, "action_log_prob": obs}, batch_size=torch.Size([1]))),
        ("  td.get('observation') alone", lambda: td.get("observation", None)),
        ("TorchRL module on the same input (eager, no_grad, td)", None),
    ]
    module = cartpole_policy()

    def python_module():
        with torch.no_grad():
            module(td)

    for name, fn in rows:
        if fn is None:
            fn, n = python_module, number // 20
        else:
            n = number
        print("%-52s %8.2f" % (name, per_call_us(fn, n)), flush=True)


if __name__ == "__main__":
    main()
