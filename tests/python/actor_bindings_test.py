"""tdpolicy.Actor, the C++ Actor called from Python through the compiled extension tdpolicy._C.

- every ready PyTorch policy (policies/pytorch/*.pbtxt, exported from real tensordict / TorchRL
  actors) acted on from Python gives what Python computed (their *.reference.pbtxt) to 1e-6, in
  both composite_lp_aggregate modes, on the fused plan and on LibTorch;
- TensorDicts, dicts, key=tensor and one plain tensor all go in, tensors cross without copies;
- act_tensor (plain tensors by position -> a tuple in out_keys order) gives what act() gives on
  every ready spec, with the same random stream, and names the argument it refuses;
- refresh_from(module) makes the C++ actor compute what the live module computes after its
  weights change, without writing a file;
- bad arguments raise Python exceptions that name them.

Run by tests/python/exporter_test.sh with the package (tdpolicy/_C.so included) on PYTHONPATH.
"""

import importlib.util
import os
import tempfile
import threading
import unittest

import torch
from tensordict import TensorDict
from tensordict.nn import InteractionType, set_composite_lp_aggregate, set_interaction_type

import tdpolicy
from tdpolicy import spec_pb2
from tdpolicy._tensors import from_tensor_proto, parse_key
from google.protobuf import text_format

POLICIES = os.path.join(os.getcwd(), "policies")
READY = ["gaussian_actor", "tanh_gaussian_actor", "categorical_actor", "composite_actor", "gru_actor",
         "torchscript_actor"]


def reference(name):
    """{section: TensorDict} from NAME.reference.pbtxt: inputs, actions, <mode>/outputs, <mode>/log_prob."""
    message = spec_pb2.Parameters()
    with open(os.path.join(POLICIES, "pytorch", name + ".reference.pbtxt")) as f:
        text_format.Parse(f.read(), message)
    sections = {}
    for named in message.tensors:
        parts = named.name.split("/")
        cut = 1 if parts[0] in ("inputs", "actions") else 2
        section, key = "/".join(parts[:cut]), parse_key("/".join(parts[cut:]))
        sections.setdefault(section, {})[key] = from_tensor_proto(named.tensor)
    batch = next(iter(sections["inputs"].values())).shape[:1]
    return {s: TensorDict(entries, batch_size=batch)
            for s, entries in sections.items()}


