"""Gymnasium's CartPole-v1 and Pendulum-v1 episodes: the reference classic_gymnasium_test replays
in C++.

Each episode is gymnasium.make(env) with its registered defaults (TimeLimit 500 / 200), reset
with a seed, then stepped until it terminates or is truncated with actions from a fixed policy
(random pushes, or a noisy hand-written controller so that episodes last long; random torques
beyond the bounds so that Gymnasium clips them, no torque, a swing-up). Pendulum's torques are
float32, the dtype of its action space. Writes <out>/classic_control.txt:
  episode <env> <steps>
  init <state after reset...>                              (env.unwrapped.state, float64)
  step <action...> <state after the step...> <observation...> <reward> <terminated> <truncated>
every number written with repr, so it reads back to the same double.
Usage: gymnasium_classic_reference.py --out DIR
"""

import argparse
import math
import os
import warnings

import gymnasium as gym
import numpy as np


def record_episode(name, seed, policy):
    env = gym.make(name)
    env.reset(seed=seed)
    base = env.unwrapped
    init = tuple(base.state)
    steps = []
    while True:
        action = policy(tuple(base.state))
        obs, reward, terminated, truncated, _ = env.step(action)
        steps.append(([float(a) for a in np.atleast_1d(action)], tuple(base.state), obs, float(reward),
                      terminated, truncated))
        if terminated or truncated:
            return init, steps


def angle_normalize(x):
    return ((x + np.pi) % (2 * np.pi)) - np.pi


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # Gymnasium's checker on torques beyond the bounds
    rng = np.random.default_rng(20240607)

    def random_push(state):
        return int(rng.integers(2))

    def balance(noise):
        # A linear state feedback that keeps the pole up; `noise` of the actions are random.
        def policy(state):
            if rng.random() < noise:
                return int(rng.integers(2))
            x, x_dot, theta, theta_dot = state
            return int(0.05 * x + 0.2 * x_dot + 4.0 * theta + 0.6 * theta_dot > 0)
        return policy

    def torque(policy):
        return lambda state: np.array([policy(state)], dtype=np.float32)

    def random_torque(state):
        return rng.uniform(-2.5, 2.5)  # beyond the bounds, to exercise the clipping

    def swing_up(state):
        th, thdot = state
        if math.cos(th) > 0.9:  # near the top: PD on the normalized angle
            return -8.0 * angle_normalize(th) - 1.5 * thdot
        return 2.0 if thdot >= 0 else -2.0  # pump energy

    episodes = []
    seed = 0
    for policy in [random_push] * 4 + [balance(0.5), balance(0.35), balance(0.0)]:
        episodes.append(("cartpole", *record_episode("CartPole-v1", seed, policy)))
        seed += 1
    for policy in [random_torque, random_torque, lambda state: 0.0, swing_up]:
        episodes.append(("pendulum", *record_episode("Pendulum-v1", seed, torque(policy))))
        seed += 1

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "classic_control.txt"), "w") as out:
        for env, init, steps in episodes:
            out.write(f"episode {env} {len(steps)}\n")
            out.write("init " + " ".join(repr(float(v)) for v in init) + "\n")
            for action, state, obs, reward, terminated, truncated in steps:
                fields = [repr(a) for a in action]
                fields += [repr(float(v)) for v in state]
                fields += [repr(float(v)) for v in obs]
                fields += [repr(reward), str(int(terminated)), str(int(truncated))]
                out.write("step " + " ".join(fields) + "\n")


if __name__ == "__main__":
    main()
