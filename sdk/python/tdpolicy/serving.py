"""tdpolicy.serving: one policy spec served over the Open Inference Protocol v2 (OIP, the protocol
of KServe and Triton) by KServe's model server, so that simulators on other processes or machines
call one policy over REST or gRPC: tritonclient, a C++ tdp::actor::RemoteActor, any OIP v2 client.

The model (PolicyModel) holds ONE batching actor (sdk/actor/batching_actor.h) per model: requests
that arrive together are merged into one call of the policy, and each gets its own rows back.
The server process reaches the SDK through its C API (sdk/c/tdp_c.h, libtdpolicy.so, with ctypes),
not through torch: KServe needs protobuf 6 and lives in a venv of its own (./bazelw makes it from
third_party/python/serving-requirements.txt), where a second 4 GB torch would be waste.

Start it from the repository root (./bazelw creates the serving venv and builds the library):

    ./bazelw build //sdk/install:libtdpolicy.so
    PYTHONPATH=sdk/python ~/.cache/tdpolicy/serving-venv/bin/python3 -m tdpolicy.serving \\
        --spec policies/cartpole_categorical.pbtxt --model-name cartpole \\
        --http-port 8080 --grpc-port 8081

It prints one line "tdpolicy.serving: ready ..." on stdout when both ports accept connections,
and on SIGTERM / SIGINT stops, printing the batching statistics ("tdpolicy.serving: stopped ...").
KServe listens on all interfaces (0.0.0.0 and [::]): put it behind a firewall or in a network
namespace. Options: --library (default $TDP_LIBRARY, else bazel-bin/sdk/install/libtdpolicy.so
of this repository, else an installed libtdpolicy.so), --device cpu|cuda[:n], --backend
auto|libtorch|fused, --seed (the actor's own random stream), --max-batch-size (64),
--max-delay-us (10000), --threads (requests in flight at once, default 64).

Call it with tritonclient (gRPC; REST is tritonclient.http, the same calls):

    import numpy as np, tritonclient.grpc as grpcclient
    client = grpcclient.InferenceServerClient("localhost:8081")
    obs = grpcclient.InferInput("observation", [2, 4], "FP32")
    obs.set_data_from_numpy(np.zeros((2, 4), np.float32))
    result = client.infer("cartpole", [obs], parameters={"interaction_type": "deterministic"})
    actions = result.as_numpy("action")                       # int64 [2]

The protocol, as this model speaks it:
- Inputs and outputs are the policy's signature (the C API's): names are the spec's keys with nested
  levels joined by "/" ("next/observation"), datatypes OIP's (FP32, INT64, BOOL, ...), shapes the
  per-environment shape after a batch dim (-1 in the model metadata). Every output is returned
  unless the request names some. gRPC responses carry raw_output_contents (binary), as
  tritonclient reads them; REST ones are JSON unless the request asks for binary data.
- Request parameters: "interaction_type" (string: "random", "deterministic", "mode", "mean",
  "median", TorchRL's InteractionType names; absent: the server's --interaction-type, default
  "random") and "seed" (int64 >= 0, optional). Requests without a seed are merged by the batching
  actor and sample from the actor's own random stream. A request with a seed runs alone on a random
  stream of its own seeded with it: the same inputs and seed give the same outputs whatever else
  the server is doing, equal to the first call of an actor loaded with that seed (LibTorch backend).
- Errors are protocol errors (gRPC INVALID_ARGUMENT, REST 400) that name the input and what was
  expected: an unknown or missing input, a wrong datatype or shape, a batch over --max-batch-size,
  an unknown output, a bad or unknown parameter, an interaction type the policy's distribution has
  no value for (the mean of a categorical). The server goes on serving other requests.
"""

import argparse
import asyncio
import concurrent.futures
import ctypes
import ctypes.util
import os
import signal
import socket
import sys
import threading
import time
import uuid

import numpy as np

