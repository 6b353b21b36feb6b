"""tdpolicy.Collector: environments and the C++ actor stepped together in C++ threads, batches
handed to Python in TorchRL's layout, so TorchRL's replay buffers, GAE and losses take them as
they take a SyncDataCollector's.

    collector = tdpolicy.Collector("cartpole", policy, frames_per_batch=1024, total_frames=100_000,
                                   num_envs=8)
    for batch in collector:                   # TensorDict, batch_size [8, 128]
        loss = ppo_loss(gae(batch))           # batch["next", "reward"], ("collector", "traj_ids"), ...
        optimizer.step()
        collector.update_policy_weights_()    # the module being trained -> the C++ actor
    collector.shutdown()
"""

import os

import torch

from tdpolicy import _C
from tdpolicy import envs as _envs


def _example(env):
    """Zeros of the environment's observation entries at batch 1: what tdpolicy.export needs."""
    from tensordict import TensorDict

    td = TensorDict({}, batch_size=[1])
    for spec in env.observation_spec:
        td.set(spec.key, torch.zeros((1,) + tuple(spec.shape), dtype=spec.dtype))
    return td


class Collector:
    """Collects batches of frames_per_batch transitions from N C++ environments with a C++ actor.

    env: a tdpolicy.envs.BatchedEnv, or a name for tdpolicy.envs.make_env (with num_envs and
        max_episode_steps).
    policy: a tdpolicy.Actor, a spec path, or the tensordict / TorchRL module being trained (it is
        exported with tdpolicy.export, and update_policy_weights_() copies its weights later).
    frames_per_batch: transitions per batch, summed over the environments; a multiple of N. Each
        batch has batch_size [N, frames_per_batch // N], as TorchRL's SyncDataCollector gives over
        a batched environment.
    total_frames: iteration stops after ceil(total_frames / frames_per_batch) batches; -1: never.
    seed: the environments' first reset; the actor's random stream is its own (Actor.load(seed=)).
    interaction: how the actor acts while collecting ("random", "deterministic", ...); None: the actor's.
    prefetch: collect the next batch on the collector's C++ thread while Python works on the
        current one. Then a weights update reaches the batch after the next one (the next one is
        being collected when the update comes); without prefetch it reaches the next batch.

    Batch layout (sdk/env/collector.h): the observation and the actor's outputs ("action",
    "sample_log_prob" or "action_log_prob", per-part log-probs of a composite policy) at the root;
    root "done"/"terminated"/"truncated" (false, as after TorchRL's auto-reset); ("next",
    "observation") the observation the step reached, before any auto-reset; ("next", "reward"),
    ("next", "done"/"terminated"/"truncated") [N, T, 1]; ("collector", "traj_ids") [N, T];
    recurrent state at the root and at ("next", key). Tensors are ordinary (not inference) tensors.
    """

    def __init__(self, env, policy, frames_per_batch, total_frames=-1, *, num_envs=None, max_episode_steps=0,
                 seed=0, interaction=None, prefetch=False, example=None):
        if isinstance(env, str):
            env = _envs.make_env(env, 1 if num_envs is None else num_envs, max_episode_steps=max_episode_steps)
        elif not isinstance(env, _C.BatchedEnv):
            raise TypeError("env: expected a tdpolicy.envs.BatchedEnv or an environment name (%s), got %s"
                            % (", ".join(_envs.env_names()), type(env).__name__))
        elif num_envs is not None and num_envs != env.num_envs:
            raise ValueError("num_envs=%r: the env given has %d environments" % (num_envs, env.num_envs))
        if not isinstance(frames_per_batch, int) or isinstance(frames_per_batch, bool):
            raise TypeError("frames_per_batch=%r: expected an int" % (frames_per_batch,))
        if not isinstance(total_frames, int) or isinstance(total_frames, bool):
            raise TypeError("total_frames=%r: expected an int" % (total_frames,))
        self.policy_module = None
        if isinstance(policy, _C.Actor):
            actor = policy
        elif isinstance(policy, (str, os.PathLike)):
            actor = _C.Actor.load(policy, seed=seed)
        else:
            from tensordict.nn import TensorDictModuleBase

            if not isinstance(policy, TensorDictModuleBase):
                raise TypeError("policy: expected a tdpolicy.Actor, a spec path or a tensordict module, got %s"
                                % type(policy).__name__)
            self.policy_module = policy
            actor = _C.Actor.load(policy, example=_example(env) if example is None else example, seed=seed)
        self.env = env
        self.policy = actor
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self._collector = _C._Collector(env, actor, frames_per_batch, total_frames, seed, interaction, prefetch)

    def __iter__(self):
        while True:
            batch = self._collector.next()
            if batch is None:
                return
            yield batch

    def next(self):
        """The next batch, or None once total_frames are collected."""
        return self._collector.next()

    def __len__(self):
        if self.total_frames < 0:
            raise TypeError("Collector: total_frames=-1 (no end) has no length")
        return self._collector.num_batches

    @property
    def frames(self):
        """Frames handed out so far."""
        return self._collector.frames

    def update_policy_weights_(self, policy_or_weights=None):
        """Copies the weights of the module being trained into the C++ actor (no file written).

        policy_or_weights: the module (the one tdpolicy.export was given, or one of the same
        structure); None: the module this collector was made from. The next batch collected sees
        them (with prefetch, the one after the batch being collected in the background).
        """
        module = self.policy_module if policy_or_weights is None else policy_or_weights
        if module is None:
            raise ValueError("update_policy_weights_: policy_or_weights=None, and the collector was made from a "
                             "spec or an Actor, not a module: pass the module to copy the weights from")
        self._collector.update_from(module)

    def set_seed(self, seed, static_seed=False):
        """Reseeds the environments and starts new episodes in all of them; returns the seed."""
        self._collector.set_seed(seed)
        return seed

    def shutdown(self):
        """Stops the collector's thread; iteration ends. Safe to call more than once."""
        self._collector.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def __repr__(self):
        return "tdpolicy.Collector(env=%r, policy=%r, frames_per_batch=%d, total_frames=%d)" % (
            self.env, self.policy, self.frames_per_batch, self.total_frames)
