"""The Python peer of cuda_graph_benchmark.cc on a GPU: the same two policies in tensordict.nn /
TorchRL, eager and under tensordict's CudaGraphModule, timed the way the C++ benchmark times
Actor::act (one call plus the action copied to the host, median of many), RANDOM, at batch 1, 64,
1024 and 4096.

    python3 tests/gpu/python_peer_gpu.py          # on the GPU machine, from the repository root

tests/gpu/gpu_check.sh runs it after cuda_graph_benchmark, so both tables come from one machine
in one call. The policies are python_peer.py's (tests/benchmarks/): the module tree the C++ spec
loader builds, with tensordict's classes, from the same spec files and weights. The GPU machine
has torch but neither tensordict nor TorchRL: tests/gpu/bundle.sh packs their wheels (this
project's pins, for Python 3.12) and gpu_check.sh installs them apart from the image's packages.
Without them, or without a GPU, it says so and exits 0: there is nothing to compare.

Each (policy, batch) gets its own CudaGraphModule (a graph is captured for one input shape), built
and called under set_interaction_type(RANDOM) and torch.no_grad(); eager calls run under
torch.inference_mode(), the Python fast path. A policy that CudaGraphModule cannot capture is
reported with the first line of the error (TorchRL 0.13's TanhNormal copies its low/high bounds
from the host while being built, which capture forbids).
"""

import os
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES = (1, 64, 1024, 4096)  # cuda_graph_benchmark.cc's kBatches


def median_us(fn, calls):
    for _ in range(20):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def main():
    # tensordict warns, then does it itself: CudaGraphModule needs TensorDicts out of the PyTree registry.
    os.environ.setdefault("EXCLUDE_TD_FROM_PYTREE", "1")
    try:
        import torch
        sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "benchmarks"))
        import python_peer
        from tensordict import TensorDict
        from tensordict.nn import CudaGraphModule, InteractionType, set_interaction_type
    except ImportError as error:
        print(f"python_peer_gpu: {error}; nothing measured (carry tensordict and torchrl as wheels)")
        return 0
    if not torch.cuda.is_available():
        print("python_peer_gpu: no CUDA GPU is visible; nothing measured")
        return 0
    cuda = torch.device("cuda:0")
    print(f"tensordict {python_peer.tensordict.__version__}, torchrl {python_peer.torchrl.__version__}, "
          f"torch {torch.__version__}, {torch.cuda.get_device_name(cuda)}")
    print("| policy | batch | eager (us) | CudaGraphModule (us) | eager / graph |")
    print("| --- | --- | --- | --- | --- |")
    failures = {}
    for name in ("cartpole_categorical", "pendulum_tanh_gaussian"):
        spec = python_peer.read_spec(os.path.join(REPO_ROOT, "policies", name + ".pbtxt"))
        actor = python_peer.build_actor(spec).to(cuda)
        for batch in BATCHES:
            observation = torch.randn(batch, spec["in_features"], device=cuda)
            calls = 300 if batch >= 1024 else 1000

            def eager():
                with torch.inference_mode(), set_interaction_type(InteractionType.RANDOM):
                    td = TensorDict({"observation": observation}, batch_size=[batch], device=cuda)
                    return actor(td)["action"].cpu()

            graph = CudaGraphModule(actor, warmup=2, device=cuda)

            def replay():
                with torch.no_grad(), set_interaction_type(InteractionType.RANDOM):
                    td = TensorDict({"observation": observation}, batch_size=[batch], device=cuda)
                    return graph(td)["action"].cpu()

            eager_us = median_us(eager, calls)
            try:
                if name in failures:  # one failed capture per policy is enough
                    raise RuntimeError(failures[name])
                graph_us = median_us(replay, calls)
            except RuntimeError as error:  # reported like python_peer.py's failed compiles
                failures.setdefault(name, str(error).strip().splitlines()[0])
                print(f"| {name} | {batch} | {eager_us:.1f} | capture failed | - |", flush=True)
                continue
            print(f"| {name} | {batch} | {eager_us:.1f} | {graph_us:.1f} | {eager_us / graph_us:.2f}x |", flush=True)
    for name, error in failures.items():
        print(f"{name}: CudaGraphModule could not capture the policy: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
