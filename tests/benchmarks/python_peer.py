"""The Python peer of actor_benchmark.cc: the same two actors in tensordict.nn / TorchRL.

  /root/.cache/tdpolicy/venv/bin/python3 tests/benchmarks/python_peer.py           # from the repo root
  ./bazelw run -c opt //tests/benchmarks:compare_with_python    # C++ and this, one table of ratios

What it builds, from policies/cartpole_categorical.pbtxt and policies/pendulum_tanh_gaussian.pbtxt
(the few fields it needs are read from the spec files, and it stops if a spec no longer has the
shape it builds):
- CartPole: ProbabilisticTensorDictSequential(
      TensorDictModule(torchrl.modules.MLP(4 -> 64 -> 64 -> 2, Tanh), "observation" -> "logits"),
      ProbabilisticTensorDictModule("logits" -> "action", torch.distributions.Categorical,
                                    return_log_prob=True))
- Pendulum: ProbabilisticTensorDictSequential(
      TensorDictModule(torchrl.modules.MLP(3 -> 64 -> 64 -> 2, Tanh), "observation" -> "params"),
      TensorDictModule(tensordict.nn.NormalParamExtractor("biased_softplus_1.0", scale_lb=1e-4),
                       "params" -> ("loc", "scale")),
      ProbabilisticTensorDictModule(("loc", "scale") -> "action", torchrl.modules.TanhNormal with
                                    low=-2, high=2, return_log_prob=True))
the module tree the C++ spec loader builds, with tensordict's classes. Called as actor(td) on
a TensorDict holding "observation" under set_interaction_type(RANDOM), so each call draws an
action and writes it and "action_log_prob" into td, which keeps them until the next call (as
the C++ benchmark keeps its last action).

Weights: the C++ actor is built from the spec's init_seed: its loader seeds LibTorch's default
CPU generator with it and constructs the Linear layers in order. LibTorch's and PyTorch's Linear
draw their initial weights the same way from the same generator, so torch.manual_seed(init_seed)
before building the MLP here gives the same weights (checked against `tdp run` with
--interaction=deterministic, which reproduced the actions and log-probs printed by
--print-deterministic). The observation is the C++ benchmark's: randn([B, obs_dim]) from a CPU
generator seeded with 123. Timing does not depend on these values, but the same values make
the same work (e.g. the same branch of any data-dependent op).

Conditions matched to actor_benchmark.cc and benchmark_main.cc: one intra-op thread
(torch.set_num_threads(1)), torch.inference_mode(), batch 1, 256 and 4096, glibc's malloc set
up as tdp::actor::tune_cpu_allocator() does (M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 512 MiB;
TDP_DEFAULT_MALLOC=1 leaves it alone, as there). Each actor runs eager and under
torch.compile(mode="default", dynamic=False), compiled once per batch size; a compile that
fails is reported as such (the first line of the error) and the run goes on.

Timing: per (policy, batch), every variant is warmed up, then the number of calls per
repetition is chosen so that one repetition takes about --min-time seconds, then
--repetitions repetitions run with the variants in a new random order each time (like
Google Benchmark's --benchmark_enable_random_interleaving). Per call: the median over the
repetitions of the thread's CPU time (what Google Benchmark reports as cpu_time) and of the
wall time; steps/s = batch / CPU time per call.

Prints a table; --json FILE also writes the results (compare_with_python.sh reads it).
"""

import argparse
import ctypes
import json
import math
import os
import platform
import random
import re
import statistics
import sys
import time
import traceback

# One intra-op thread, set before torch starts its thread pools.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tensordict  # noqa: E402
import torchrl  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from tensordict.nn import (  # noqa: E402
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    set_interaction_type,
)
from torchrl.modules import MLP, TanhNormal  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES = (1, 256, 4096)  # actor_benchmark.cc: ->Arg(1)->Arg(256)->Arg(4096)
OBS_SEED = 123  # actor_benchmark.cc: at::randn({batch, obs_dim}, createCPUGenerator(123))


# ---- the specs ----------------------------------------------------------------------------

def _field(text, pattern, spec_path, convert=str):
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise SystemExit(f"{spec_path}: expected to find /{pattern}/; python_peer.py builds a fixed "
                         "actor shape and this spec no longer has it: update the script")
    return convert(match.group(1))


