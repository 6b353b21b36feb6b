"""tdpolicy.distributed: tdpolicy.Collector in Ray actors (processes on any node of a Ray cluster),
its batches streamed to the learner in TorchRL's layout, the learner's weights broadcast through
Ray's object store. The API is TorchRL's distributed collectors' (RayCollector's names).

    import ray, tdpolicy
    ray.init(address="auto")                       # or RayCollector(..., ray_init_config={...})
    collector = tdpolicy.distributed.RayCollector("cartpole", policy, frames_per_batch=4096,
                                                  total_frames=400_000, num_collectors=2, num_envs=8)
    for batch in collector:                        # TensorDict [2 * 8, 256], TorchRL's keys
        train_on(batch)                            # GAE, ClipPPOLoss, replay buffers as they are
        collector.update_policy_weights_()         # ray.put once; every worker loads that object
    collector.shutdown()

Each worker is a Ray actor holding one tdpolicy.Collector (N C++ environments named as
tdpolicy.envs.make_env names them, and the C++ Actor exported from the policy module). Every batch
a worker hands out carries ("collector", "worker_id") and ("collector", "sequence"): which worker
collected it and that worker's batch number. When a worker's process dies, Ray restarts the actor
(max_restarts) with a fresh seed and the learner asks it again for the batch it lost; every request
carries the ref of the latest weights, which a restarted worker loads before collecting. Each batch
is yielded once: the frames yielded are exactly ceil(total_frames / frames_per_batch) *
frames_per_batch, as TorchRL's collectors count them.

Every node needs the same Python environment as the learner: torch, tensordict, torchrl, ray and
tdpolicy with its extension (pip install ./sdk/python).
"""

import math
import os
import time

import ray
import torch

from tdpolicy import envs as _envs


def _collector_error(error):
    """The message of the exception a worker raised (creation or call), without Ray's wrapping."""
    cause = getattr(error, "cause", None) or getattr(error, "as_instanceof_cause", lambda: None)()
    return str(cause) if cause is not None else str(error)


class _Worker:
    """One Ray actor: a tdpolicy.Collector and the policy module whose weights it loads."""

    def __init__(self, worker_id, num_workers, env, policy, frames_per_batch, num_envs, max_episode_steps, seed,
                 interaction, num_threads):
        import tdpolicy

        torch.set_num_threads(num_threads)
        self.worker_id = worker_id
        self.num_workers = num_workers
        self.module = None if isinstance(policy, (str, os.PathLike)) else policy
        self.weights = None  # the ObjectRef of the weights the module holds (None: those it was made with)
        self.seed = None  # the last set_seed applied, as next() receives it (None: the constructor's)
        self.restarted = ray.get_runtime_context().was_current_actor_reconstructed
        if self.restarted:
            # Ray restarted this worker after its process died: new episodes, not the ones its
            # constructor's seed (or the learner's last set_seed) gave before.
            seed = seed + num_workers * (1 + os.getpid())
        self.collector = tdpolicy.Collector(env, policy, frames_per_batch, -1, num_envs=num_envs,
                                            max_episode_steps=max_episode_steps, seed=seed + worker_id,
                                            interaction=interaction)

    def next(self, sequence, weights, seed):
        """The worker's batch number `sequence`, tagged with the worker id and that number.

        weights: [ObjectRef] of the latest weights broadcast, or [None]; loaded when this worker
        does not hold them yet (also after a restart, which forgets them). seed: the latest
        set_seed as (its number, the seed), or None; applied once. Trajectory ids are made unique across workers
        (id * num_workers + worker id).
        """
        (weights,) = weights
        if weights is not None and weights != self.weights:
            self.update_policy_weights_(ray.get(weights))
            self.weights = weights
        if self.restarted:
            self.restarted, self.seed = False, seed  # a set_seed older than the restart: already replaced
        elif seed is not None and seed != self.seed:
            self.collector.set_seed(seed[1] + self.worker_id)
            self.seed = seed
        batch = self.collector.next()
        shape = batch.batch_size
        batch.set(("collector", "traj_ids"), batch.get(("collector", "traj_ids")) * self.num_workers + self.worker_id)
        batch.set(("collector", "worker_id"), torch.full(shape, self.worker_id, dtype=torch.int64))
        batch.set(("collector", "sequence"), torch.full(shape, sequence, dtype=torch.int64))
        return batch

    def update_policy_weights_(self, state_dict):
        if self.module is None:
            raise ValueError("update_policy_weights_: this collector's policy is a spec path, not a module: the "
                             "workers have no module to load weights into")
        self.module.load_state_dict(state_dict)
        self.collector.update_policy_weights_()

    def node_info(self):
        """Where this worker runs: its process id and its Ray node id (diagnostics, tests)."""
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def shutdown(self):
        self.collector.shutdown()


