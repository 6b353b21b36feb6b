"""Gymnasium's MuJoCo tasks stepped with random actions: the reference mujoco_gymnasium_test
replays in C++.

For each task: gymnasium.make(task) with its registered defaults (1000-step time limit) under
ClipAction (as the C++ tasks clip, being BatchedEnvs), reset with a seed, then `steps` steps of
actions drawn uniformly from 1.1x the action space (so some are clipped), resetting on
terminated or truncated. The actions recorded are the unclipped ones both sides are given. Writes
<out>/<task>.f64: float64 little-endian values,
  header: nq, nv, nu, observation size, number of records
  reset record: 0, qpos, qvel, observation
  step record:  1, action, observation, reward, terminated, truncated
Usage: gymnasium_mujoco_reference.py --out DIR [--steps 1000] TASK...
"""

import argparse
import os

import gymnasium as gym
import numpy as np


def record_task(task: str, steps: int, out_dir: str, seed: int) -> None:
    env = gym.wrappers.ClipAction(gym.make(task))
    base = env.unwrapped
    rng = np.random.default_rng(seed)
    nq, nv, nu = base.model.nq, base.model.nv, base.model.nu
    low, high = base.action_space.low, base.action_space.high
    records = []

    def reset(**kwargs):
        obs, _ = env.reset(**kwargs)
        records.append(np.concatenate([[0.0], base.data.qpos, base.data.qvel, obs]))

    reset(seed=seed)
    for _ in range(steps):
        action = rng.uniform(1.1 * low, 1.1 * high).astype(np.float32)
        obs, reward, terminated, truncated, _ = env.step(action)
        records.append(np.concatenate([[1.0], action.astype(np.float64), obs,
                                       [float(reward), float(terminated), float(truncated)]]))
        if terminated or truncated:
            reset()
    header = np.array([nq, nv, nu, env.observation_space.shape[0], len(records)], dtype=np.float64)
    data = np.concatenate([header] + records).astype("<f8")
    data.tofile(os.path.join(out_dir, task + ".f64"))
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for i, task in enumerate(args.tasks):
        record_task(task, args.steps, args.out, args.seed + i)


if __name__ == "__main__":
    main()