def read_spec(path):
    """The fields python_peer.py needs from a policy spec (text format), checked."""
    with open(path) as f:
        text = "\n".join(line.split("#", 1)[0] for line in f)  # drop comments
    spec = {"path": path}
    spec["name"] = _field(text, r'^name:\s*"([^"]+)"', path)
    spec["init_seed"] = _field(text, r"^init_seed:\s*(\d+)", path, int)
    mlp = _field(text, r"mlp\s*\{([^}]*)\}", path)
    spec["in_features"] = _field(mlp, r"in_features:\s*(\d+)", path, int)
    spec["hidden"] = [int(h) for h in _field(mlp, r"hidden_sizes:\s*\[([^\]]*)\]", path).split(",")]
    spec["out_features"] = _field(mlp, r"out_features:\s*(\d+)", path, int)
    spec["activation"] = _field(mlp, r'activation:\s*"([^"]+)"', path)
    spec["distribution"] = _field(text, r'distribution:\s*"([^"]+)"', path)
    if spec["activation"] != "tanh":
        raise SystemExit(f"{path}: activation {spec['activation']!r}; python_peer.py builds tanh MLPs")
    if "normal_param_extractor" in text:
        extractor = _field(text, r"normal_param_extractor\s*\{([^}]*)\}", path)
        spec["scale_mapping"] = _field(extractor, r'scale_mapping:\s*"([^"]+)"', path)
        spec["scale_lb"] = _field(extractor, r"scale_lb:\s*([0-9.eE+-]+)", path, float)
    kwargs = dict(re.findall(r'distribution_kwargs\s*\{\s*key:\s*"(\w+)"\s*value\s*\{\s*double_value:\s*([0-9.eE+-]+)',
                             text))
    spec["distribution_kwargs"] = {k: float(v) for k, v in kwargs.items()}
    if "return_log_prob: true" not in text:
        raise SystemExit(f"{path}: python_peer.py expects return_log_prob: true")
    return spec


def mlp_module(spec):
    # The C++ loader seeds the default CPU generator with init_seed and builds the Linear layers
    # in order; torchrl's MLP builds Linear(in, 64), Linear(64, 64), Linear(64, out) in order too.
    torch.manual_seed(spec["init_seed"])
    return MLP(in_features=spec["in_features"], out_features=spec["out_features"],
               num_cells=spec["hidden"], activation_class=nn.Tanh)


def build_actor(spec):
    """The spec's module tree with tensordict.nn / TorchRL classes."""
    if spec["distribution"] == "categorical":
        return ProbabilisticTensorDictSequential(
            TensorDictModule(mlp_module(spec), in_keys=["observation"], out_keys=["logits"]),
            ProbabilisticTensorDictModule(
                in_keys=["logits"], out_keys=["action"],
                distribution_class=torch.distributions.Categorical,
                default_interaction_type=InteractionType.DETERMINISTIC,
                return_log_prob=True))
    if spec["distribution"] == "tanh_normal":
        if "scale_mapping" not in spec:
            raise SystemExit(f"{spec['path']}: python_peer.py expects a NormalParamExtractor before tanh_normal")
        return ProbabilisticTensorDictSequential(
            TensorDictModule(mlp_module(spec), in_keys=["observation"], out_keys=["params"]),
            TensorDictModule(NormalParamExtractor(scale_mapping=spec["scale_mapping"], scale_lb=spec["scale_lb"]),
                             in_keys=["params"], out_keys=["loc", "scale"]),
            ProbabilisticTensorDictModule(
                in_keys=["loc", "scale"], out_keys=["action"],
                distribution_class=TanhNormal,
                distribution_kwargs={"low": spec["distribution_kwargs"].get("low", -1.0),
                                     "high": spec["distribution_kwargs"].get("high", 1.0)},
                default_interaction_type=InteractionType.DETERMINISTIC,
                return_log_prob=True))
    raise SystemExit(f"{spec['path']}: distribution {spec['distribution']!r} is not one python_peer.py builds")


def observation(batch, obs_dim):
    return torch.randn(batch, obs_dim, generator=torch.Generator().manual_seed(OBS_SEED))


# ---- the process: threads and malloc as benchmark_main.cc sets them -----------------------------

def tune_malloc():
    """tdp::actor::tune_cpu_allocator(): keep freed memory mapped (see sdk/actor/cpu_allocator.h)."""
    if os.environ.get("TDP_DEFAULT_MALLOC"):
        return "glibc default (TDP_DEFAULT_MALLOC set)"
    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        ok = libc.mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)) == 1
        ok = ok and libc.mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1
    except (OSError, AttributeError):
        return "glibc default (no glibc mallopt here)"
    return "tuned as tune_cpu_allocator (mmap threshold 32 MiB, trim threshold 512 MiB)" if ok else \
        "glibc default (mallopt refused)"