def _check_int(name, value, minimum):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("%s=%r: expected an int" % (name, value))
    if value < minimum:
        raise ValueError("%s=%d: expected at least %d" % (name, value, minimum))


class RayCollector:
    """Collects with num_collectors tdpolicy.Collector workers, each a Ray actor (a process placed by
    Ray on any node), and yields their batches as TensorDicts in TorchRL's layout.

    env: a tdpolicy.envs name (tdpolicy.envs.env_names()); each worker makes num_envs of them
        (max_episode_steps as in make_env).
    policy: the tensordict / TorchRL module being trained (pickled to each worker, exported there
        with tdpolicy.export; update_policy_weights_() sends its weights later), or a spec path
        readable on every node.
    frames_per_batch, total_frames: as TorchRL's RayCollector. sync=True: each iteration takes one
        batch from every worker and concatenates them along the environment dimension
        ([num_collectors * num_envs, T]; frames_per_batch must be a multiple of
        num_collectors * num_envs). sync=False: each iteration yields the batch of whichever worker
        finished first ([num_envs, T], frames_per_batch a multiple of num_envs), and that worker
        starts its next batch at once. Iteration stops after ceil(total_frames / frames_per_batch)
        batches; total_frames=-1: never.
    seed: worker i seeds its environments and its actor with seed + i.
    interaction: how the workers' actors act ("random", "deterministic", ...); None: the actor's.
    remote_configs: options of ray.remote for each worker (resources, scheduling); by default one
        CPU each, spread over the nodes. max_restarts: how often Ray restarts a worker whose
        process died (after that the collector raises); restart_timeout: seconds a restarting
        worker may stay unavailable.
    ray_init_config: arguments of ray.init when Ray is not initialized yet (None: ray.init()).
    num_threads: torch threads in each worker (its collector steps in its own C++ thread).
    """

    def __init__(self, env, policy, frames_per_batch, total_frames=-1, *, num_collectors=1, num_envs=1,
                 max_episode_steps=0, sync=True, seed=0, interaction=None, remote_configs=None, max_restarts=3,
                 restart_timeout=120.0, ray_init_config=None, num_threads=1):
        if not isinstance(env, str) or env not in _envs.env_names():
            raise ValueError("env=%r: expected one of tdpolicy.envs.env_names() (%s); workers make their "
                             "environments by name" % (env, ", ".join(_envs.env_names())))
        _check_int("num_collectors", num_collectors, 1)
        _check_int("num_envs", num_envs, 1)
        _check_int("frames_per_batch", frames_per_batch, 1)
        _check_int("total_frames", total_frames, -1)
        _check_int("max_restarts", max_restarts, 0)
        if total_frames == 0:
            raise ValueError("total_frames=0: expected a positive number of frames, or -1 for no end")
        per_worker = frames_per_batch // num_collectors if sync else frames_per_batch
        divisor = num_collectors * num_envs if sync else num_envs
        if frames_per_batch % divisor:
            raise ValueError("frames_per_batch=%d: expected a multiple of %s = %d (%s)" % (
                frames_per_batch, "num_collectors * num_envs" if sync else "num_envs", divisor,
                "each worker collects an equal share of every batch with all its environments" if sync
                else "a worker's batch has the same number of steps in each of its environments"))
        if not isinstance(policy, (str, os.PathLike)):
            from tensordict.nn import TensorDictModuleBase

            if not isinstance(policy, TensorDictModuleBase):
                raise TypeError("policy: expected a tensordict module or a spec path, got %s" % type(policy).__name__)
        if not ray.is_initialized():
            ray.init(**(ray_init_config or {}))
        self.env = env
        self.policy = None if isinstance(policy, (str, os.PathLike)) else policy
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.num_collectors = num_collectors
        self.sync = sync
        self.max_restarts = max_restarts
        self._seed = seed
        self._reseeds = 0  # set_seed calls: each reaches every worker once
        self._num_batches = -1 if total_frames < 0 else math.ceil(total_frames / frames_per_batch)
        self._weights = None  # the ObjectRef of the latest weights broadcast
        self.restarts = [0] * num_collectors  # the worker deaths seen (Ray restarted the worker)
        self._down_since = [None] * num_collectors  # when a worker's calls started failing, if they do
        self.restart_timeout = restart_timeout
        self._sequences = [0] * num_collectors  # the next batch number to ask each worker for
        self._pending = {}  # ObjectRef of a next() call -> (worker, sequence)
        self._batches = 0  # batches yielded
        self._asked = 0  # batches asked for (a batch asked again of a restarted worker counts once)
        self.collected_frames = 0
        self._shut = False
        if remote_configs is None:
            remote_configs = {"num_cpus": 1, "scheduling_strategy": "SPREAD"}
        if isinstance(remote_configs, dict):
            remote_configs = [remote_configs] * num_collectors
        if len(remote_configs) != num_collectors:
            raise ValueError("remote_configs: %d dicts for num_collectors=%d" % (len(remote_configs), num_collectors))
        worker_class = ray.remote(_Worker)
        self.remote_collectors = [
            worker_class.options(max_restarts=max_restarts, max_task_retries=0, **config).remote(
                i, num_collectors, env, policy, per_worker, num_envs, max_episode_steps, seed, interaction,
                num_threads)
            for i, config in enumerate(remote_configs)]
        try:
            self.node_info()  # a worker that cannot start (its collector raised) fails here, not mid-iteration
        except Exception:
            self.shutdown()
            raise

    # -- the calls every worker answers ------------------------------------------------------------
    def _get(self, refs, what):
        try:
            return ray.get(refs)
        except ray.exceptions.RayActorError as error:
            raise RuntimeError("RayCollector: a worker failed in %s: %s" % (what, _collector_error(error))) from error

    def node_info(self):
        """[{"pid", "node_id"}] of each worker: where Ray placed it."""
        return self._get([w.node_info.remote() for w in self.remote_collectors], "node_info")

    def set_seed(self, seed, static_seed=False):
        """Reseeds worker i's environments with seed + i (new episodes everywhere) before its next
        batch; returns seed."""
        _check_int("seed", seed, 0)
        self._seed = seed
        self._reseeds += 1
        return seed

    def update_policy_weights_(self, policy_or_weights=None):
        """Broadcasts weights to every worker through Ray's object store: one ray.put; each worker
        gets that object's ref with its next request, loads it into its module and copies it into
        its C++ actor before collecting. With sync=True the next batch is collected with them; with
        sync=False, the batches the workers are collecting now were asked for before the update
        (as TorchRL's asynchronous collectors).

        policy_or_weights: a module of the policy's structure, or its state_dict; None: the policy
        module this collector was made with.
        """
        weights = self.policy if policy_or_weights is None else policy_or_weights
        if weights is None:
            raise ValueError("update_policy_weights_: policy_or_weights=None, and the collector was made from a spec "
                             "path, not a module")
        if isinstance(weights, torch.nn.Module):
            weights = weights.state_dict()
        if not isinstance(weights, dict):
            raise TypeError("update_policy_weights_: expected a module or its state_dict, got %s"
                            % type(weights).__name__)
        self._weights = ray.put({k: v.detach().cpu() for k, v in weights.items()})

    # -- collection -------------------------------------------------------------------------------
    def _request(self, worker, sequence=None):
        if sequence is None:
            sequence = self._sequences[worker]
            self._sequences[worker] += 1
            self._asked += 1
        ref = self.remote_collectors[worker].next.remote(sequence, [self._weights], self._seed_asked())
        self._pending[ref] = (worker, sequence)

    def _seed_asked(self):
        return None if self._reseeds == 0 else (self._reseeds, self._seed)

    def _wait_one(self):
        """The next (worker, sequence, batch) any worker finished. A worker whose process died is
        restarted by Ray (its constructor runs again); meanwhile its calls fail as unavailable.
        It is asked again for the batch it lost, until it answers or restart_timeout passes; the
        request carries the latest weights and seed."""
        while True:
            (ref,), _ = ray.wait(list(self._pending), num_returns=1)
            worker, sequence = self._pending.pop(ref)
            try:
                batch = ray.get(ref)
            except ray.exceptions.ActorUnavailableError as error:
                if self._down_since[worker] is None:
                    self._down_since[worker] = time.monotonic()
                    self.restarts[worker] += 1
                elif time.monotonic() - self._down_since[worker] > self.restart_timeout:
                    raise RuntimeError("RayCollector: worker %d unavailable for more than restart_timeout=%g s: %s" % (
                        worker, self.restart_timeout, _collector_error(error))) from error
                time.sleep(0.1)  # it is restarting: a new process, imports, the policy's export
                self._request(worker, sequence)
                continue
            except ray.exceptions.RayActorError as error:
                raise RuntimeError("RayCollector: worker %d died and Ray will not restart it (max_restarts=%d): %s" % (
                    worker, self.max_restarts, _collector_error(error))) from error
            except ray.exceptions.RayTaskError as error:
                raise RuntimeError("RayCollector: worker %d failed collecting its batch %d: %s" % (
                    worker, sequence, _collector_error(error))) from error
            self._down_since[worker] = None
            return worker, sequence, batch

    def _more(self, asked):
        return self._num_batches < 0 or asked < self._num_batches

    def __iter__(self):
        if self._shut:
            raise RuntimeError("RayCollector: iterated after shutdown()")
        if self.sync:
            while not self._shut and self._more(self._batches):
                for worker in range(self.num_collectors):
                    self._request(worker)
                parts = [None] * self.num_collectors
                while self._pending:
                    worker, _, batch = self._wait_one()
                    parts[worker] = batch
                batch = torch.cat(parts, 0)
                self._batches += 1
                self.collected_frames += batch.numel()
                yield batch
        else:
            busy = {worker for worker, _ in self._pending.values()}
            for worker in range(self.num_collectors):
                if worker not in busy and self._more(self._asked):
                    self._request(worker)
            while not self._shut and self._pending:
                worker, _, batch = self._wait_one()
                if self._more(self._asked):
                    self._request(worker)
                self._batches += 1
                self.collected_frames += batch.numel()
                yield batch

    def __len__(self):
        if self._num_batches < 0:
            raise TypeError("RayCollector: total_frames=-1 (no end) has no length")
        return self._num_batches

    def shutdown(self, timeout=None, shutdown_ray=False):
        """Stops the workers (their collectors' threads, then the Ray actors). Safe to call twice."""
        if self._shut:
            return
        self._shut = True
        calls = [w.shutdown.remote() for w in self.remote_collectors]
        ray.wait(calls, num_returns=len(calls), timeout=10 if timeout is None else timeout)
        for worker in self.remote_collectors:
            ray.kill(worker, no_restart=True)
        self._pending.clear()
        if shutdown_ray:
            ray.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def __repr__(self):
        return "tdpolicy.distributed.RayCollector(env=%r, num_collectors=%d, frames_per_batch=%d, total_frames=%d)" % (
            self.env, self.num_collectors, self.frames_per_batch, self.total_frames)