# The C API's enums (sdk/c/tdp_c.h).
_TDP_OK, _TDP_INVALID_ARGUMENT, _TDP_OUT_OF_RANGE = 0, 1, 4
_INTERACTIONS = {"random": 1, "mode": 2, "median": 3, "mean": 4, "deterministic": 5}
_TDP_INTERACTION_ACTOR = -1
_BACKENDS = {"auto": 0, "libtorch": 1, "fused": 2}
# tdp_dtype -> (OIP datatype, numpy dtype); bfloat16 has no numpy dtype and is not served.
_DTYPES = {
    1: ("FP32", np.float32),
    2: ("FP64", np.float64),
    3: ("FP16", np.float16),
    5: ("INT64", np.int64),
    6: ("INT32", np.int32),
    7: ("INT16", np.int16),
    8: ("INT8", np.int8),
    9: ("UINT8", np.uint8),
    10: ("BOOL", np.bool_),
}
# Parameters that OIP clients (tritonclient) may send on their own; they change nothing here.
_PROTOCOL_PARAMETERS = {"binary_data_output", "priority", "timeout", "sequence_id", "sequence_start",
                        "sequence_end", "headers"}
_PARAMETERS = ("interaction_type", "seed")


class _Tensor(ctypes.Structure):
    # tdp_input and tdp_output share this layout.
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("data", ctypes.c_void_p),
                ("count", ctypes.c_size_t)]


class _Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("requests", "rejected", "batches", "failed_batches",
                                                    "retried_requests", "rows", "largest_batch", "max_batch_size")]


def find_library(path=None):
    """The libtdpolicy.so to load: `path`, else $TDP_LIBRARY, else this repository's bazel-bin, else an
    installed one. A path given (or set) that does not exist is an error, not a reason to look elsewhere."""
    for given, what in ((path, "--library"), (os.environ.get("TDP_LIBRARY"), "TDP_LIBRARY")):
        if given:
            if not os.path.exists(given):
                raise FileNotFoundError("libtdpolicy.so: %s %s does not exist" % (what, given))
            return os.path.realpath(given)
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(here, "..", "..", "..", "bazel-bin", "sdk", "install", "libtdpolicy.so")
    if os.path.exists(built):
        return os.path.realpath(built)
    installed = ctypes.util.find_library("tdpolicy")
    if installed:
        return installed
    raise FileNotFoundError("libtdpolicy.so not found: pass --library PATH or set TDP_LIBRARY (build it with "
                            "./bazelw build //sdk/install:libtdpolicy.so)")


def _load_library(path):
    lib = ctypes.CDLL(path)
    pointer = ctypes.c_void_p
    lib.tdp_last_error.restype = ctypes.c_char_p
    lib.tdp_status_name.restype = ctypes.c_char_p
    lib.tdp_status_name.argtypes = [ctypes.c_int]
    lib.tdp_options_create.argtypes = [ctypes.POINTER(pointer)]
    lib.tdp_options_free.argtypes = [pointer]
    lib.tdp_options_set_seed.argtypes = [pointer, ctypes.c_uint64]
    lib.tdp_options_set_device.argtypes = [pointer, ctypes.c_char_p]
    lib.tdp_options_set_backend.argtypes = [pointer, ctypes.c_int]
    lib.tdp_options_set_interaction.argtypes = [pointer, ctypes.c_int]
    lib.tdp_batching_actor_load.argtypes = [ctypes.c_char_p, pointer, ctypes.c_int64, ctypes.c_int64,
                                            ctypes.POINTER(pointer)]
    lib.tdp_batching_actor_free.argtypes = [pointer]
    lib.tdp_batching_actor_actor.argtypes = [pointer]
    lib.tdp_batching_actor_actor.restype = pointer
    lib.tdp_batching_actor_act.argtypes = [pointer, ctypes.c_int64, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                           ctypes.POINTER(_Tensor), ctypes.c_size_t, ctypes.c_int]
    lib.tdp_batching_actor_stats.argtypes = [pointer, ctypes.POINTER(_Stats)]
    lib.tdp_actor_act_seeded.argtypes = [pointer, ctypes.c_int64, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                         ctypes.POINTER(_Tensor), ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64]
    lib.tdp_actor_name.argtypes = [pointer]
    lib.tdp_actor_name.restype = ctypes.c_char_p
    lib.tdp_actor_num_inputs.argtypes = [pointer, ctypes.POINTER(ctypes.c_size_t)]
    lib.tdp_actor_num_outputs.argtypes = [pointer, ctypes.POINTER(ctypes.c_size_t)]
    for function in (lib.tdp_actor_input, lib.tdp_actor_output):
        function.argtypes = [pointer, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
                             ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_size_t)]
    return lib


