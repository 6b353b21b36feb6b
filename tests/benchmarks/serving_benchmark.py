"""Serving benchmark: requests/s and p50/p99 latency of tritonclient gRPC -> tdpolicy.serving (KServe's
model server, one batching actor) at 1, 8 and 64 concurrent clients, batch 1 and 64 rows per request,
beside the same policy called in-process through the C API (tdp_actor_act, the same number of
threads calling it directly) in the same run. Not a test: it measures.

Run it through serving_benchmark.sh (a private network namespace, the serving venv):
    ./bazelw run -c opt //tests/benchmarks:serving_benchmark [-- --seconds 3 --spec PATH]

Clients are threads of this process (tritonclient releases the GIL while it waits), so at 64 clients
part of the latency is this process's own Python; the machine's load from other work shows too.
"""

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient

from tdpolicy import serving


def percentile(values, q):
    return float(np.percentile(np.asarray(values), q)) * 1e3 if values else float("nan")


def run_clients(clients, seconds, call):
    """`clients` threads calling call(thread_state) for `seconds`; returns (requests/s, latencies)."""
    latencies = [[] for _ in range(clients)]
    stop = threading.Event()
    barrier = threading.Barrier(clients + 1)
    errors = []

    def worker(index):
        state = {}
        try:
            call(state, warmup=True)
            barrier.wait()
            mine = latencies[index]
            while not stop.is_set():
                start = time.perf_counter()
                call(state)
                mine.append(time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 (reported by the caller)
            errors.append(repr(error))
            stop.set()
        finally:
            closer = state.get("close")
            if closer:
                closer()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(errors[0])
    merged = [x for per in latencies for x in per]
    return len(merged) / elapsed, merged


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", default="1,8,64")
    parser.add_argument("--batches", default="1,64")
    args = parser.parse_args()
    clients_list = [int(c) for c in args.clients.split(",")]
    batches = [int(b) for b in args.batches.split(",")]

    policy = serving.BatchingPolicy(args.spec, library=args.library)
    width = policy.inputs[0].shape[0]
    rng = np.random.default_rng(0)
    observations = {b: rng.uniform(-1, 1, size=(b, width)).astype(np.float32) for b in batches}

    # The in-process baseline: the same policy, each thread calling the actor directly.
    lib = policy.lib
    lib.tdp_actor_act.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(serving._Tensor), ctypes.c_size_t,
                                  ctypes.POINTER(serving._Tensor), ctypes.c_size_t, ctypes.c_int]

    def in_process(batch):
        obs = observations[batch]
        outputs = {s.name: np.empty((batch,) + s.shape, s.numpy) for s in policy.outputs}
        c_in = (serving._Tensor * 1)(serving._Tensor(policy.inputs[0].name.encode(), 1, obs.ctypes.data, obs.size))
        c_out = (serving._Tensor * len(outputs))(*[
            serving._Tensor(s.name.encode(), s.tdp_dtype, outputs[s.name].ctypes.data, outputs[s.name].size)
            for s in policy.outputs])

        def call(state, warmup=False):
            if lib.tdp_actor_act(policy.actor, batch, c_in, 1, c_out, len(outputs), 5) != 0:
                raise RuntimeError(lib.tdp_last_error().decode())
        return call

    http_port, grpc_port = 19080, 19081
    server = subprocess.Popen(
        [sys.executable, "-m", "tdpolicy.serving", "--spec", args.spec, "--model-name", "bench",
         "--http-port", str(http_port), "--grpc-port", str(grpc_port), "--library", args.library],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(server.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not any(line.startswith("tdpolicy.serving: ready") for line in list(lines)):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start:\n" + "".join(lines))
            time.sleep(0.1)
        urllib.request.urlopen("http://127.0.0.1:%d/v2/health/ready" % http_port, timeout=10).close()

        def remote(batch):
            obs = observations[batch]

            def call(state, warmup=False):
                if "client" not in state:
                    state["client"] = grpcclient.InferenceServerClient("127.0.0.1:%d" % grpc_port)
                    state["close"] = state["client"].close
                    tensor = grpcclient.InferInput(policy.inputs[0].name, list(obs.shape), "FP32")
                    tensor.set_data_from_numpy(obs)
                    state["inputs"] = [tensor]
                result = state["client"].infer("bench", state["inputs"],
                                               parameters={"interaction_type": "deterministic"})
                if result.as_numpy(policy.outputs[0].name).shape[0] != batch:
                    raise RuntimeError("wrong batch in the response")
            return call

        print("policy %s (%s); %d CPU cores; %.1f s per row; machine shared with other engineers' builds "
              "(load average %s)" % (policy.name, args.spec, os.cpu_count(), args.seconds,
                                     " ".join("%.2f" % x for x in os.getloadavg())))
        print("%-8s %6s %6s | %12s %9s %9s | %12s %9s %9s | %9s" % (
            "path", "clients", "batch", "remote req/s", "p50 ms", "p99 ms", "local req/s", "p50 ms", "p99 ms",
            "p50 ratio"))
        for batch in batches:
            for clients in clients_list:
                remote_rps, remote_lat = run_clients(clients, args.seconds, remote(batch))
                local_rps, local_lat = run_clients(clients, args.seconds, in_process(batch))
                print("%-8s %6d %6d | %12.0f %9.3f %9.3f | %12.0f %9.3f %9.3f | %9.0f" % (
                    "grpc", clients, batch, remote_rps, percentile(remote_lat, 50), percentile(remote_lat, 99),
                    local_rps, percentile(local_lat, 50), percentile(local_lat, 99),
                    percentile(remote_lat, 50) / percentile(local_lat, 50)), flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        reader.join(timeout=10)
        stats = [line.strip() for line in lines if "batching stats" in line]
        print(stats[-1] if stats else "the server printed no statistics:\n" + "".join(lines[-20:]))
        policy.close()


if __name__ == "__main__":
    main()
