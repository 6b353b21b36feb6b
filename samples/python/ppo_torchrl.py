#!/usr/bin/env python3
"""PPO with TorchRL's ClipPPOLoss and GAE, collecting through tdpolicy.Collector: the SDK's C++
simulators (CartPole, Pendulum, MuJoCo HalfCheetah-v5; N environments) and the C++ Actor stepped
in C++, the batches in TorchRL's layout, the weights of the policy being trained copied into the
C++ actor after every update. The trained policy is then exported with tdpolicy.export and
evaluated by the C++ Actor on the C++ task.

    PY=~/.cache/tdpolicy/venv/bin/python3
    $PY samples/python/ppo_torchrl.py                          # CartPole, C++ collector
    $PY samples/python/ppo_torchrl.py --env pendulum
    $PY samples/python/ppo_torchrl.py --env halfcheetah        # 1M frames: 42 minutes on 2 loaded cores
    $PY samples/python/ppo_torchrl.py --env pendulum --collector torchrl
                    # the same training through TorchRL's Collector over Gymnasium's Pendulum-v1

Each task's settings are data (ENVS below; every one can be overridden by its flag):
- cartpole: a Categorical over an MLP's logits (CartPole-v1);
- pendulum: the TorchRL PPO tutorial's actor, nn.Sequential(MLP, NormalParamExtractor()) into a
  TanhNormal on the torque bounds [-2, 2]; gamma 0.95 and rewards scaled by 0.1 for the critic
  (as samples/agents/ppo_pendulum.cc);
- halfcheetah: TorchRL's sota-implementations/ppo MuJoCo recipe (= CleanRL's
  ppo_continuous_action): an orthogonally initialised tanh MLP 64x64 with a state-independent
  log-std (AddStateIndependentNormalScale) into a TanhNormal on [-1, 1], one environment, 2048
  frames per batch, 10 epochs of 64-frame minibatches, Adam 3e-4 annealed to 0, critic weight
  0.25 (L2), 1M frames. Observations are normalized with fixed statistics measured on random
  actions before training (ObservationNorm.init_stats's way, as the PPO tutorial does), inside
  the policy and the critic: a frozen affine layer in front of each network, so the C++ actor
  that collects, the exported policy and the critic all read the raw observation.

Needs the tdpolicy package with its extension (pip install ./sdk/python). Prints one line per
batch (frames, mean return of the episodes finished in it, seconds spent collecting and
training), then the deterministic C++ evaluation; exits non-zero when the evaluation's mean
return is below --target (the task's default: CartPole 475, Pendulum -250, HalfCheetah 1000).
"""

import argparse
import collections
import os
import sys
import tempfile
import time
import warnings

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import AddStateIndependentNormalScale, NormalParamExtractor, TensorDictModule, TensorDictSequential
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import tdpolicy

# Per task: the C++ simulator (tdpolicy.envs) and its Gymnasium twin, the actor, the action bounds,
# whether observations are normalized, and the PPO settings (the flags' defaults).
ENVS = {
    "cartpole": dict(cpp="cartpole", gym="CartPole-v1", actor="categorical", bounds=None, normalize=False,
                     num_envs=8, frames_per_batch=2048, total_frames=400_000, epochs=10, minibatch=256,
                     lr=3e-4, anneal_lr=False, gamma=0.99, lmbda=0.95, reward_scale=1.0,
                     critic_loss="smooth_l1", critic_coef=1.0, target=475.0, stop_at=495.0, eval_episodes=16),
    "pendulum": dict(cpp="pendulum", gym="Pendulum-v1", actor="tanh_normal", bounds=(-2.0, 2.0), normalize=False,
                     num_envs=8, frames_per_batch=2048, total_frames=400_000, epochs=10, minibatch=256,
                     lr=1e-3, anneal_lr=False, gamma=0.95, lmbda=0.95, reward_scale=0.1,
                     critic_loss="l2", critic_coef=0.5, target=-250.0, stop_at=None, eval_episodes=16),
    "halfcheetah": dict(cpp="halfcheetah-v5", gym="HalfCheetah-v5", actor="state_independent", bounds=(-1.0, 1.0),
                        normalize=True, num_envs=1, frames_per_batch=2048, total_frames=1_000_000, epochs=10,
                        minibatch=64, lr=3e-4, anneal_lr=True, gamma=0.99, lmbda=0.95, reward_scale=1.0,
                        critic_loss="l2", critic_coef=0.25, target=1000.0, stop_at=None, eval_episodes=16),
}