class SdkError(Exception):
    """A tdp_ call failed: `status` is its tdp_status name, the message tdp_last_error()."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.invalid_argument = status in ("TDP_INVALID_ARGUMENT", "TDP_OUT_OF_RANGE")


class Slot:
    """An input or output of the policy: name, OIP datatype, numpy dtype, per-environment shape."""

    def __init__(self, name, tdp_dtype, shape):
        if tdp_dtype not in _DTYPES:
            raise ValueError("\"%s\" has tdp_dtype %d (bfloat16), which OIP clients cannot read through numpy: "
                             "not servable" % (name, tdp_dtype))
        self.name, self.tdp_dtype, self.shape = name, tdp_dtype, tuple(shape)
        self.datatype, self.numpy = _DTYPES[tdp_dtype]
        self.per_env = int(np.prod(self.shape, dtype=np.int64))

    def metadata(self):
        return {"name": self.name, "datatype": self.datatype, "shape": [-1] + list(self.shape)}

    def describe(self):
        return "%s %s" % (self.datatype, [-1] + list(self.shape))


class BatchingPolicy:
    """A policy spec behind one batching actor, through the C API; act() may run on many threads."""

    def __init__(self, spec, library=None, device="cpu", backend="auto", seed=0, interaction_type="random",
                 max_batch_size=64, max_delay_us=10000):
        self.lib = _load_library(find_library(library))
        if interaction_type not in _INTERACTIONS:
            raise ValueError("interaction_type \"%s\": expected one of %s" % (interaction_type, ", ".join(_INTERACTIONS)))
        if backend not in _BACKENDS:
            raise ValueError("backend \"%s\": expected one of %s" % (backend, ", ".join(_BACKENDS)))
        options = ctypes.c_void_p()
        self._check(self.lib.tdp_options_create(ctypes.byref(options)))
        try:
            self._check(self.lib.tdp_options_set_seed(options, seed))
            self._check(self.lib.tdp_options_set_device(options, device.encode()))
            self._check(self.lib.tdp_options_set_backend(options, _BACKENDS[backend]))
            self._check(self.lib.tdp_options_set_interaction(options, _INTERACTIONS[interaction_type]))
            self.handle = ctypes.c_void_p()
            self._check(self.lib.tdp_batching_actor_load(spec.encode(), options, max_batch_size, max_delay_us,
                                                         ctypes.byref(self.handle)))
        finally:
            self.lib.tdp_options_free(options)
        self.max_batch_size = max_batch_size
        self.actor = self.lib.tdp_batching_actor_actor(self.handle)
        self.name = self.lib.tdp_actor_name(self.actor).decode()
        self.inputs = self._slots(self.lib.tdp_actor_num_inputs, self.lib.tdp_actor_input)
        self.outputs = self._slots(self.lib.tdp_actor_num_outputs, self.lib.tdp_actor_output)
        # close() waits for the calls in flight: they read the actor's slots until they return.
        self._in_flight = 0
        self._idle = threading.Condition()

    def _check(self, status):
        if status != _TDP_OK:
            raise SdkError(self.lib.tdp_status_name(status).decode(), self.lib.tdp_last_error().decode())

    def _slots(self, count_fn, slot_fn):
        count = ctypes.c_size_t()
        self._check(count_fn(self.actor, ctypes.byref(count)))
        slots = []
        for i in range(count.value):
            name, dtype = ctypes.c_char_p(), ctypes.c_int()
            dims, ndim = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_size_t()
            self._check(slot_fn(self.actor, i, ctypes.byref(name), ctypes.byref(dtype), ctypes.byref(dims),
                                ctypes.byref(ndim)))
            slots.append(Slot(name.value.decode(), dtype.value, [dims[d] for d in range(ndim.value)]))
        return slots

    def act(self, batch, inputs, outputs, interaction_type=None, seed=None):
        """Runs `batch` rows: inputs {name: C-contiguous array of the slot's dtype}, outputs a list of
        Slots; returns {name: array [batch, *shape]}. seed: a stream of its own, not merged."""
        c_inputs = (_Tensor * len(inputs))()
        keep = []
        for i, (name, array) in enumerate(inputs.items()):
            encoded = name.encode()
            keep.append(encoded)
            slot = next((s for s in self.inputs if s.name == name), None)
            c_inputs[i] = _Tensor(encoded, slot.tdp_dtype if slot else 0, array.ctypes.data, array.size)
        results = {}
        c_outputs = (_Tensor * len(outputs))()
        for i, slot in enumerate(outputs):
            results[slot.name] = np.empty((batch,) + slot.shape, dtype=slot.numpy)
            encoded = slot.name.encode()
            keep.append(encoded)
            c_outputs[i] = _Tensor(encoded, slot.tdp_dtype, results[slot.name].ctypes.data, results[slot.name].size)
        interaction = _INTERACTIONS[interaction_type] if interaction_type else _TDP_INTERACTION_ACTOR
        with self._idle:
            if self.handle is None:
                raise SdkError("TDP_FAILED_PRECONDITION", "the server is stopping: the policy was closed")
            self._in_flight += 1
        try:
            # ctypes releases the GIL for the call: requests on other threads reach the batcher meanwhile.
            if seed is None:
                status = self.lib.tdp_batching_actor_act(self.handle, batch, c_inputs, len(inputs), c_outputs,
                                                         len(outputs), interaction)
            else:
                status = self.lib.tdp_actor_act_seeded(self.actor, batch, c_inputs, len(inputs), c_outputs,
                                                       len(outputs), interaction, seed)
            self._check(status)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()
        return results

    def stats(self):
        if self.handle is None:
            raise SdkError("TDP_FAILED_PRECONDITION", "the policy was closed")
        stats = _Stats()
        self._check(self.lib.tdp_batching_actor_stats(self.handle, ctypes.byref(stats)))
        return {name: getattr(stats, name) for name, _ in _Stats._fields_}

    def close(self):
        """Runs the calls accepted, stops the batcher's worker and frees the actor."""
        with self._idle:
            handle, self.handle = self.handle, None
            self._idle.wait_for(lambda: self._in_flight == 0)
        if handle is not None:
            self.lib.tdp_batching_actor_free(handle)


def _parameter_value(value):
    # gRPC parameters arrive as InferParameter messages, REST ones as JSON values.
    if hasattr(value, "WhichOneof"):
        which = value.WhichOneof("parameter_choice")
        return None if which is None else getattr(value, which)
    return value


def _make_model_class():
    # kserve is imported only when a model is built: its import parses sys.argv (see main()).
    import kserve
    from kserve.errors import InferenceError, InvalidInput
    from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

    class PolicyModel(kserve.Model):
        """A KServe model over a BatchingPolicy: OIP v2 inference on the policy's signature."""

        def __init__(self, name, policy, threads=64):
            super().__init__(name)
            self.policy = policy
            # Each request in flight blocks one thread inside the C API while the batcher merges it
            # with the others: KServe's default pool (cores + 4 threads) would cap the merge.
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads,
                                                               thread_name_prefix="tdpolicy-serving")
            self.ready = True

        def load(self):
            self.ready = True
            return self.ready

        def get_input_types(self):
            return [slot.metadata() for slot in self.policy.inputs]

        def get_output_types(self):
            return [slot.metadata() for slot in self.policy.outputs]

        def _parameters(self, request):
            given = {key: _parameter_value(value) for key, value in (request.parameters or {}).items()}
            interaction_type = given.pop("interaction_type", None)
            seed = given.pop("seed", None)
            unknown = sorted(set(given) - _PROTOCOL_PARAMETERS)
            if unknown:
                raise InvalidInput("parameter \"%s\" is not a parameter of this model; its parameters are %s"
                                   % (unknown[0], ", ".join('"%s"' % p for p in _PARAMETERS)))
            if interaction_type is not None and interaction_type not in _INTERACTIONS:
                raise InvalidInput("parameter \"interaction_type\" is %r; expected a string, one of %s"
                                   % (interaction_type, ", ".join('"%s"' % t for t in _INTERACTIONS)))
            if seed is not None:
                if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 63:
                    raise InvalidInput("parameter \"seed\" is %r; expected an int64 >= 0" % (seed,))
            return interaction_type, seed

        def _inputs(self, request):
            declared = {slot.name: slot for slot in self.policy.inputs}
            arrays, batch, first = {}, None, None
            for given in request.inputs:
                slot = declared.get(given.name)
                if slot is None:
                    raise InvalidInput("input \"%s\" is not an input of the policy; its inputs are %s" % (
                        given.name, ", ".join("\"%s\" (%s)" % (s.name, s.describe()) for s in self.policy.inputs)))
                if given.name in arrays:
                    raise InvalidInput("input \"%s\" is given twice" % given.name)
                if given.datatype != slot.datatype:
                    raise InvalidInput("input \"%s\": datatype %s, expected %s" % (given.name, given.datatype,
                                                                                  slot.describe()))
                shape = list(given.shape)
                if len(shape) != 1 + len(slot.shape) or tuple(shape[1:]) != slot.shape:
                    raise InvalidInput("input \"%s\": shape %s, expected %s (a batch dim, then the policy's "
                                       "per-environment shape)" % (given.name, shape, slot.describe()))
                if batch is None:
                    batch, first = shape[0], given.name
                elif shape[0] != batch:
                    raise InvalidInput("input \"%s\": batch %d, but input \"%s\" has batch %d" % (
                        given.name, shape[0], first, batch))
                if not 1 <= batch <= self.policy.max_batch_size:
                    raise InvalidInput("input \"%s\": batch %d, expected 1 to %d (the server's --max-batch-size)"
                                       % (given.name, batch, self.policy.max_batch_size))
                try:
                    array = given.as_numpy()
                except Exception as error:  # noqa: BLE001 (numpy's reshape errors vary)
                    raise InvalidInput("input \"%s\": its data does not fill shape %s of %s (%s)" % (
                        given.name, shape, slot.datatype, error)) from None
                arrays[given.name] = np.ascontiguousarray(array, dtype=slot.numpy)
            if batch is None:
                raise InvalidInput("the request has no inputs; the policy's inputs are %s" % ", ".join(
                    "\"%s\" (%s)" % (s.name, s.describe()) for s in self.policy.inputs))
            return batch, arrays

        def _outputs(self, request):
            if not request.request_outputs:
                return list(self.policy.outputs)
            declared = {slot.name: slot for slot in self.policy.outputs}
            wanted = []
            for output in request.request_outputs:
                if output.name not in declared:
                    raise InvalidInput("output \"%s\" is not an output of the policy; its outputs are %s" % (
                        output.name, ", ".join("\"%s\"" % s.name for s in self.policy.outputs)))
                wanted.append(declared[output.name])
            return wanted

        async def predict(self, payload, headers=None):
            if not isinstance(payload, InferRequest):
                raise InvalidInput("expected an Open Inference Protocol v2 request (inputs with name, shape, "
                                   "datatype, data)")
            interaction_type, seed = self._parameters(payload)
            batch, arrays = self._inputs(payload)
            wanted = self._outputs(payload)
            loop = asyncio.get_running_loop()
            try:
                results = await loop.run_in_executor(
                    self._pool, self.policy.act, batch, arrays, wanted, interaction_type, seed)
            except SdkError as error:
                if error.invalid_argument:
                    raise InvalidInput(str(error)) from None
                raise InferenceError(str(error), status=error.status) from None
            outputs = []
            for slot in wanted:
                array = results[slot.name]
                if payload.from_grpc:
                    # raw_output_contents: what tritonclient's gRPC as_numpy reads (KServe's to_grpc
                    # cannot take a numpy array when the inputs came raw).
                    output = InferOutput(name=slot.name, shape=list(array.shape), datatype=slot.datatype)
                    output.set_data_from_numpy(array, binary_data=True)
                else:
                    output = InferOutput(name=slot.name, shape=list(array.shape), datatype=slot.datatype, data=array)
                outputs.append(output)
            # OIP echoes the request's id; REST responses need one even when the request had none.
            return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name, infer_outputs=outputs,
                                 use_binary_outputs=payload.use_binary_outputs,
                                 requested_outputs=payload.request_outputs)

        def stop(self):
            stats = self.policy.stats()
            self.policy.close()
            self._pool.shutdown(wait=False)
            print("tdpolicy.serving: stopped model %s; batching stats: %s" % (
                self.name, " ".join("%s=%d" % item for item in stats.items())), flush=True)

    return PolicyModel