# ---- timing -------------------------------------------------------------------------------

def time_calls(fn, n):
    """(CPU seconds, wall seconds) per call over n calls."""
    cpu0, wall0 = time.thread_time_ns(), time.perf_counter_ns()
    for _ in range(n):
        fn()
    cpu1, wall1 = time.thread_time_ns(), time.perf_counter_ns()
    return (cpu1 - cpu0) * 1e-9 / n, (wall1 - wall0) * 1e-9 / n


def calls_per_repetition(fn, min_time):
    n = 1
    while True:
        _, wall = time_calls(fn, n)
        if wall * n >= min_time / 4 or n >= 1 << 24:
            return max(1, math.ceil(min_time / max(wall, 1e-9)))
        n *= 4


def first_line(error):
    text = f"{type(error).__name__}: {error}".strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def compile_actor(actor, td):
    """torch.compile'd actor and its first call, or the error that stopped it."""
    import torch._dynamo
    torch._dynamo.reset()
    breaks_before = sum(torch._dynamo.utils.counters["graph_break"].values())
    start = time.perf_counter()
    compiled = torch.compile(actor, mode="default", dynamic=False)
    out = compiled(td)
    for key in ("action", "action_log_prob"):
        if key not in out.keys():
            raise RuntimeError(f"the compiled actor wrote no {key!r}")
    if not torch.isfinite(out["action_log_prob"]).all():
        raise RuntimeError("the compiled actor returned a non-finite log-prob")
    seconds = time.perf_counter() - start
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values()) - breaks_before
    return compiled, seconds, breaks