def env_sizes(env="cartpole"):
    """(observation size, number of actions for a discrete task or action size) of the task's C++ simulator."""
    sim = tdpolicy.envs.make_env(ENVS[env]["cpp"], num_envs=1)
    obs = next(s for s in sim.observation_spec if s.key == "observation")
    action = sim.action_spec[0]
    return obs.shape[-1], action.num_categories if action.is_discrete else action.shape[-1]


def observation_stats(env, steps=1000, num_envs=8, seed=12345):
    """Mean and standard deviation of the task's observations under uniformly random actions
    (num_envs x steps of the C++ simulator): what ObservationNorm.init_stats measures."""
    low, high = ENVS[env]["bounds"]
    sim = tdpolicy.envs.make_env(ENVS[env]["cpp"], num_envs=num_envs)
    obs = sim.reset(seed=seed)["observation"]
    generator = torch.Generator().manual_seed(seed)
    act_dim = env_sizes(env)[1]
    seen = [obs]
    for _ in range(steps):
        action = low + (high - low) * torch.rand(num_envs, act_dim, generator=generator)
        obs = sim.step(TensorDict(action=action, batch_size=[num_envs]))["observation"]
        seen.append(obs)
    seen = torch.cat(seen).double()
    return seen.mean(0).float(), seen.std(0).clamp_min(1e-6).float()


def frozen_normalization(loc, scale):
    """(x - loc) / scale as a linear layer whose weight and bias are buffers (never trained; the
    exporter writes them with the policy, update_policy_weights_ copies them like the rest)."""
    layer = nn.Linear(loc.numel(), loc.numel())
    del layer.weight, layer.bias
    layer.register_buffer("weight", torch.diag(1.0 / scale))
    layer.register_buffer("bias", -loc / scale)
    return layer


def orthogonal_(mlp, gain):
    for layer in mlp.modules():
        if isinstance(layer, nn.Linear):
            nn.init.orthogonal_(layer.weight, gain)
            nn.init.zeros_(layer.bias)
    return mlp


def make_modules(env="cartpole", hidden=64):
    """The task's actor (a TorchRL ProbabilisticActor writing action and its log-prob) and critic
    (writing state_value), both reading "observation"."""
    cfg = ENVS[env]
    obs_dim, act = env_sizes(env)
    key = "observation"
    norm = None
    if cfg["normalize"]:
        norm = TensorDictModule(frozen_normalization(*observation_stats(env)), ["observation"], ["observation_norm"])
        key = "observation_norm"

    def mlp(out, gain=None):
        net = MLP(in_features=obs_dim, out_features=out, num_cells=[hidden, hidden], activation_class=nn.Tanh)
        return net if gain is None else orthogonal_(net, gain)

    def reading(module):
        return module if norm is None else TensorDictSequential(norm, module)

    if cfg["actor"] == "categorical":
        policy = ProbabilisticActor(reading(TensorDictModule(mlp(act), [key], ["logits"])), in_keys=["logits"],
                                    distribution_class=torch.distributions.Categorical, return_log_prob=True)
    else:
        if cfg["actor"] == "tanh_normal":  # TorchRL's PPO tutorial
            net = nn.Sequential(mlp(2 * act), NormalParamExtractor())
        else:  # TorchRL's sota-implementations/ppo (MuJoCo) and CleanRL: a state-independent log-std
            net = nn.Sequential(mlp(act, gain=1.0), AddStateIndependentNormalScale(act, scale_lb=1e-8))
        low, high = cfg["bounds"]
        policy = ProbabilisticActor(reading(TensorDictModule(net, [key], ["loc", "scale"])), in_keys=["loc", "scale"],
                                    distribution_class=TanhNormal, distribution_kwargs={"low": low, "high": high},
                                    return_log_prob=True)
    value = ValueOperator(mlp(1, gain=None if cfg["actor"] != "state_independent" else 0.01), in_keys=[key])
    return policy, reading(value)


