"""The C API from Python through ctypes, against the shared library libtdpolicy.so.

Usage (tests/c/BUILD.bazel): python3 c_api_ctypes_test.py LIBTDPOLICY CARTPOLE_SPEC GRU_SPEC
"""

import ctypes
import os
import sys
import unittest

LIB, CARTPOLE, GRU = sys.argv[1:4]
del sys.argv[1:4]

TDP_OK, TDP_INVALID_ARGUMENT, TDP_NOT_FOUND = 0, 1, 2
TDP_FLOAT32, TDP_INT64 = 1, 5
TDP_INTERACTION_ACTOR, TDP_INTERACTION_RANDOM, TDP_INTERACTION_DETERMINISTIC = -1, 1, 5


class Input(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("data", ctypes.c_void_p),
                ("count", ctypes.c_size_t)]


class Output(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("data", ctypes.c_void_p),
                ("count", ctypes.c_size_t)]


lib = ctypes.CDLL(os.path.realpath(LIB))
lib.tdp_version.restype = ctypes.c_char_p
lib.tdp_last_error.restype = ctypes.c_char_p
lib.tdp_status_name.restype = ctypes.c_char_p
lib.tdp_status_name.argtypes = [ctypes.c_int]
lib.tdp_options_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
lib.tdp_options_free.argtypes = [ctypes.c_void_p]
lib.tdp_options_set_seed.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
lib.tdp_actor_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
lib.tdp_actor_free.argtypes = [ctypes.c_void_p]
lib.tdp_actor_name.argtypes = [ctypes.c_void_p]
lib.tdp_actor_name.restype = ctypes.c_char_p
lib.tdp_actor_num_inputs.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
lib.tdp_actor_num_outputs.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
for function in (lib.tdp_actor_input, lib.tdp_actor_output):
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                         ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
                         ctypes.POINTER(ctypes.c_size_t)]
lib.tdp_actor_act.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(Input), ctypes.c_size_t,
                              ctypes.POINTER(Output), ctypes.c_size_t, ctypes.c_int]
lib.tdp_actor_act_flat.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_float),
                                   ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float), ctypes.c_int]
lib.tdp_actor_reset.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_int64]


class Actor:
    """A tdp_actor* for one test; raises with tdp_last_error() on failure."""

    def __init__(self, path, seed=0):
        options = ctypes.c_void_p()
        assert lib.tdp_options_create(ctypes.byref(options)) == TDP_OK
        assert lib.tdp_options_set_seed(options, seed) == TDP_OK
        self.handle = ctypes.c_void_p()
        status = lib.tdp_actor_load(path.encode(), options, ctypes.byref(self.handle))
        lib.tdp_options_free(options)
        if status != TDP_OK:
            raise RuntimeError(lib.tdp_last_error().decode())

    def __del__(self):
        lib.tdp_actor_free(self.handle)

    def slots(self, count_fn, slot_fn):
        count = ctypes.c_size_t()
        assert count_fn(self.handle, ctypes.byref(count)) == TDP_OK
        result = []
        for i in range(count.value):
            name, dtype = ctypes.c_char_p(), ctypes.c_int()
            dims, ndim = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_size_t()
            assert slot_fn(self.handle, i, ctypes.byref(name), ctypes.byref(dtype), ctypes.byref(dims),
                           ctypes.byref(ndim)) == TDP_OK
            result.append((name.value.decode(), dtype.value, [dims[d] for d in range(ndim.value)]))
        return result

    def act(self, observation, batch, type_=TDP_INTERACTION_ACTOR):
        obs = (ctypes.c_float * len(observation))(*observation)
        action = (ctypes.c_int64 * batch)()
        log_prob = (ctypes.c_float * batch)()
        inputs = (Input * 1)(Input(b"observation", TDP_FLOAT32, ctypes.cast(obs, ctypes.c_void_p), len(observation)))
        outputs = (Output * 2)(Output(b"action", TDP_INT64, ctypes.cast(action, ctypes.c_void_p), batch),
                               Output(b"action_log_prob", TDP_FLOAT32, ctypes.cast(log_prob, ctypes.c_void_p), batch))
        status = lib.tdp_actor_act(self.handle, batch, inputs, 1, outputs, 2, type_)
        if status != TDP_OK:
            raise RuntimeError(lib.tdp_last_error().decode())
        return list(action), list(log_prob)


