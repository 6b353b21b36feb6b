"""tdpolicy.envs: the SDK's batched C++ simulators (CartPole, Pendulum, Goal, and whatever else
make_env knows: env_names()), stepped on tensordict.TensorDicts of batch size [num_envs].

    from tdpolicy import envs
    env = envs.make_env("cartpole", num_envs=8)
    td = env.reset(seed=0)                                   # td["observation"]: [8, 4]
    out = env.step(TensorDict(action=torch.ones(8, dtype=torch.long), batch_size=[8]))
    out["reward"], out["done"], out["terminated"], out["truncated"], out["final_observation"]

The interface is C++'s tdp::env::BatchedEnv (sdk/env/batched_env.h): finished environments reset
themselves inside step(), "final_observation" is what the step reached before any reset.
tdpolicy.Collector runs one with a tdpolicy.Actor entirely in C++.

A simulator of your own, written in C++ against that interface and built as a shared library
(TDP_ENV_LIBRARY, sdk/env/env_library.h; samples/custom_env is a complete one), joins them:

    envs.load_library("bazel-bin/samples/custom_env/libmountain_car.so")   # -> ["mountaincar"]
    env = envs.make_env("mountaincar", num_envs=8)
"""

import torch  # noqa: F401  (the extension uses torch's tensor types: torch is imported first)

from tdpolicy._C import BatchedEnv, EntrySpec, env_names, load_library, make_env

__all__ = ["BatchedEnv", "EntrySpec", "env_names", "load_library", "make_env"]
