"""A TorchRL policy trained in Python on Gymnasium's HalfCheetah-v5, exported with
tdpolicy.export and run on the C++ HalfCheetah: the mean deterministic return over 20 seeded
episodes on each side, which must agree within their standard errors.

Training is TorchRL's PPO tutorial recipe (ClipPPOLoss, GAE, a Collector over GymEnv with
ObservationNorm and DoubleToFloat, a TanhNormal actor over MLP + NormalParamExtractor) for
--frames frames; the point is the bridge, not the score. The export carries the
ObservationNorm (transforms=env.transform), so the C++ side feeds raw observations.

  pip install ./sdk/python    # into the project's venv (~/.cache/tdpolicy/venv)
  ./bazelw build -c opt //samples:rollout
  python tests/benchmarks/torchrl_mujoco_parity.py --rollout bazel-bin/samples/agents/rollout
"""

import argparse
import math
import os
import re
import subprocess
import tempfile
import time

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.envs import Compose, DoubleToFloat, GymEnv, ObservationNorm, StepCounter, TransformedEnv
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import tdpolicy

TASK = "HalfCheetah-v5"


def make_env(seed):
    env = TransformedEnv(GymEnv(TASK), Compose(ObservationNorm(in_keys=["observation"], standard_normal=True),
                                               DoubleToFloat(), StepCounter()))
    env.set_seed(seed)
    return env


def train(frames, seed):
    torch.manual_seed(seed)
    env = make_env(seed)
    env.transform[0].init_stats(num_iter=2000, reduce_dim=0, cat_dim=0)
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_dim = env.action_spec.shape[-1]
    actor_net = nn.Sequential(MLP(in_features=obs_dim, out_features=2 * act_dim, num_cells=[64, 64],
                                  activation_class=nn.Tanh), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"]),
                               spec=env.action_spec, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               distribution_kwargs={"low": env.action_spec.space.low, "high": env.action_spec.space.high},
                               return_log_prob=True)
    critic = ValueOperator(MLP(in_features=obs_dim, out_features=1, num_cells=[64, 64], activation_class=nn.Tanh),
                           in_keys=["observation"])
    actor(env.reset())
    critic(env.reset())
    frames_per_batch = 2048
    collector = Collector(env, actor, frames_per_batch=frames_per_batch, total_frames=frames)
    buffer = ReplayBuffer(storage=LazyTensorStorage(frames_per_batch), sampler=SamplerWithoutReplacement())
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_bonus=True, entropy_coeff=1e-4)
    optimizer = torch.optim.Adam(loss.parameters(), lr=3e-4)
    for i, batch in enumerate(collector):
        for _ in range(10):
            advantage(batch)
            buffer.extend(batch.reshape(-1))
            for _ in range(frames_per_batch // 64):
                sample = buffer.sample(64)
                out = loss(sample)
                total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
        if i % 10 == 0:
            print(f"  {collector._frames if hasattr(collector, '_frames') else (i + 1) * frames_per_batch} frames: "
                  f"mean step reward {batch['next', 'reward'].mean().item():.3f}", flush=True)
    collector.shutdown()
    return env, actor


def python_returns(env, actor, episodes, seed):
    returns = []
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        for e in range(episodes):
            env.set_seed(seed + e)
            td = env.rollout(1000, actor)
            returns.append(td["next", "reward"].sum().item())
    return returns


def mean_and_error(values):
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return mean, std / math.sqrt(len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollout", required=True, help="the C++ rollout binary (//samples:rollout)")
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="where the exported policy goes (default: a temporary folder)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.time()
    env, actor = train(args.frames, args.seed)
    trained = time.time() - start
    out = args.out or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "halfcheetah-v5_torchrl.pbtxt")
    example = env.base_env.reset()
    tdpolicy.export(actor, path, example, transforms=env.transform)
    py = python_returns(env, actor, args.episodes, 1000 + args.seed)
    cpp_line = subprocess.run([args.rollout, f"--policy={path}", "--env=halfcheetah-v5",
                               f"--episodes={args.episodes}", "--num_envs=1", "--interaction=deterministic",
                               f"--seed={1000 + args.seed}"], check=True, capture_output=True, text=True).stdout
    match = re.search(r"return mean (\S+) std (\S+)", cpp_line)
    cpp_mean, cpp_std = float(match.group(1)), float(match.group(2))
    cpp_error = cpp_std / math.sqrt(args.episodes)
    py_mean, py_error = mean_and_error(py)
    difference = abs(cpp_mean - py_mean)
    bound = 2 * math.sqrt(cpp_error ** 2 + py_error ** 2)
    print(f"trained {args.frames} frames in {trained:.0f} s; exported {path}")
    print(f"Gymnasium (Python, TorchRL actor): mean {py_mean:.2f} +- {py_error:.2f} (standard error, {args.episodes} episodes)")
    print(f"C++ HalfCheetah (SDK Actor):       mean {cpp_mean:.2f} +- {cpp_error:.2f} ({cpp_line.strip()})")
    print(f"difference {difference:.2f}; two standard errors of the difference {bound:.2f}: "
          f"{'agree' if difference <= bound else 'DIFFER'}")


if __name__ == "__main__":
    main()
