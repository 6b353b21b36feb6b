"""tdpolicy.serving end to end: `python -m tdpolicy.serving` started as its users start it, inside
this test's private network namespace (serving_test.sh), called with tritonclient over REST and
gRPC. Outputs equal the in-process SDK actor's (the C API, in this process); concurrent requests are
merged by the model's one batching actor (its statistics, printed when the server stops); every
malformed request is a protocol error naming the input or parameter, and the server keeps serving;
a bad spec or library stops it at start with a message naming it; every listener is on loopback;
the server stops on SIGTERM and leaves no process behind.

Environment (serving_test.sh): TDP_LIBRARY (libtdpolicy.so), TDP_POLICIES (policies/), and the
package's sources on PYTHONPATH.
"""

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import private_network  # tests/python, which the runner puts on sys.path
from tdpolicy import serving

LIBRARY = os.environ["TDP_LIBRARY"]
POLICIES = os.environ["TDP_POLICIES"]
CARTPOLE = os.path.join(POLICIES, "cartpole_categorical.pbtxt")
PENDULUM = os.path.join(POLICIES, "pendulum_tanh_gaussian.pbtxt")
START_TIMEOUT = 180.0  # a loaded 2-core machine imports KServe slowly


class InProcessActor:
    """The SDK's actor in this process, through the C API: the reference the server must equal."""

    def __init__(self, spec, seed=0, backend="auto"):
        self.lib = lib = serving._load_library(LIBRARY)
        lib.tdp_actor_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        lib.tdp_actor_free.argtypes = [ctypes.c_void_p]
        lib.tdp_actor_act.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(serving._Tensor), ctypes.c_size_t,
                                      ctypes.POINTER(serving._Tensor), ctypes.c_size_t, ctypes.c_int]
        options = ctypes.c_void_p()
        assert lib.tdp_options_create(ctypes.byref(options)) == 0
        assert lib.tdp_options_set_seed(options, seed) == 0
        assert lib.tdp_options_set_backend(options, serving._BACKENDS[backend]) == 0
        self.handle = ctypes.c_void_p()
        status = lib.tdp_actor_load(spec.encode(), options, ctypes.byref(self.handle))
        lib.tdp_options_free(options)
        if status != 0:
            raise RuntimeError(lib.tdp_last_error().decode())
        self.outputs = self._outputs()

    def _outputs(self):
        count = ctypes.c_size_t()
        assert self.lib.tdp_actor_num_outputs(self.handle, ctypes.byref(count)) == 0
        slots = []
        for i in range(count.value):
            name, dtype = ctypes.c_char_p(), ctypes.c_int()
            dims, ndim = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_size_t()
            assert self.lib.tdp_actor_output(self.handle, i, ctypes.byref(name), ctypes.byref(dtype),
                                             ctypes.byref(dims), ctypes.byref(ndim)) == 0
            slots.append(serving.Slot(name.value.decode(), dtype.value, [dims[d] for d in range(ndim.value)]))
        return slots

    def act(self, observation, interaction_type):
        observation = np.ascontiguousarray(observation, dtype=np.float32)
        batch = observation.shape[0]
        inputs = (serving._Tensor * 1)(serving._Tensor(b"observation", 1, observation.ctypes.data, observation.size))
        results = {slot.name: np.empty((batch,) + slot.shape, dtype=slot.numpy) for slot in self.outputs}
        outputs = (serving._Tensor * len(self.outputs))(*[
            serving._Tensor(slot.name.encode(), slot.tdp_dtype, results[slot.name].ctypes.data,
                            results[slot.name].size) for slot in self.outputs])
        status = self.lib.tdp_actor_act(self.handle, batch, inputs, 1, outputs, len(self.outputs),
                                        serving._INTERACTIONS[interaction_type])
        if status != 0:
            raise RuntimeError(self.lib.tdp_last_error().decode())
        return results

    def __del__(self):
        self.lib.tdp_actor_free(self.handle)