def errors_in_threads(work, threads=4):
    """Runs work() on `threads` threads at once; the exceptions they raised."""
    errors = []

    def guarded():
        try:
            work()
        except Exception as error:  # reported by the caller
            errors.append(error)

    running = [threading.Thread(target=guarded) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return errors


def regenerate_module():
    spec = importlib.util.spec_from_file_location("regenerate", os.path.join(POLICIES, "pytorch", "regenerate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ReadyPoliciesTest(unittest.TestCase):
    def test_deterministic_outputs_match_python(self):
        for name in READY:
            ref = reference(name)
            for mode, aggregate in (("lp_aggregate_false", False), ("lp_aggregate_true", True)):
                expected = ref[mode + "/outputs"]
                for backend in ("auto", "libtorch"):
                    with self.subTest(policy=name, mode=mode, backend=backend):
                        actor = tdpolicy.Actor.load(os.path.join(POLICIES, "pytorch", name + ".pbtxt"),
                                                    backend=backend, composite_lp_aggregate=aggregate, run_self_tests=not aggregate,
                                                    interaction="deterministic", return_all_entries=True, seed=0)
                        got = actor.act(ref["inputs"].clone())
                        self.assertIsInstance(got, TensorDict)
                        compared = 0
                        for key, value in got.items(include_nested=True, leaves_only=True):
                            if key in expected.keys(include_nested=True, leaves_only=True):
                                torch.testing.assert_close(value, expected.get(key).to(value.dtype),
                                                           atol=1e-6, rtol=1e-6, msg=lambda m: "%s: %s" % (key, m))
                                compared += 1
                        for key in actor.out_keys:
                            self.assertIn(key, got.keys(include_nested=True), key)
                        self.assertGreater(compared, 1)

    def test_ready_specs_at_the_root_load_and_act(self):
        for name in sorted(os.listdir(POLICIES)):
            if not name.endswith(".pbtxt"):
                continue
            with self.subTest(spec=name):
                actor = tdpolicy.Actor.load(os.path.join(POLICIES, name), seed=0)
                td = TensorDict({}, batch_size=[3])
                for entry in actor.in_specs:
                    td.set(entry["key"], torch.zeros((3,) + tuple(entry["shape"]), dtype=entry["dtype"]))
                out = actor.act(td)
                self.assertEqual(out.batch_size, torch.Size([3]))
                for key in actor.out_keys:
                    self.assertIn(key, out.keys(include_nested=True))


class InputFormsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.actor = tdpolicy.Actor.load(os.path.join(POLICIES, "cartpole_categorical.pbtxt"), seed=0,
                                        interaction="deterministic")

    def test_every_form_gives_the_same_outputs(self):
        obs = torch.randn(5, 4)
        as_td = self.actor.act(TensorDict(observation=obs, extra=torch.zeros(5), batch_size=[5]))
        self.assertEqual(as_td.batch_size, torch.Size([5]))
        self.assertEqual(set(as_td.keys()), set(self.actor.out_keys))
        for out in (self.actor.act(observation=obs), self.actor.act({"observation": obs}), self.actor.act(obs)):
            self.assertIsInstance(out, dict)
            self.assertEqual(set(out), set(self.actor.out_keys))
            for key in out:
                torch.testing.assert_close(out[key], as_td[key])

    def test_inputs_are_not_copied_nor_modified(self):
        obs = torch.randn(2, 4)
        before = obs.clone()
        ptr = obs.data_ptr()
        actor = tdpolicy.Actor.load(os.path.join(POLICIES, "cartpole_categorical.pbtxt"), backend="libtorch",
                                    return_all_entries=True, seed=0)
        out = actor.act(observation=obs)
        self.assertEqual(out["observation"].data_ptr(), ptr)
        torch.testing.assert_close(obs, before)

    def test_random_actions_are_seeded(self):
        path = os.path.join(POLICIES, "cartpole_categorical.pbtxt")
        obs = torch.zeros(64, 4)
        a = tdpolicy.Actor.load(path, seed=3).act(obs)["action"]
        b = tdpolicy.Actor.load(path, seed=3).act(obs)["action"]
        self.assertTrue(torch.equal(a, b))

    def test_act_releases_the_gil(self):
        # Many Python threads acting at once on one actor (act is thread-safe in C++).
        def work():
            for _ in range(200):
                self.actor.act(observation=torch.zeros(8, 4))

        self.assertEqual(errors_in_threads(work), [])


def positional_inputs(actor, batch, generator):
    """act_tensor's inputs: one tensor per declared input that is neither state nor optional."""
    tensors = []
    for entry in actor.in_specs:
        if entry["state"] or entry["optional"]:
            continue
        shape = (batch,) + tuple(entry["shape"])
        if entry["dtype"].is_floating_point:
            tensors.append(torch.randn(shape, generator=generator).to(entry["dtype"]))
        else:
            tensors.append(torch.zeros(shape, dtype=entry["dtype"]))
    keys = [e["key"] for e in actor.in_specs if not (e["state"] or e["optional"])]
    return keys, tensors


class ActTensorTest(unittest.TestCase):
    def test_equal_to_act_on_every_spec(self):
        specs = [os.path.join(POLICIES, n) for n in sorted(os.listdir(POLICIES)) if n.endswith(".pbtxt")]
        specs += [os.path.join(POLICIES, "pytorch", n + ".pbtxt") for n in READY]
        for path in specs:
            for backend in ("auto", "libtorch"):
                for batch in (1, 3, 40):
                    with self.subTest(spec=os.path.basename(path), backend=backend, batch=batch):
                        # Two actors with one seed: their random streams must stay in step.
                        a = tdpolicy.Actor.load(path, backend=backend, seed=5)
                        b = tdpolicy.Actor.load(path, backend=backend, seed=5)
                        keys, tensors = positional_inputs(a, batch, torch.Generator().manual_seed(batch))
                        for _ in range(2):  # a recurrent policy's kept state moves on in both
                            want = a.act(dict(zip(keys, tensors)))
                            got = b.act_tensor(*tensors)
                            self.assertIsInstance(got, tuple)
                            self.assertEqual(len(got), len(a.out_keys))
                            for key, value in zip(a.out_keys, got):
                                self.assertEqual(value.dtype, want[key].dtype, key)
                                torch.testing.assert_close(value, want[key], atol=0, rtol=0,
                                                           msg=lambda m: "%s: %s" % (key, m))

    def test_interaction_and_gil_release_give_the_same_outputs(self):
        path = os.path.join(POLICIES, "cartpole_categorical.pbtxt")
        actor = tdpolicy.Actor.load(path, seed=0)
        obs = torch.randn(5, 4)
        want = actor.act(obs, interaction="deterministic")
        for rows in (0, 1000):  # released or kept, the same call
            actor._gil_release_rows = rows
            got = actor.act_tensor(obs, interaction="deterministic")
            for key, value in zip(actor.out_keys, got):
                torch.testing.assert_close(value, want[key], atol=0, rtol=0)
        got = actor.act_tensor(obs, interaction=InteractionType.DETERMINISTIC)
        torch.testing.assert_close(got[0], want[actor.out_keys[0]], atol=0, rtol=0)

    def test_out_buffers_are_written_and_returned(self):
        path = os.path.join(POLICIES, "pendulum_tanh_gaussian.pbtxt")
        a = tdpolicy.Actor.load(path, seed=2)
        b = tdpolicy.Actor.load(path, seed=2)
        obs = torch.randn(3, 3)
        buffers = tuple(torch.full_like(t, 7.0) for t in a.act_tensor(obs))
        b.act_tensor(obs)  # b one call along too: the random streams in step
        self.assertEqual(len(buffers), len(a.out_keys))
        versions = [t._version for t in buffers]
        for _ in range(3):
            want = b.act_tensor(obs)
            got = a.act_tensor(obs, out=buffers)
            self.assertIs(got, buffers)
            for w, g in zip(want, got):
                torch.testing.assert_close(g, w, atol=0, rtol=0)
        self.assertTrue(all(t._version > v for t, v in zip(buffers, versions)))
        # Tensors an earlier call returned (inference tensors), and non-contiguous ones, also serve.
        returned = a.act_tensor(obs)
        b.act_tensor(obs)
        wide = tuple(torch.zeros(t.shape + (2,), dtype=t.dtype)[..., 0] for t in returned)
        for out in (returned, wide):
            want = b.act_tensor(obs)
            got = a.act_tensor(obs, out=out)
            self.assertIs(got, out)
            for w, g in zip(want, got):
                torch.testing.assert_close(g, w, atol=0, rtol=0)

    def test_out_buffers_of_a_recurrent_policy_stay_the_callers(self):
        # The actor keeps its own copy of the next state: overwriting the buffers between calls
        # changes nothing it computes.
        path = os.path.join(POLICIES, "recurrent_gru.pbtxt")
        a = tdpolicy.Actor.load(path, seed=3, interaction="deterministic")
        b = tdpolicy.Actor.load(path, seed=3, interaction="deterministic")
        obs = torch.randn(2, 4)
        buffers = tuple(torch.zeros_like(t) for t in b.act_tensor(obs))
        a.act_tensor(obs)
        pointers = [t.data_ptr() for t in buffers]
        for _ in range(3):
            want = b.act_tensor(obs)
            got = a.act_tensor(obs, out=buffers)
            self.assertIs(got, buffers)
            self.assertEqual([t.data_ptr() for t in got], pointers)
            for w, g in zip(want, got):
                torch.testing.assert_close(g, w, atol=0, rtol=0)
            for t in buffers:
                t.fill_(123)

    def test_bad_out_buffers_are_refused_before_writing(self):
        actor = tdpolicy.Actor.load(os.path.join(POLICIES, "cartpole_categorical.pbtxt"), seed=0)
        obs = torch.zeros(2, 4)
        action, log_prob = actor.act_tensor(obs)
        good_action = torch.full_like(action, 9)
        for bad, words in (((good_action, torch.zeros(3)), ["out[1]", "[3]", "[2]"]),
                           ((good_action, torch.zeros(2, dtype=torch.float64)), ["out[1]", "Double", "Float"]),
                           ((torch.zeros(2), log_prob.clone()), ["out[0]", "Long", "Float"])):
            with self.subTest(words=words):
                before = [t.clone() for t in bad]
                with self.assertRaises(ValueError) as caught:
                    actor.act_tensor(obs, out=bad)
                for word in words:
                    self.assertIn(word, str(caught.exception))
                for t, b in zip(bad, before):
                    self.assertTrue(torch.equal(t, b), "nothing written")
        name = actor.out_keys[1]
        self.check(TypeError, ["out=", "tuple of 2"], actor.act_tensor, obs, out=(good_action,))
        self.check(TypeError, ["out=", "tuple of 2"], actor.act_tensor, obs, out=[good_action, log_prob.clone()])
        self.check(TypeError, ["out[1]", name, "list"], actor.act_tensor, obs, out=(good_action, [0.0, 0.0]))
        self.check(ValueError, ["out[1]", "requires grad"], actor.act_tensor, obs,
                   out=(good_action, torch.zeros(2, requires_grad=True)))

    def test_threads_share_an_actor(self):
        actor = tdpolicy.Actor.load(os.path.join(POLICIES, "cartpole_categorical.pbtxt"), seed=0,
                                    interaction="deterministic")
        obs = torch.randn(32, 4)
        want = actor.act_tensor(obs)

        def work():
            for _ in range(100):
                for w, g in zip(want, actor.act_tensor(obs)):
                    torch.testing.assert_close(g, w, atol=0, rtol=0)
                actor.act_tensor(obs[:1])

        self.assertEqual(errors_in_threads(work), [])

    def check(self, error, words, fn, *args, **kwargs):
        with self.assertRaises(error) as caught:
            fn(*args, **kwargs)
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_bad_arguments_are_named(self):
        actor = tdpolicy.Actor.load(os.path.join(POLICIES, "cartpole_categorical.pbtxt"), seed=0)
        act = actor.act_tensor
        self.check(TypeError, ["observation", "list"], act, [[1.0, 2.0, 3.0, 4.0]])
        self.check(TypeError, ["got 0", "observation"], act)
        self.check(TypeError, ["got 2", "observation"], act, torch.zeros(1, 4), torch.zeros(1, 4))
        self.check(TypeError, ["batch"], act, torch.zeros(1, 4), batch=1)
        self.check(ValueError, ["observation", "[4]"], act, torch.zeros(2, 5))
        self.check(ValueError, ["observation", "dims"], act, torch.tensor(1.0))
        self.check(ValueError, ["observation", "nan", "row 1"], act, torch.tensor([[0.0] * 4, [0.0, float("nan"), 0.0, 0.0]]))
        self.check(ValueError, ["interaction", "sideways"], act, torch.zeros(1, 4), interaction="sideways")
        self.check(TypeError, ["interaction"], act, torch.zeros(1, 4), interaction=3)
        with self.assertRaises(TypeError):
            tdpolicy.Actor.act_tensor(object(), torch.zeros(1, 4))
        # The errors are the ones act() raises for the same input.
        for bad in (torch.zeros(2, 5), torch.zeros(2, 4, dtype=torch.float64)):
            with self.assertRaises(Exception) as a:
                actor.act(bad)
            with self.assertRaises(Exception) as b:
                act(bad)
            self.assertIs(type(a.exception), type(b.exception))
            self.assertEqual(str(a.exception).replace("Actor.act:", ""), str(b.exception).replace("Actor.act:", ""))


class RefreshFromTest(unittest.TestCase):
    def test_weights_of_a_live_module(self):
        regenerate = regenerate_module()
        for name in ("gaussian_actor", "categorical_actor", "composite_actor", "gru_actor"):
            with self.subTest(policy=name):
                module, inputs, _, _ = regenerate.build(regenerate.ACTORS[name], 7, False)
                actor = tdpolicy.Actor.load(os.path.join(POLICIES, "pytorch", name + ".pbtxt"), seed=0,
                                            interaction="deterministic", composite_lp_aggregate=False)
                with torch.no_grad():
                    for p in module.parameters():
                        p.add_(0.1 * torch.randn_like(p))
                actor.refresh_from(module)
                got = actor.act(inputs.clone())
                with torch.no_grad(), set_composite_lp_aggregate(False), \
                        set_interaction_type(InteractionType.DETERMINISTIC):
                    want = module(inputs.clone())
                for key in actor.out_keys:
                    if key in want.keys(include_nested=True):
                        torch.testing.assert_close(got.get(key), want.get(key).to(got.get(key).dtype),
                                                   atol=1e-6, rtol=1e-6, msg=lambda m: "%s: %s" % (key, m))

    def test_load_a_module_then_refresh(self):
        from torchrl.modules import MLP, ProbabilisticActor
        from tensordict.nn import TensorDictModule

        torch.manual_seed(0)
        net = TensorDictModule(MLP(in_features=4, out_features=2, num_cells=[16]), ["observation"], ["logits"])
        policy = ProbabilisticActor(net, in_keys=["logits"], distribution_class=torch.distributions.Categorical,
                                    return_log_prob=True)
        example = TensorDict(observation=torch.randn(3, 4), batch_size=[3])
        actor = tdpolicy.Actor.load(policy, example=example, interaction="deterministic", seed=0)
        obs = TensorDict(observation=torch.randn(9, 4), batch_size=[9])
        for step in range(2):
            with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
                want = policy(obs.clone())
            got = actor.act(obs)
            torch.testing.assert_close(got["logits"], want["logits"], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(got["action_log_prob"], want["action_log_prob"], atol=1e-6, rtol=1e-6)
            with torch.no_grad():
                for p in policy.parameters():
                    p.mul_(-1.5)
            actor.refresh_from(policy)

    def test_a_module_of_another_shape_is_refused(self):
        from torchrl.modules import MLP
        from tensordict.nn import TensorDictModule, ProbabilisticTensorDictSequential, ProbabilisticTensorDictModule

        actor = tdpolicy.Actor.load(os.path.join(POLICIES, "pytorch", "categorical_actor.pbtxt"), seed=0)
        other = ProbabilisticTensorDictSequential(
            TensorDictModule(MLP(in_features=5, out_features=3, num_cells=[8]), ["observation"], ["logits"]),
            ProbabilisticTensorDictModule(["logits"], ["action"], distribution_class=torch.distributions.Categorical))
        with self.assertRaises((KeyError, ValueError, Exception)) as caught:
            actor.refresh_from(other)
        self.assertTrue("parameter" in str(caught.exception) or "shape" in str(caught.exception), str(caught.exception))


class ErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = os.path.join(POLICIES, "cartpole_categorical.pbtxt")
        cls.actor = tdpolicy.Actor.load(cls.path, seed=0)

    def check(self, error, words, fn, *args, **kwargs):
        with self.assertRaises(error) as caught:
            fn(*args, **kwargs)
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_bad_arguments_are_named(self):
        self.check(ValueError, ["backend", "nope"], tdpolicy.Actor.load, self.path, backend="nope")
        self.check(ValueError, ["interaction", "sideways"], tdpolicy.Actor.load, self.path, interaction="sideways")
        self.check(ValueError, ["device"], tdpolicy.Actor.load, self.path, device="warp:0")
        self.check(ValueError, ["seed"], tdpolicy.Actor.load, self.path, seed=-1)
        self.check(ValueError, ["cuda_graph", "device"], tdpolicy.Actor.load, self.path, backend="cuda_graph")
        self.check(FileNotFoundError, ["missing.pbtxt"], tdpolicy.Actor.load, "missing.pbtxt")
        self.check(ValueError, ["interaction", "sideways"], self.actor.act, torch.zeros(1, 4), interaction="sideways")

    def test_bad_inputs_are_named(self):
        self.check(ValueError, ["observation", "[4]"], self.actor.act, observation=torch.zeros(2, 5))
        self.check(ValueError, ["observation"], self.actor.act, TensorDict(obs=torch.zeros(2, 4), batch_size=[2]))
        self.check(TypeError, ["observation"], self.actor.act, observation=[1.0, 2.0])
        self.check(TypeError, ["td"], self.actor.act, "observation")
        self.check(TypeError, ["no inputs"], self.actor.act)


if __name__ == "__main__":
    unittest.main()
