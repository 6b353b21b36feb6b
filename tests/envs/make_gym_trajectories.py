#!/usr/bin/python3
"""Writes gym_trajectories.txt: reference CartPole-v1 and Pendulum-v1 episodes for envs_test.

Gymnasium cannot be installed on the build machine (no PyPI), so this script re-implements
Gym's published step equations in float64 numpy, as read in Farama-Foundation/Gymnasium:
  gymnasium/envs/classic_control/cartpole.py  (commit 06e40df3caafb5eae0eeb98cd747d6f72fdab3a8)
  gymnasium/envs/classic_control/pendulum.py  (commit 04b863db169ab72be8826010e966222632bc575a)
plus TimeLimit's truncation (500 steps for CartPole-v1, 200 for Pendulum-v1). The expressions
keep Gym's operation order; Gym holds the state in float64 and returns float32 observations.

Each episode starts from a fixed initial state drawn here and replays a fixed action sequence
(random actions, or a noisy hand-written controller so that episodes last long) until it
terminates or is truncated. Re-run with: python3 tests/envs/make_gym_trajectories.py
"""
import math
import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gym_trajectories.txt")


# ---- CartPole-v1 -------------------------------------------------------------------------
GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
CARTPOLE_LIMIT = 500


def cartpole_step(state, action):
    x, x_dot, theta, theta_dot = state
    force = FORCE_MAG if action == 1 else -FORCE_MAG
    costheta = math.cos(theta)
    sintheta = math.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot**2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS))
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    x = x + TAU * x_dot
    x_dot = x_dot + TAU * xacc
    theta = theta + TAU * theta_dot
    theta_dot = theta_dot + TAU * thetaacc
    state = (x, x_dot, theta, theta_dot)
    terminated = bool(x < -X_THRESHOLD or x > X_THRESHOLD or
                      theta < -THETA_THRESHOLD or theta > THETA_THRESHOLD)
    return state, 1.0, terminated


def cartpole_episode(rng, policy):
    state = tuple(rng.uniform(low=-0.05, high=0.05, size=(4,)))
    init = state
    steps = []
    for t in range(1, CARTPOLE_LIMIT + 1):
        action = policy(state)
        state, reward, terminated = cartpole_step(state, action)
        truncated = t >= CARTPOLE_LIMIT
        obs = np.array(state, dtype=np.float32)
        steps.append(([action], state, obs, reward, terminated, truncated))
        if terminated or truncated:
            break
    return init, steps


# ---- Pendulum-v1 -------------------------------------------------------------------------
MAX_SPEED = 8
MAX_TORQUE = 2.0
DT = 0.05
G = 10.0
M = 1.0
L = 1.0
PENDULUM_LIMIT = 200


def angle_normalize(x):
    return ((x + np.pi) % (2 * np.pi)) - np.pi


def pendulum_obs(state):
    theta, thetadot = state
    return np.array([np.cos(theta), np.sin(theta), thetadot], dtype=np.float32)


def pendulum_step(state, u):
    th, thdot = state
    u = np.clip(u, -MAX_TORQUE, MAX_TORQUE)[0]
    costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)
    newthdot = thdot + (3 * G / (2 * L) * np.sin(th) + 3.0 / (M * L**2) * u) * DT
    newthdot = np.clip(newthdot, -MAX_SPEED, MAX_SPEED)
    newth = th + newthdot * DT
    return np.array([newth, newthdot]), -costs, False


def pendulum_episode(rng, policy):
    high = np.array([np.pi, 1.0])
    state = rng.uniform(low=-high, high=high)
    init = tuple(state)
    steps = []
    for t in range(1, PENDULUM_LIMIT + 1):
        # Gym's Box action space is float32: round the torque the way the C++ env receives it.
        u = np.array([policy(state)], dtype=np.float32).astype(np.float64)
        state, reward, terminated = pendulum_step(state, u)
        truncated = t >= PENDULUM_LIMIT
        steps.append(([float(u[0])], tuple(state), pendulum_obs(state), reward, terminated,
                      truncated))
        if terminated or truncated:
            break
    return init, steps


# ---- episodes ----------------------------------------------------------------------------
def main():
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

    def random_torque(state):
        return rng.uniform(-2.5, 2.5)  # beyond the bounds, to exercise the clipping

    def swing_up(state):
        th, thdot = state
        if math.cos(th) > 0.9:  # near the top: PD on the normalized angle
            return -8.0 * angle_normalize(th) - 1.5 * thdot
        return 2.0 if thdot >= 0 else -2.0  # pump energy

    episodes = []
    for _ in range(4):
        episodes.append(("cartpole", *cartpole_episode(rng, random_push)))
    for noise in (0.5, 0.35):
        episodes.append(("cartpole", *cartpole_episode(rng, balance(noise))))
    episodes.append(("cartpole", *cartpole_episode(rng, balance(0.0))))
    for _ in range(2):
        episodes.append(("pendulum", *pendulum_episode(rng, random_torque)))
    episodes.append(("pendulum", *pendulum_episode(rng, lambda s: 0.0)))
    episodes.append(("pendulum", *pendulum_episode(rng, swing_up)))

    with open(OUT, "w") as out:
        out.write("# Generated by make_gym_trajectories.py: Gym CartPole-v1 / Pendulum-v1 reference\n")
        out.write("# episode <env> <steps>; init <state...>; then per step:\n")
        out.write("# step <action...> <state after the step...> <observation...> <reward> "
                  "<terminated> <truncated>\n")
        for env, init, steps in episodes:
            out.write(f"episode {env} {len(steps)}\n")
            out.write("init " + " ".join(repr(float(v)) for v in init) + "\n")
            for action, state, obs, reward, terminated, truncated in steps:
                fields = [repr(float(a)) for a in action]
                fields += [repr(float(v)) for v in state]
                fields += [repr(float(v)) for v in obs]
                fields += [repr(float(reward)), str(int(terminated)), str(int(truncated))]
                out.write("step " + " ".join(fields) + "\n")
            last = steps[-1]
            print(f"{env}: {len(steps)} steps, terminated={last[4]} truncated={last[5]}",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