def make_collector(kind, policy, args):
    cfg = ENVS[args.env]
    if kind == "tdpolicy":
        return tdpolicy.Collector(cfg["cpp"], policy, frames_per_batch=args.frames_per_batch,
                                  total_frames=args.total_frames, num_envs=args.num_envs, seed=args.seed)
    from torchrl.collectors import Collector
    from torchrl.envs import DoubleToFloat, GymEnv, SerialEnv, TransformedEnv

    def gym_env():
        if cfg["actor"] == "categorical":
            return GymEnv(cfg["gym"], categorical_action_encoding=True)
        return TransformedEnv(GymEnv(cfg["gym"]), DoubleToFloat())  # MuJoCo's observations are float64

    env = SerialEnv(args.num_envs, gym_env)
    env.set_seed(args.seed)
    return Collector(env, policy, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames)


def finished_returns(batch, running):
    """Returns of the episodes that ended in `batch`; `running` carries unfinished ones across batches."""
    reward = batch["next", "reward"].reshape(batch.shape)
    done = batch["next", "done"].reshape(batch.shape)
    out = []
    for t in range(reward.shape[1]):
        running += reward[:, t]
        if done[:, t].any():
            out.extend(running[done[:, t]].tolist())
            running[done[:, t]] = 0
    return out


def evaluate_in_cpp(policy, env="cartpole", episodes=16, seed=1):
    """tdpolicy.export, then the C++ Actor (deterministic) on the C++ task: (mean episode return,
    the exported spec's path)."""
    obs_dim = env_sizes(env)[0]
    folder = tempfile.mkdtemp(prefix="ppo_torchrl_")
    path = os.path.join(folder, "%s_ppo.pbtxt" % env)
    tdpolicy.export(policy, path, example=TensorDict(observation=torch.zeros(1, obs_dim), batch_size=[1]))
    actor = tdpolicy.Actor.load(path, interaction="deterministic", seed=seed)
    sim = tdpolicy.envs.make_env(ENVS[env]["cpp"], num_envs=episodes)
    obs = sim.reset(seed=seed)["observation"]
    total = torch.zeros(episodes)
    finished = torch.zeros(episodes, dtype=torch.bool)
    while not finished.all():
        out = sim.step(actor.act(observation=obs))
        total += out["reward"].reshape(episodes) * (~finished)
        finished |= out["done"].reshape(episodes)
        obs = out["observation"]
    return total.mean().item(), path