def run(args):
    torch.set_num_threads(1)
    malloc = tune_malloc()
    specs = [read_spec(os.path.join(REPO_ROOT, p)) for p in args.policies]
    results = []
    meta = {
        "python": platform.python_version(), "torch": torch.__version__, "tensordict": tensordict.__version__,
        "torchrl": torchrl.__version__, "threads": torch.get_num_threads(), "malloc": malloc,
        "repetitions": args.repetitions, "min_time_s": args.min_time, "compile": not args.no_compile,
        "cpu": platform.processor() or platform.machine(),
    }
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if not args.quiet else (lambda *a: None)
    log(f"python_peer: torch {torch.__version__}, tensordict {tensordict.__version__}, torchrl "
        f"{torchrl.__version__}, {torch.get_num_threads()} intra-op thread, malloc {malloc}")
    rng = random.Random(0)
    with torch.inference_mode(), set_interaction_type(InteractionType.RANDOM):
        for spec in specs:
            actor = build_actor(spec)
            for batch in args.batches:
                td = TensorDict({"observation": observation(batch, spec["in_features"])}, batch_size=[batch])
                variants = {"eager": actor}
                rows = {"eager": {}}
                if not args.no_compile:
                    log(f"python_peer: compiling {spec['name']} at batch {batch} ...")
                    try:
                        compiled, seconds, breaks = compile_actor(actor, td)
                        variants["compiled"] = compiled
                        rows["compiled"] = {"compile_s": round(seconds, 2), "graph_breaks": breaks}
                    except Exception as error:  # noqa: BLE001: any failure is reported, not fatal
                        rows["compiled"] = {"error": "torch.compile failed: " + first_line(error)}
                        if args.verbose:
                            traceback.print_exc()
                calls = {}
                for name, module in variants.items():
                    fn = (lambda m=module: m(td))
                    time_calls(fn, 3)  # warm up
                    end = time.perf_counter() + args.warmup
                    while time.perf_counter() < end:
                        fn()
                    calls[name] = (fn, calls_per_repetition(fn, args.min_time))
                samples = {name: [] for name in variants}
                for _ in range(args.repetitions):
                    order = list(variants)
                    rng.shuffle(order)
                    for name in order:
                        fn, n = calls[name]
                        samples[name].append(time_calls(fn, n))
                for name in variants:
                    cpu = statistics.median(s[0] for s in samples[name])
                    wall = statistics.median(s[1] for s in samples[name])
                    rows[name].update({
                        "cpu_us": cpu * 1e6, "real_us": wall * 1e6, "steps_per_s": batch / cpu,
                        "cpu_us_min": min(s[0] for s in samples[name]) * 1e6,
                        "cpu_us_max": max(s[0] for s in samples[name]) * 1e6,
                        "iterations": calls[name][1],
                    })
                for name, row in rows.items():
                    results.append({"policy": spec["name"], "batch": batch, "variant": name, **row})
                    log("python_peer: " + format_row(results[-1]))
    meta["load_avg"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return {"meta": meta, "results": results}


def format_row(r):
    head = f"{r['policy']:<24} {r['batch']:>5} {r['variant']:<9}"
    if "error" in r:
        return f"{head} {r['error']}"
    extra = f"  (compiled in {r['compile_s']} s, {r['graph_breaks']} graph breaks)" if "compile_s" in r else ""
    return (f"{head} {r['cpu_us']:>10.1f} us CPU {r['real_us']:>10.1f} us wall "
            f"{r['steps_per_s']:>12,.0f} steps/s{extra}")


def print_deterministic(args):
    """The actions and log-probs in DETERMINISTIC mode for a small fixed input: compare them
    with `tdp run SPEC --interaction=deterministic` to check that the weights are the C++ actor's."""
    torch.set_num_threads(1)
    for path in args.policies:
        spec = read_spec(os.path.join(REPO_ROOT, path))
        actor = build_actor(spec)
        obs = observation(2, spec["in_features"])
        with torch.inference_mode(), set_interaction_type(InteractionType.DETERMINISTIC):
            out = actor(TensorDict({"observation": obs}, batch_size=[2]))
        print(json.dumps({"policy": spec["name"], "observation": obs.tolist(), "action": out["action"].tolist(),
                          "action_log_prob": out["action_log_prob"].tolist()}))


# ---- the comparison with actor_benchmark's JSON (compare_with_python.sh) ----------------------

CPP_FAMILIES = {"CartPole": "cartpole_categorical", "Pendulum": "pendulum_tanh_gaussian"}  # actor_benchmark.cc


def read_cpp(path):
    """{(policy, batch): {"Actor"|"Hand": cpu µs or error}} from Google Benchmark's JSON: the
    median aggregate when there are repetitions, else the single run."""
    with open(path) as f:
        report = json.load(f)
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    cpp, context = {}, dict(report.get("context", {}))
    for b in report["benchmarks"]:
        context.setdefault("repetitions", b.get("repetitions", 1))
        run_name = b.get("run_name", b["name"])
        match = re.fullmatch(r"(\w+?)_(Actor|Hand)/(\d+)", run_name)
        if match is None or match.group(1) not in CPP_FAMILIES:
            continue
        key = (CPP_FAMILIES[match.group(1)], int(match.group(3)))
        side = match.group(2)
        if b.get("error_occurred"):
            cpp.setdefault(key, {})[side] = "error: " + b.get("error_message", "?")
            continue
        is_median = b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median"
        if is_median or (b.get("run_type", "iteration") == "iteration" and side not in cpp.get(key, {})):
            cpp.setdefault(key, {})[side] = b["cpu_time"] * scale[b.get("time_unit", "ns")]
    return cpp, context


def fmt_us(value):
    if isinstance(value, str):
        return value
    if value is None:
        return "n/a"
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def fmt_ratio(num, den):
    if isinstance(num, (int, float)) and isinstance(den, (int, float)) and den > 0:
        return f"{num / den:.2f}"
    return "n/a"


def fmt_rate(batch, us):
    if not isinstance(us, (int, float)):
        return "n/a"
    rate = batch / (us * 1e-6)
    return f"{rate / 1e6:.2f}M/s" if rate >= 1e6 else f"{rate / 1e3:.1f}k/s"


def compare(cpp_json, python_report):
    cpp, context = read_cpp(cpp_json)
    py = {}
    for r in python_report["results"]:
        py.setdefault((r["policy"], r["batch"]), {})[r["variant"]] = r.get("cpu_us", r.get("error"))
    m = python_report["meta"]
    lines = [
        "",
        f"C++ actor_benchmark vs Python tensordict {m['tensordict']} / torchrl {m['torchrl']} / torch {m['torch']}:",
        f"CPU time per call in us, medians of interleaved repetitions (C++ {context.get('repetitions', '?')}, "
        f"Python {m['repetitions']}), one intra-op thread, RANDOM, log-prob.",
        f"Host {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, load average "
        f"{', '.join(f'{x:.2f}' for x in context.get('load_avg', [])) or '?'} at the C++ start, "
        f"{m.get('load_avg', '?')} at the Python end. Ratios: Python / C++ SDK.",
        "",
        "| policy | batch | C++ SDK (`Actor`) | C++ by hand | Python eager | Python compiled "
        "| eager / SDK | compiled / SDK |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    keys = sorted(set(cpp) | set(py), key=lambda k: (k[0], k[1]))
    notes = []
    for policy, batch in keys:
        c, p = cpp.get((policy, batch), {}), py.get((policy, batch), {})
        sdk, hand = c.get("Actor"), c.get("Hand")
        eager, compiled = p.get("eager"), p.get("compiled", "not run" if not m["compile"] else None)
        if isinstance(compiled, str) and compiled.startswith("torch.compile failed"):
            notes.append(f"{policy} batch {batch}: {compiled}")
            compiled = "failed (below)"
        lines.append(f"| {policy} | {batch} | {fmt_us(sdk)} | {fmt_us(hand)} | {fmt_us(eager)} | "
                     f"{fmt_us(compiled)} | {fmt_ratio(eager, sdk)} | {fmt_ratio(compiled, sdk)} |")
    lines += ["", "Throughput (env steps/s = batch / CPU time per call):", "",
              "| policy | batch | C++ SDK | C++ by hand | Python eager | Python compiled |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for policy, batch in keys:
        c, p = cpp.get((policy, batch), {}), py.get((policy, batch), {})
        lines.append(f"| {policy} | {batch} | {fmt_rate(batch, c.get('Actor'))} | {fmt_rate(batch, c.get('Hand'))} | "
                     f"{fmt_rate(batch, p.get('eager'))} | {fmt_rate(batch, p.get('compiled'))} |")
    compiled_rows = [r for r in python_report["results"] if r["variant"] == "compiled"]
    worked = [r for r in compiled_rows if "error" not in r]
    if not m["compile"]:
        notes.insert(0, "torch.compile: not run (--no-compile).")
    elif worked:
        notes.insert(0, f"torch.compile (mode default, dynamic=False, CPU/inductor): compiled {len(worked)} of "
                        f"{len(compiled_rows)} (policy, batch) pairs in {min(r['compile_s'] for r in worked)}-"
                        f"{max(r['compile_s'] for r in worked)} s each, "
                        f"{sum(r['graph_breaks'] for r in worked)} graph breaks in all.")
    else:
        notes.insert(0, f"torch.compile: failed for all {len(compiled_rows)} (policy, batch) pairs.")
    if notes:
        lines += [""] + notes
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policies", nargs="+",
                        default=["policies/cartpole_categorical.pbtxt", "policies/pendulum_tanh_gaussian.pbtxt"],
                        help="spec files, relative to the repository root")
    parser.add_argument("--batches", type=int, nargs="+", default=list(BATCHES))
    parser.add_argument("--repetitions", type=int, default=9, help="as --benchmark_repetitions (default 9)")
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds per repetition and variant")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds of warm-up per variant")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--verbose", action="store_true", help="full tracebacks of compile failures")
    parser.add_argument("--cpp-json", metavar="FILE",
                        help="actor_benchmark's --benchmark_out JSON: also print the C++/Python comparison")
    parser.add_argument("--python-json", metavar="FILE",
                        help="with --cpp-json: compare with this earlier --json output instead of measuring")
    parser.add_argument("--print-deterministic", action="store_true",
                        help="print deterministic actions for a fixed input (weight check) and exit")
    args = parser.parse_args()
    if args.print_deterministic:
        return print_deterministic(args)
    if args.python_json:
        if not args.cpp_json:
            parser.error("--python-json needs --cpp-json")
        with open(args.python_json) as f:
            print(compare(args.cpp_json, json.load(f)))
        return None
    report = run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    m = report["meta"]
    print(f"tensordict {m['tensordict']} / torchrl {m['torchrl']} / torch {m['torch']}, {m['threads']} thread, "
          f"median of {m['repetitions']} interleaved repetitions, CPU time per call")
    print(f"{'policy':<24} {'batch':>5} {'variant':<9} {'per call':>13} {'wall':>18} {'throughput':>20}")
    for r in report["results"]:
        print(format_row(r))
    if args.cpp_json:
        print(compare(args.cpp_json, report))
    return None


if __name__ == "__main__":
    main()