class Server:
    """`python -m tdpolicy.serving` in a process group of its own, its output collected."""

    def __init__(self, spec, model_name, http_port, grpc_port, *extra):
        self.model_name, self.http_port, self.grpc_port = model_name, http_port, grpc_port
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tdpolicy.serving", "--spec", spec, "--model-name", model_name,
             "--http-port", str(http_port), "--grpc-port", str(grpc_port), "--library", LIBRARY, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self):
        return "".join(self.lines)

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while not any(line.startswith("tdpolicy.serving: ready") for line in self.lines):
            if self.process.poll() is not None:
                raise AssertionError("the server exited with %s before it was ready:\n%s" % (
                    self.process.returncode, self.output()))
            if time.monotonic() > deadline:
                raise AssertionError("the server was not ready within %.0f s:\n%s" % (START_TIMEOUT, self.output()))
            time.sleep(0.1)
        # The protocol's own readiness, over REST.
        with urllib.request.urlopen("http://127.0.0.1:%d/v2/health/ready" % self.http_port, timeout=10) as response:
            assert response.status == 200, response.status

    def stop(self):
        """SIGTERM, then the exit status and output; fails when the process or its group lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            raise AssertionError("the server did not stop within 60 s of SIGTERM:\n" + self.output())
        self._reader.join(timeout=10)
        leftover = True
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            leftover = False
        if leftover:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise AssertionError("processes of the server's group were left after it stopped")
        return self.process.returncode, self.output()


def grpc_infer(client, model, observation, parameters=None, datatype="FP32", name="observation", outputs=None):
    tensor = grpcclient.InferInput(name, list(observation.shape), datatype)
    tensor.set_data_from_numpy(observation)
    requested = [grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, [tensor], parameters=parameters, outputs=requested)


def http_infer(client, model, observation, parameters=None, datatype="FP32", name="observation", outputs=None):
    tensor = httpclient.InferInput(name, list(observation.shape), datatype)
    tensor.set_data_from_numpy(observation)
    requested = [httpclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, [tensor], parameters=parameters, outputs=requested)


def observations(batch, width, seed):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(batch, width)).astype(np.float32)


SERVERS = {}


def setUpModule():
    # serving_test.sh runs this file in a namespace of its own, whose only interface is lo.
    private_network.check_only_loopback()
    SERVERS["cartpole"] = Server(CARTPOLE, "cartpole", 18080, 18081)
    SERVERS["pendulum"] = Server(PENDULUM, "pendulum", 18090, 18091)
    for server in SERVERS.values():
        server.wait_ready()


def tearDownModule():
    failures = []
    for name, server in SERVERS.items():
        code, output = server.stop()
        if code != 0 or "tdpolicy.serving: stopped model %s" % name not in output:
            failures.append("%s: exit status %s\n%s" % (name, code, output))
    if failures:
        raise AssertionError("\n".join(failures))


class ServingTest(unittest.TestCase):

    def setUp(self):
        self.grpc = {name: grpcclient.InferenceServerClient("127.0.0.1:%d" % s.grpc_port) for name, s in SERVERS.items()}
        self.http = {name: httpclient.InferenceServerClient("127.0.0.1:%d" % s.http_port) for name, s in SERVERS.items()}
        self.addCleanup(lambda: [c.close() for c in list(self.grpc.values()) + list(self.http.values())])

    def test_every_listener_is_on_loopback(self):
        sockets = private_network.listening_sockets()
        ports = {port for _, port in sockets}
        for server in SERVERS.values():
            self.assertIn(server.http_port, ports)
            self.assertIn(server.grpc_port, ports)
        # KServe binds the wildcard address; in this namespace it can only mean lo.
        self.assertEqual(private_network.beyond_loopback(sockets), [])
        private_network.check_only_loopback()

    def test_model_metadata_is_the_policy_signature(self):
        expected = {
            "cartpole": ([("observation", "FP32", [-1, 4])],
                         [("action", "INT64", [-1]), ("action_log_prob", "FP32", [-1])]),
            "pendulum": ([("observation", "FP32", [-1, 3])],
                         [("action", "FP32", [-1, 1]), ("action_log_prob", "FP32", [-1])]),
        }
        for model, (inputs, outputs) in expected.items():
            with self.subTest(model=model):
                metadata = self.grpc[model].get_model_metadata(model, as_json=True)
                self.assertEqual([(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in metadata["inputs"]],
                                 inputs)
                self.assertEqual([(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in metadata["outputs"]],
                                 outputs)
                rest = self.http[model].get_model_metadata(model)
                self.assertEqual([(t["name"], t["datatype"], t["shape"]) for t in rest["inputs"]], inputs)
                self.assertTrue(self.http[model].is_model_ready(model))

    def test_deterministic_outputs_equal_the_in_process_actor(self):
        for model, spec, width in (("cartpole", CARTPOLE, 4), ("pendulum", PENDULUM, 3)):
            actor = InProcessActor(spec)
            for batch in (1, 5, 64):
                obs = observations(batch, width, seed=batch)
                expected = actor.act(obs, "deterministic")
                for protocol, infer, client in (("grpc", grpc_infer, self.grpc[model]),
                                                ("rest", http_infer, self.http[model])):
                    with self.subTest(model=model, batch=batch, protocol=protocol):
                        result = infer(client, model, obs, {"interaction_type": "deterministic"})
                        for name, value in expected.items():
                            got = result.as_numpy(name)
                            self.assertEqual(got.dtype, value.dtype, name)
                            self.assertEqual(got.shape, value.shape, name)
                            # The merged call may run on another kernel: equal to float rounding.
                            np.testing.assert_allclose(got, value, rtol=0, atol=1e-6, err_msg=name)

    def test_random_with_a_seed_equals_an_in_process_actor_with_that_seed(self):
        for model, spec, width in (("cartpole", CARTPOLE, 4), ("pendulum", PENDULUM, 3)):
            obs = observations(16, width, seed=3)
            for seed in (0, 7, 2 ** 40):
                # The first random call of an actor loaded with this seed (LibTorch backend).
                expected = InProcessActor(spec, seed=seed, backend="libtorch").act(obs, "random")
                for protocol, infer, client in (("grpc", grpc_infer, self.grpc[model]),
                                                ("rest", http_infer, self.http[model])):
                    with self.subTest(model=model, seed=seed, protocol=protocol):
                        for _ in range(2):  # and again: the same seed, the same outputs
                            result = infer(client, model, obs, {"interaction_type": "random", "seed": seed})
                            for name, value in expected.items():
                                np.testing.assert_array_equal(result.as_numpy(name), value, err_msg=name)
            with self.subTest(model=model, check="another seed samples otherwise"):
                a = grpc_infer(self.grpc[model], model, obs, {"seed": 1}).as_numpy("action_log_prob")
                b = grpc_infer(self.grpc[model], model, obs, {"seed": 2}).as_numpy("action_log_prob")
                self.assertFalse(np.array_equal(a, b))

    def test_interaction_types_and_requested_outputs(self):
        obs = observations(4, 3, seed=11)
        actor = InProcessActor(PENDULUM)
        for interaction_type in ("deterministic", "mean"):
            with self.subTest(interaction_type=interaction_type):
                expected = actor.act(obs, interaction_type)
                result = grpc_infer(self.grpc["pendulum"], "pendulum", obs, {"interaction_type": interaction_type},
                                    outputs=["action"])
                np.testing.assert_allclose(result.as_numpy("action"), expected["action"], rtol=0, atol=1e-6)
                self.assertEqual([o.name for o in result.get_response().outputs], ["action"])
        # TanhNormal has neither an analytical mode nor a median: the error names the method.
        for interaction_type, fragment in (("mode", "TanhNormal has no analytical mode"),
                                           ("median", "TanhNormal.median")):
            with self.subTest(interaction_type=interaction_type):
                self.assert_protocol_error(
                    lambda: grpc_infer(self.grpc["pendulum"], "pendulum", obs, {"interaction_type": interaction_type}),
                    fragment)
        # Without the parameter: the server's --interaction-type, random (two calls differ).
        a = grpc_infer(self.grpc["pendulum"], "pendulum", obs).as_numpy("action")
        b = grpc_infer(self.grpc["pendulum"], "pendulum", obs).as_numpy("action")
        self.assertFalse(np.array_equal(a, b))

    def test_grpc_requests_with_typed_contents_get_raw_outputs(self):
        # A client that sends its inputs as typed contents (fp32_contents) instead of raw bytes, as
        # a hand-written OIP client may: the outputs still come back as raw_output_contents, in
        # the order of the outputs listed.
        import grpc
        from tritonclient.grpc import service_pb2, service_pb2_grpc

        obs = observations(3, 4, seed=5)
        request = service_pb2.ModelInferRequest(model_name="cartpole", id="typed-1")
        tensor = request.inputs.add(name="observation", datatype="FP32", shape=[3, 4])
        tensor.contents.fp32_contents.extend(obs.ravel().tolist())
        request.parameters["interaction_type"].string_param = "deterministic"
        request.parameters["seed"].int64_param = 9
        with grpc.insecure_channel("127.0.0.1:%d" % SERVERS["cartpole"].grpc_port) as channel:
            response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=30)
        self.assertEqual(response.id, "typed-1")
        self.assertEqual([o.name for o in response.outputs], ["action", "action_log_prob"])
        self.assertEqual(len(response.raw_output_contents), 2)
        expected = InProcessActor(CARTPOLE).act(obs, "deterministic")
        np.testing.assert_array_equal(np.frombuffer(response.raw_output_contents[0], np.int64), expected["action"])
        np.testing.assert_allclose(np.frombuffer(response.raw_output_contents[1], np.float32),
                                   expected["action_log_prob"], rtol=0, atol=1e-6)

    def assert_protocol_error(self, call, *fragments):
        """`call` fails with INVALID_ARGUMENT (gRPC) or 400 (REST), its message holding `fragments`."""
        with self.assertRaises(InferenceServerException) as caught:
            call()
        self.assertIn(caught.exception.status(), ("StatusCode.INVALID_ARGUMENT", "400"), str(caught.exception))
        for fragment in fragments:
            self.assertIn(fragment, caught.exception.message())
        return caught.exception.message()

    def test_malformed_requests_are_protocol_errors_naming_the_input(self):
        good = observations(2, 4, seed=0)
        for protocol, infer in (("grpc", grpc_infer), ("rest", http_infer)):
            client = self.grpc["cartpole"] if protocol == "grpc" else self.http["cartpole"]
            cases = {
                "unknown input": (lambda: infer(client, "cartpole", good, name="obs"),
                                  ['"obs" is not an input', '"observation" (FP32 [-1, 4])']),
                "wrong datatype": (lambda: infer(client, "cartpole", good.astype(np.float64), datatype="FP64"),
                                   ['"observation"', "FP64", "expected FP32 [-1, 4]"]),
                "wrong shape": (lambda: infer(client, "cartpole", good[:, :3].copy()),
                                ['"observation"', "[2, 3]", "expected FP32 [-1, 4]"]),
                "batch over the limit": (lambda: infer(client, "cartpole", observations(65, 4, seed=1)),
                                         ['"observation"', "batch 65", "1 to 64"]),
                "bad interaction type": (lambda: infer(client, "cartpole", good, {"interaction_type": "greedy"}),
                                         ['"interaction_type"', "greedy", '"deterministic"']),
                "interaction type without a value": (
                    lambda: infer(client, "cartpole", good, {"interaction_type": "mean"}), ["mean"]),
                "seed not an integer": (lambda: infer(client, "cartpole", good, {"seed": "seven"}),
                                        ['"seed"', "seven", "int64 >= 0"]),
                "negative seed": (lambda: infer(client, "cartpole", good, {"seed": -1}), ['"seed"', "-1"]),
                "unknown parameter": (lambda: infer(client, "cartpole", good, {"temperature": 2}),
                                      ['"temperature"', '"interaction_type"', '"seed"']),
                "unknown output": (lambda: infer(client, "cartpole", good, outputs=["value"]),
                                   ['"value" is not an output', '"action"']),
            }
            for case, (call, fragments) in cases.items():
                with self.subTest(protocol=protocol, case=case):
                    self.assert_protocol_error(call, *fragments)
                    # The server goes on serving.
                    result = infer(client, "cartpole", good, {"interaction_type": "deterministic"})
                    self.assertEqual(result.as_numpy("action").shape, (2,))

    def test_malformed_json_requests_name_the_input(self):
        url = "http://127.0.0.1:%d/v2/models/cartpole/infer" % SERVERS["cartpole"].http_port
        cases = {
            "too few values": ({"inputs": [{"name": "observation", "shape": [2, 4], "datatype": "FP32",
                                            "data": [0.1, 0.2, 0.3]}]}, ['"observation"', "[2, 4]"]),
            "input given twice": ({"inputs": [{"name": "observation", "shape": [1, 4], "datatype": "FP32",
                                               "data": [0, 0, 0, 0]}] * 2}, ['"observation" is given twice']),
            "no inputs": ({"inputs": []}, ['"observation"']),
        }
        for case, (body, fragments) in cases.items():
            with self.subTest(case=case):
                request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                                 headers={"Content-Type": "application/json"})
                with self.assertRaises(urllib.error.HTTPError) as caught:
                    urllib.request.urlopen(request, timeout=30)
                self.assertEqual(caught.exception.code, 400)
                message = caught.exception.read().decode()
                for fragment in fragments:
                    self.assertIn(fragment.replace('"', '\\"'), message)
        # A JSON request and JSON outputs (no binary data asked).
        body = {"inputs": [{"name": "observation", "shape": [1, 4], "datatype": "FP32", "data": [0.1, 0.2, 0.3, 0.4]}],
                "parameters": {"interaction_type": "deterministic"}}
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = json.loads(response.read())
        expected = InProcessActor(CARTPOLE).act(np.array([[0.1, 0.2, 0.3, 0.4]], np.float32), "deterministic")
        outputs = {o["name"]: o for o in reply["outputs"]}
        self.assertEqual(outputs["action"]["data"], expected["action"].tolist())
        np.testing.assert_allclose(outputs["action_log_prob"]["data"], expected["action_log_prob"], atol=1e-6)


class StartTest(unittest.TestCase):

    def test_a_bad_spec_or_library_is_a_clear_error_at_start(self):
        cases = (
            (["--spec", os.path.join(POLICIES, "no_such_policy.pbtxt"), "--library", LIBRARY],
             "no_such_policy.pbtxt"),
            (["--spec", CARTPOLE, "--library", "/nonexistent/libtdpolicy.so"],
             "--library /nonexistent/libtdpolicy.so does not exist"),
            (["--spec", CARTPOLE, "--library", LIBRARY, "--device", "tpu"], '"tpu" is not a device'),
        )
        for arguments, fragment in cases:
            with self.subTest(arguments=arguments):
                run = subprocess.run([sys.executable, "-m", "tdpolicy.serving", "--model-name", "bad",
                                      "--http-port", "18110", "--grpc-port", "18111", *arguments],
                                     capture_output=True, text=True, timeout=120)
                self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
                self.assertIn("tdpolicy.serving: cannot load", run.stderr)
                self.assertIn(fragment, run.stderr)
                self.assertNotIn("ready", run.stdout)


class BatchingTest(unittest.TestCase):
    """Its own server, stopped by the test: the batching statistics are printed at the stop."""

    def test_concurrent_requests_are_merged_by_one_batching_actor(self):
        server = Server(CARTPOLE, "merged", 18100, 18101)
        stopped = False
        try:
            server.wait_ready()
            threads, calls = 32, 8
            obs = [observations(1, 4, seed=t) for t in range(threads)]
            expected = [InProcessActor(CARTPOLE).act(o, "deterministic") for o in obs]
            errors = []
            barrier = threading.Barrier(threads)

            def simulator(t):
                client = grpcclient.InferenceServerClient("127.0.0.1:%d" % server.grpc_port)
                try:
                    barrier.wait()
                    for _ in range(calls):
                        result = grpc_infer(client, "merged", obs[t], {"interaction_type": "deterministic"})
                        if (result.as_numpy("action")[0] != expected[t]["action"][0] or
                                abs(result.as_numpy("action_log_prob")[0] - expected[t]["action_log_prob"][0]) > 1e-6):
                            errors.append("simulator %d: %s" % (t, result.get_response()))
                except Exception as error:  # noqa: BLE001 (reported below)
                    errors.append("simulator %d: %r" % (t, error))
                finally:
                    client.close()

            workers = [threading.Thread(target=simulator, args=(t,)) for t in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            self.assertEqual(errors, [])
            code, output = server.stop()
            stopped = True
            self.assertEqual(code, 0, output)
            found = re.search(r"tdpolicy.serving: stopped model merged; batching stats: (.*)", output)
            self.assertIsNotNone(found, output)
            stats = {k: int(v) for k, v in (item.split("=") for item in found.group(1).split())}
            self.assertEqual(stats["requests"], threads * calls, stats)
            self.assertEqual(stats["rows"], threads * calls, stats)
            self.assertEqual(stats["rejected"], 0, stats)
            # Thirty-two simulators at once: requests that arrive while a batch runs share the next.
            self.assertLess(stats["batches"], stats["requests"], stats)
            self.assertGreater(stats["largest_batch"], 1, stats)
            print("batching stats with %d concurrent simulators: %s" % (threads, stats))
        finally:
            if not stopped:
                server.stop()


if __name__ == "__main__":
    unittest.main()