OBS = [0.01, -0.02, 0.03, 0.0, 0.2, 0.1, -0.15, 0.05, -0.3, 0.0, 0.1, -0.2]  # 3 environments


class CApiCtypesTest(unittest.TestCase):
    def test_version(self):
        self.assertEqual(lib.tdp_version(), b"0.1.0")
        self.assertEqual(lib.tdp_status_name(TDP_NOT_FOUND), b"TDP_NOT_FOUND")

    def test_describes_the_policy(self):
        actor = Actor(GRU)
        self.assertEqual(lib.tdp_actor_name(actor.handle), b"recurrent_gru")
        self.assertEqual(actor.slots(lib.tdp_actor_num_inputs, lib.tdp_actor_input),
                         [("observation", TDP_FLOAT32, [4]), ("hidden", TDP_FLOAT32, [32])])
        self.assertEqual(actor.slots(lib.tdp_actor_num_outputs, lib.tdp_actor_output),
                         [("action", TDP_INT64, []), ("action_log_prob", TDP_FLOAT32, []),
                          ("hidden", TDP_FLOAT32, [32])])

    def test_acts_reproducibly_and_as_the_flat_api(self):
        first, second, other = Actor(CARTPOLE, seed=3), Actor(CARTPOLE, seed=3), Actor(CARTPOLE, seed=4)
        draws = [first.act(OBS, 3, TDP_INTERACTION_RANDOM) for _ in range(20)]
        self.assertEqual(draws, [second.act(OBS, 3, TDP_INTERACTION_RANDOM) for _ in range(20)])
        self.assertNotEqual(draws, [other.act(OBS, 3, TDP_INTERACTION_RANDOM) for _ in range(20)])
        for action, log_prob in draws:
            self.assertTrue(all(a in (0, 1) for a in action), action)
            self.assertTrue(all(-20 < lp <= 0 for lp in log_prob), log_prob)

        action, log_prob = first.act(OBS, 3, TDP_INTERACTION_DETERMINISTIC)
        obs = (ctypes.c_float * 12)(*OBS)
        flat_action, flat_lp = (ctypes.c_float * 3)(), (ctypes.c_float * 3)()
        self.assertEqual(lib.tdp_actor_act_flat(first.handle, 3, obs, flat_action, flat_lp,
                                                TDP_INTERACTION_DETERMINISTIC), TDP_OK, lib.tdp_last_error())
        self.assertEqual([int(a) for a in flat_action], action)
        for a, b in zip(flat_lp, log_prob):
            self.assertAlmostEqual(a, b, places=5)

    def test_errors(self):
        with self.assertRaisesRegex(RuntimeError, r"tdp_actor_load: .*/missing\.pbtxt.*no such file"):
            Actor(os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "missing.pbtxt"))
        actor = Actor(CARTPOLE)
        with self.assertRaisesRegex(RuntimeError, r"inputs\[0\] \"observation\": 11 elements, expected 12 "
                                                  r"\(batch 3 x float32 \[4\] per environment\)"):
            actor.act(OBS[:11], 3)
        self.assertEqual(lib.tdp_actor_act(None, 1, None, 0, None, 0, TDP_INTERACTION_ACTOR), TDP_INVALID_ARGUMENT)
        self.assertEqual(lib.tdp_last_error(), b"tdp_actor_act: actor is NULL")
        mask = (ctypes.c_uint8 * 3)(1, 0, 1)
        self.assertEqual(lib.tdp_actor_reset(actor.handle, mask, 3), TDP_OK)  # no state: a no-op
        self.assertEqual(lib.tdp_last_error(), b"")


if __name__ == "__main__":
    unittest.main(verbosity=2)
