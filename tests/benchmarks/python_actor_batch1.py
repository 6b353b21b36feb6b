#!/usr/bin/env python3
"""Per-call cost of tdpolicy.Actor called from Python at batch 1, against the C++ Actor::act
called from C++ (`tdp bench`) in the same run: where the time between the two goes.

    ./bazelw build -c opt //sdk/python:_C.so //sdk/cli:tdp
    PYTHONPATH=<the package with _C.so> ~/.cache/tdpolicy/venv/bin/python3 \
        tests/benchmarks/python_actor_batch1.py --tdp bazel-bin/sdk/cli/tdp [--rounds 7] [--number 50000]

policies/cartpole_categorical.pbtxt (MLP 64-64, categorical: action + log-prob) on the fused plan,
torch on one thread. Each round times every case once: `number` calls, each timed on its own
(time.perf_counter_ns around the call, as `tdp bench` times each call with steady_clock), Python's
garbage collector off except in the "gc on" row; the cases in a rotated order so that a burst of
load from another process falls on different cases. Per case and round: the p50 of the calls,
less the p50 of timing an empty lambda (the timer and the loop), and the mean (which counts the
calls another process preempted: on a loaded machine the p50 is the figure to read). The table
gives the median over the rounds of each. Not a test: it measures.
"""

import argparse
import gc
import re
import statistics
import subprocess
import time

import torch
from tensordict import TensorDict

import tdpolicy

SPEC = "policies/cartpole_categorical.pbtxt"


def cpp_bench(tdp, iterations):
    """Actor::act from C++ at batch 1 (tdp bench): (mean, p50) microseconds per call."""
    out = subprocess.run([tdp, "bench", SPEC, "--batch=1", "--iterations=%d" % iterations, "--warmup=2000",
                          "--threads=1", "--backend=fused", "--interaction=random"],
                         check=True, capture_output=True, text=True).stdout
    found = re.search(r"mean ([0-9.]+) us, p50 ([0-9.]+) us", out)
    return float(found.group(1)), float(found.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tdp", help="a `tdp` binary (-c opt) for the C++ baseline; without it, none")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=50000, help="calls per case per round")
    args = parser.parse_args()
    torch.set_num_threads(1)

    actor = tdpolicy.Actor.load(SPEC, backend="fused", seed=0)
    released = tdpolicy.Actor.load(SPEC, backend="fused", seed=0)
    if hasattr(released, "_gil_release_rows"):
        released._gil_release_rows = 0  # act_tensor releasing the GIL even at batch 1
    obs = torch.zeros(1, 4)
    td = TensorDict(observation=obs, batch_size=[1])
    out_source = actor.act(obs)
    buffers = tuple(out_source[key].clone() for key in actor.out_keys)
    size = torch.Size([1])

    def per_call(fn, number, collect):
        """(p50, mean) nanoseconds of `number` calls of fn, each timed on its own."""
        clock = time.perf_counter_ns
        spans = [0] * number
        (gc.enable if collect else gc.disable)()
        try:
            for i in range(number):
                start = clock()
                fn()
                spans[i] = clock() - start
        finally:
            gc.enable()
        return statistics.median(spans), sum(spans) / number

    cases = [
        ("act_tensor(obs)", lambda: actor.act_tensor(obs), False),
        ("act_tensor(obs), GIL released", lambda: released.act_tensor(obs), False),
        ("act_tensor(obs, out=buffers)", lambda: actor.act_tensor(obs, out=buffers), False),
        ("act_tensor(obs), gc on", lambda: actor.act_tensor(obs), True),
        ("act(obs) -> dict", lambda: actor.act(obs), False),
        ("act(observation=obs) -> dict", lambda: actor.act(observation=obs), False),
        ("act(td) -> TensorDict (td built once)", lambda: actor.act(td), False),
        ("TensorDict(observation=obs, batch_size=[1]) + act(td)",
         lambda: actor.act(TensorDict(observation=obs, batch_size=[1])), False),
        ("  TensorDict(observation=obs, batch_size=[1]) alone", lambda: TensorDict(observation=obs, batch_size=[1]), False),
        ("  TensorDict._new_unsafe(2 outputs) alone",
         lambda: TensorDict._new_unsafe(source=dict(out_source), batch_size=size), False),
        ("  td.get('observation') alone", lambda: td.get("observation", None), False),
        ("  actor.device (an empty pybind11 call)", lambda: actor.device, False),
    ]
    if not hasattr(actor, "act_tensor"):  # an extension built before act_tensor: the other rows
        cases = [case for case in cases if "act_tensor" not in case[0]]
    if args.tdp:
        cases.insert(0, ("C++ Actor::act from C++ (tdp bench)", None, False))

    p50s = {name: [] for name, _, _ in cases}
    means = {name: [] for name, _, _ in cases}
    for r in range(args.rounds):
        empty, _ = per_call(lambda: None, args.number, False)
        shift = r % len(cases)
        for name, fn, collect in cases[shift:] + cases[:shift]:
            if fn is None:
                mean, p50 = cpp_bench(args.tdp, args.number)
            else:
                for _ in range(200):
                    fn()
                p50, mean = per_call(fn, args.number, collect)
                p50, mean = (p50 - empty) / 1e3, (mean - empty) / 1e3
            p50s[name].append(p50)
            means[name].append(mean)
        print("round %d/%d done (empty lambda + timer: %.0f ns)" % (r + 1, args.rounds, empty), flush=True)

    print("\n%s, batch 1, fused plan, one thread, %d rounds of %d calls, us per call"
          % (SPEC, args.rounds, args.number))
    print("%-56s %8s %8s" % ("case", "p50", "mean"))
    for name, _, _ in cases:
        print("%-56s %8.2f %8.2f" % (name, statistics.median(p50s[name]), statistics.median(means[name])))


if __name__ == "__main__":
    main()