def add_training_args(parser, env="cartpole", **defaults):
    """The PPO settings shared with ppo_ray.py (which collects the same way on a Ray cluster), their
    defaults the task's (ENVS[env]) unless given here."""
    cfg = dict(ENVS[env], **defaults)
    parser.add_argument("--num_envs", type=int, default=cfg["num_envs"])
    parser.add_argument("--frames_per_batch", type=int, default=cfg["frames_per_batch"])
    parser.add_argument("--total_frames", type=int, default=cfg["total_frames"])
    parser.add_argument("--epochs", type=int, default=cfg["epochs"])
    parser.add_argument("--minibatch", type=int, default=cfg["minibatch"])
    parser.add_argument("--lr", type=float, default=cfg["lr"])
    parser.add_argument("--anneal_lr", type=int, default=int(cfg["anneal_lr"]), help="1: lr decays linearly to 0")
    parser.add_argument("--gamma", type=float, default=cfg["gamma"])
    parser.add_argument("--lmbda", type=float, default=cfg["lmbda"], help="GAE's lambda")
    parser.add_argument("--reward_scale", type=float, default=cfg["reward_scale"],
                        help="rewards are multiplied by this for GAE and the critic (returns are reported unscaled)")
    parser.add_argument("--critic_loss", default=cfg["critic_loss"], choices=["l1", "l2", "smooth_l1"])
    parser.add_argument("--critic_coef", type=float, default=cfg["critic_coef"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=cfg["target"],
                        help="the C++ evaluation's mean return needed for exit status 0")
    parser.add_argument("--stop_at", type=float, default=cfg["stop_at"],
                        help="stop training once the last 20 finished training episodes average this")
    parser.add_argument("--eval_episodes", type=int, default=cfg["eval_episodes"])


def train(collector, policy, value, args):
    """PPO on the collector's batches (GAE, ClipPPOLoss, minibatches from a replay buffer), the
    policy's weights sent to the collector after each update; stops early once the last 20
    finished episodes average --stop_at.
    Returns (frames, seconds collecting, seconds training)."""
    loss = ClipPPOLoss(policy, value, clip_epsilon=0.2, entropy_bonus=False, normalize_advantage=True,
                       loss_critic_type=args.critic_loss, critic_coeff=args.critic_coef)
    gae = GAE(gamma=args.gamma, lmbda=args.lmbda, value_network=value)
    optimizer = torch.optim.Adam(loss.parameters(), lr=args.lr)
    buffer = ReplayBuffer(storage=LazyTensorStorage(args.frames_per_batch), sampler=SamplerWithoutReplacement(),
                          batch_size=args.minibatch)
    batches = -(-args.total_frames // args.frames_per_batch)
    running = None
    frames, iteration = 0, 0
    recent = collections.deque(maxlen=20)
    collect_s = train_s = 0.0
    start = time.perf_counter()
    for batch in collector:
        collected = time.perf_counter()
        frames += batch.numel()
        if running is None:
            running = torch.zeros(batch.shape[0])
        returns = finished_returns(batch, running)
        if args.reward_scale != 1.0:
            batch["next", "reward"] = batch["next", "reward"] * args.reward_scale
        if args.anneal_lr:
            for group in optimizer.param_groups:
                group["lr"] = args.lr * (1.0 - iteration / batches)
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
        iteration += 1
        trained = time.perf_counter()
        collect_s += collected - start
        train_s += trained - collected
        mean = sum(returns) / len(returns) if returns else float("nan")
        print("frames %7d  episodes %3d  mean return %7.1f  collect %.2fs  train %.2fs"
              % (frames, len(returns), mean, collect_s, train_s), flush=True)
        recent.extend(returns)
        if args.stop_at is not None and len(recent) == recent.maxlen and sum(recent) / len(recent) >= args.stop_at:
            break
        start = time.perf_counter()
    return frames, collect_s, train_s


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", choices=sorted(ENVS), default="cartpole")
    parser.add_argument("--collector", choices=["tdpolicy", "torchrl"], default="tdpolicy")
    env = parser.parse_known_args(argv)[0].env
    add_training_args(parser, env)
    parser.add_argument("--export", default=None, help="also copy the exported policy spec to this path")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    started = time.perf_counter()
    policy, value = make_modules(args.env)
    collector = make_collector(args.collector, policy, args)
    frames, collect_s, train_s = train(collector, policy, value, args)
    collector.shutdown()

    score, path = evaluate_in_cpp(policy, args.env, episodes=args.eval_episodes)
    if args.export:
        import shutil

        shutil.copyfile(path, args.export)
    print("C++ evaluation (tdpolicy.export -> tdpolicy.Actor, deterministic, %d episodes of %s): mean return %.1f (%s)"
          % (args.eval_episodes, ENVS[args.env]["cpp"], score, path))
    print("collecting %.1f s (%.0f frames/s), training %.1f s, %d frames (%s collector); %.1f s in all"
          % (collect_s, frames / max(collect_s, 1e-9), train_s, frames, args.collector,
             time.perf_counter() - started))
    return 0 if score >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
