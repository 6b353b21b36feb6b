#!/usr/bin/env python3
"""PPO with TorchRL's ClipPPOLoss and GAE, collecting through tdpolicy.Collector: the SDK's C++
CartPole (N environments) and the C++ Actor stepped in C++, the batches in TorchRL's layout, the
weights of the policy being trained copied into the C++ actor after every update. The trained
policy is then exported with tdpolicy.export and evaluated by the C++ Actor on the C++ CartPole.

    ~/.cache/tdpolicy/venv/bin/python3 samples/python/ppo_torchrl.py                  # C++ collector
    ~/.cache/tdpolicy/venv/bin/python3 samples/python/ppo_torchrl.py --collector torchrl
                              # the same training through TorchRL's Collector over Gymnasium's CartPole-v1

Needs the tdpolicy package with its extension (pip install ./sdk/python). Prints one line per
batch (frames, mean return of the episodes finished in it, seconds spent collecting and
training), then the deterministic C++ evaluation; exits non-zero when the evaluation's mean
return is below --target (475, CartPole-v1's solved threshold).
"""

import argparse
import os
import sys
import tempfile
import time
import warnings

import torch
from torch import nn

from tensordict.nn import TensorDictModule
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.modules import MLP, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import tdpolicy


def make_modules(hidden=64):
    net = MLP(in_features=4, out_features=2, num_cells=[hidden, hidden], activation_class=nn.Tanh)
    policy = ProbabilisticActor(TensorDictModule(net, ["observation"], ["logits"]), in_keys=["logits"],
                                distribution_class=torch.distributions.Categorical, return_log_prob=True)
    value = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[hidden, hidden], activation_class=nn.Tanh),
                          in_keys=["observation"])
    return policy, value


def make_collector(kind, policy, args):
    if kind == "tdpolicy":
        return tdpolicy.Collector("cartpole", policy, frames_per_batch=args.frames_per_batch,
                                  total_frames=args.total_frames, num_envs=args.num_envs, seed=args.seed)
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv, SerialEnv

    env = SerialEnv(args.num_envs, lambda: GymEnv("CartPole-v1", categorical_action_encoding=True))
    env.set_seed(args.seed)
    return Collector(env, policy, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames)


def finished_returns(batch, running):
    """Returns of the episodes that ended in `batch`; `running` carries unfinished ones across batches."""
    reward = batch["next", "reward"].squeeze(-1)
    done = batch["next", "done"].squeeze(-1)
    out = []
    for t in range(reward.shape[1]):
        running += reward[:, t]
        if done[:, t].any():
            out.extend(running[done[:, t]].tolist())
            running[done[:, t]] = 0
    return out


def evaluate_in_cpp(policy, episodes=16, seed=1):
    """tdpolicy.export, then the C++ Actor (deterministic) on the C++ CartPole: mean episode return."""
    from tensordict import TensorDict

    folder = tempfile.mkdtemp(prefix="ppo_torchrl_")
    path = os.path.join(folder, "cartpole_ppo.pbtxt")
    tdpolicy.export(policy, path, example=TensorDict(observation=torch.zeros(1, 4), batch_size=[1]))
    actor = tdpolicy.Actor.load(path, interaction="deterministic", seed=seed)
    env = tdpolicy.envs.make_env("cartpole", num_envs=episodes)
    obs = env.reset(seed=seed)["observation"]
    total = torch.zeros(episodes)
    finished = torch.zeros(episodes, dtype=torch.bool)
    while not finished.all():
        out = env.step(actor.act(observation=obs))
        total += out["reward"].squeeze(-1) * (~finished)
        finished |= (out["terminated"] | out["truncated"]).squeeze(-1)
        obs = out["observation"]
    return total.mean().item(), path


def add_training_args(parser, frames_per_batch=2048, num_envs=8):
    """The PPO settings shared with ppo_ray.py (which collects the same way on a Ray cluster)."""
    parser.add_argument("--num_envs", type=int, default=num_envs)
    parser.add_argument("--frames_per_batch", type=int, default=frames_per_batch)
    parser.add_argument("--total_frames", type=int, default=400_000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--stop_at", type=float, default=495.0,
                        help="stop training once the finished episodes of two batches in a row average this")


def train(collector, policy, value, args):
    """PPO on the collector's batches (GAE, ClipPPOLoss, minibatches from a replay buffer), the
    policy's weights sent to the collector after each update; stops early at --stop_at.
    Returns (frames, seconds collecting, seconds training)."""
    loss = ClipPPOLoss(policy, value, clip_epsilon=0.2, entropy_coeff=0.0, normalize_advantage=True)
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=value)
    optimizer = torch.optim.Adam(loss.parameters(), lr=args.lr)
    buffer = ReplayBuffer(storage=LazyTensorStorage(args.frames_per_batch), sampler=SamplerWithoutReplacement(),
                          batch_size=args.minibatch)
    running = None
    frames, good = 0, 0
    collect_s = train_s = 0.0
    start = time.perf_counter()
    for batch in collector:
        collected = time.perf_counter()
        frames += batch.numel()
        if running is None:
            running = torch.zeros(batch.shape[0])
        returns = finished_returns(batch, running)
        with torch.no_grad():
            gae(batch)
        buffer.extend(batch.reshape(-1))
        for _ in range(args.epochs):
            for _ in range(args.frames_per_batch // args.minibatch):
                losses = loss(buffer.sample())
                total = losses["loss_objective"] + losses["loss_critic"] + losses.get("loss_entropy", 0.0)
                optimizer.zero_grad()
                total.backward()
                nn.utils.clip_grad_norm_(loss.parameters(), 0.5)
                optimizer.step()
        collector.update_policy_weights_()
        trained = time.perf_counter()
        collect_s += collected - start
        train_s += trained - collected
        mean = sum(returns) / len(returns) if returns else float("nan")
        print("frames %7d  episodes %3d  mean return %6.1f  collect %.2fs  train %.2fs"
              % (frames, len(returns), mean, collect_s, train_s), flush=True)
        good = good + 1 if returns and mean >= args.stop_at else 0
        if good >= 2:
            break
        start = time.perf_counter()
    return frames, collect_s, train_s


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collector", choices=["tdpolicy", "torchrl"], default="tdpolicy")
    add_training_args(parser)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    policy, value = make_modules()
    collector = make_collector(args.collector, policy, args)
    frames, collect_s, train_s = train(collector, policy, value, args)
    collector.shutdown()

    score, path = evaluate_in_cpp(policy)
    print("C++ evaluation (tdpolicy.export -> tdpolicy.Actor, deterministic, 16 episodes): mean return %.1f (%s)"
          % (score, path))
    print("collecting %.1f s, training %.1f s, %d frames (%s collector)" % (collect_s, train_s, frames, args.collector))
    return 0 if score >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