def _wait_ready(ports, model_name, spec, timeout=120.0):
    """Prints the ready line once every port accepts a connection on the loopback address."""
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    print("tdpolicy.serving: port %d did not open within %.0f s" % (port, timeout), file=sys.stderr,
                          flush=True)
                    return
                time.sleep(0.05)
    print("tdpolicy.serving: ready: model \"%s\" (%s) on http port %d and grpc port %d" % (
        model_name, spec, ports[0], ports[1]), flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tdpolicy.serving",
                                     description="Serve a tdpolicy policy spec over the Open Inference Protocol v2 "
                                                 "(KServe's model server, REST and gRPC).")
    parser.add_argument("--spec", required=True, help="the policy spec (.pbtxt, .pb or .json)")
    parser.add_argument("--model-name", required=True, help="the OIP model name clients call")
    parser.add_argument("--http-port", type=int, default=8080)
    parser.add_argument("--grpc-port", type=int, default=8081)
    parser.add_argument("--library", default=None, help="libtdpolicy.so (default: $TDP_LIBRARY or this repository's)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--backend", default="auto", choices=sorted(_BACKENDS))
    parser.add_argument("--seed", type=int, default=0, help="the seed of the actor's own random stream")
    parser.add_argument("--interaction-type", default="random", choices=list(_INTERACTIONS),
                        help="for requests without the interaction_type parameter")
    parser.add_argument("--max-batch-size", type=int, default=64, help="most rows merged into one policy call")
    parser.add_argument("--max-delay-us", type=int, default=10000,
                        help="longest a request waits for others to join its batch")
    parser.add_argument("--threads", type=int, default=64, help="requests in flight at once")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # KServe parses sys.argv when imported (its own flags): it must not see ours.
    sys.argv = sys.argv[:1]
    try:
        policy = BatchingPolicy(args.spec, library=args.library, device=args.device, backend=args.backend,
                                seed=args.seed, interaction_type=args.interaction_type,
                                max_batch_size=args.max_batch_size, max_delay_us=args.max_delay_us)
    except (SdkError, ValueError, FileNotFoundError, OSError) as error:
        print("tdpolicy.serving: cannot load %s: %s" % (args.spec, error), file=sys.stderr, flush=True)
        return 2
    import kserve

    model = _make_model_class()(args.model_name, policy, threads=args.threads)
    server = kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1)
    threading.Thread(target=_wait_ready, args=((args.http_port, args.grpc_port), args.model_name, args.spec),
                     daemon=True).start()
    server.start([model])
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
