"""TorchRL's recurrent modules (LSTMModule, GRUModule) exported unchanged by tdpolicy.export: the
actors of TorchRL's recurrent DQN tutorial and of a GRU PPO actor, exported in text, binary and
JSON form and compared with the C++ `tdp` by tdpolicy.check to 1e-6, step after step with the keys
moved by TorchRL's step_mdp (the next state at ("next", K) becomes K, is_init resets rows); and
the refusals for what a spec cannot express.

Run by tests/python/exporter_test.sh with the package built into PYTHONPATH and TDP_BIN set.
"""

import unittest
import warnings

import torch

from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torchrl.envs.utils import step_mdp
from torchrl.modules import MLP, GRUModule, LSTMModule, ProbabilisticActor, TanhNormal, set_recurrent_mode

import tdpolicy

from export_case import ExportTestCase  # beside this file, on sys.path by junit_runner.py

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
torch.set_num_threads(1)

BATCH = 5
OBS = 4


def lstm_dqn_actor(num_layers=1, python_based=False, out_key="intermediate", bias=True):
    """The recurrent DQN tutorial's actor up to its Q-values: a feature network writing "embed",
    an LSTMModule with TorchRL's default state keys, an MLP writing "action_value"."""
    feature = TensorDictModule(MLP(in_features=OBS, out_features=12, num_cells=[16]), in_keys=["observation"],
                               out_keys=["embed"])
    lstm = LSTMModule(input_size=12, hidden_size=8, num_layers=num_layers, python_based=python_based, bias=bias,
                      in_key="embed", out_key=out_key)
    head = MLP(out_features=2, num_cells=[16])
    mlp = TensorDictModule(head, in_keys=[out_key], out_keys=["action_value"])
    return TensorDictSequential(feature, lstm, mlp), lstm


def gru_ppo_actor(num_layers=2):
    """A GRU PPO actor: features -> GRUModule -> MLP -> NormalParamExtractor -> TanhNormal."""
    gru = GRUModule(input_size=8, hidden_size=6, num_layers=num_layers, in_key="embed", out_key="features")
    backbone = TensorDictSequential(
        TensorDictModule(MLP(in_features=OBS, out_features=8, num_cells=[16]), in_keys=["observation"],
                         out_keys=["embed"]),
        gru,
        TensorDictModule(MLP(in_features=6, out_features=4, num_cells=[16]), in_keys=["features"],
                         out_keys=["params"]),
        TensorDictModule(NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]))
    actor = ProbabilisticActor(backbone, in_keys=["loc", "scale"], out_keys=["action"], distribution_class=TanhNormal,
                               return_log_prob=True)
    return actor, gru


def first_step(states, batch=BATCH):
    """What env.reset() gives with InitTracker and the module's primer: is_init true, zero states."""
    td = TensorDict({"observation": torch.randn(batch, OBS), "is_init": torch.ones(batch, 1, dtype=torch.bool)},
                    [batch])
    for key, shape in states.items():
        td.set(key, torch.zeros(batch, *shape))
    return td


class TorchRLRecurrentTest(ExportTestCase):
    def check_steps(self, path, actor, td, steps=4, actions=None):
        """Steps `actor` (Python) like a rollout: each step's policy output goes through step_mdp
        with a new observation and is_init (some rows start over), so the next step reads the
        state the previous one wrote at ("next", K); every step is checked against the C++ side
        on the same inputs. Returns the last step's report."""
        report = None
        for step in range(steps):
            check_td = td.clone()
            if actions is not None:
                check_td.update(actions())
            # The spec's self tests once; the log-probs of each step's actions every step.
            report = tdpolicy.check(path, actor, check_td, self_tests=step == 0 or actions is not None)
            self.assertTrue(report.ok, str(report))
            with torch.no_grad():
                out = actor(td.clone())
            out.set(("next", "observation"), torch.randn(td.shape[0], OBS))
            out.set(("next", "is_init"), torch.rand(td.shape[0], 1) < 0.3)
            td = step_mdp(out, keep_other=False, exclude_action=True, exclude_reward=True, exclude_done=True)
            for key in ("recurrent_state_h", "recurrent_state_c", "recurrent_state"):
                if ("next", key) in out.keys(True):
                    self.assertTrue(torch.equal(td.get(key), out.get(("next", key))), key)
        return report

    # ---- what exports ----

    def test_recurrent_dqn_tutorial_lstm_in_every_format(self):
        actor, lstm = lstm_dqn_actor()
        td = first_step({"recurrent_state_h": (1, 8), "recurrent_state_c": (1, 8)})
        spec, report = self.export_and_check(actor, td, "dqn_lstm", formats=(".pbtxt", ".pb", ".json"))
        recurrent = spec.module.sequential.modules[1].lstm
        self.assertEqual((recurrent.input_size, recurrent.hidden_size, recurrent.num_layers, recurrent.no_bias),
                         (12, 8, 1, False))
        self.assertEqual(list(recurrent.in_keys), ["embed", "recurrent_state_h", "recurrent_state_c", "is_init"])
        self.assertEqual(list(recurrent.out_keys),
                         ["intermediate", "next/recurrent_state_h", "next/recurrent_state_c"])
        self.assertEqual([(i.key, list(i.shape)) for i in spec.inputs],
                         [("observation", [OBS]), ("recurrent_state_h", [1, 8]), ("recurrent_state_c", [1, 8]),
                          ("is_init", [1])])
        self.assertIn("next/recurrent_state_h", list(spec.output_keys))
        entries = self.entries(report)
        self.assertTrue({"action_value", "next/recurrent_state_h", "next/recurrent_state_c"} <= entries, entries)
        self.check_steps(self.path("dqn_lstm.pbtxt"), actor, td)
        # The fused CPU plan lowers the LSTM: equal to Python to 1e-5.
        td.set("recurrent_state_h", torch.randn(BATCH, 1, 8))
        td.set("recurrent_state_c", torch.randn(BATCH, 1, 8))
        td.set("is_init", torch.tensor([[True], [False], [False], [True], [False]]))
        report = tdpolicy.check(self.path("dqn_lstm.pbtxt"), actor, td, backend="fused", atol=1e-5, rtol=1e-5,
                                self_tests=False)
        self.assertTrue(report.ok, str(report))

    def test_lstm_of_several_layers_python_based_without_bias_writing_its_input_key(self):
        # The tutorial's own keys: in_key="embed", out_key="embed" (the output overwrites the input).
        actor, lstm = lstm_dqn_actor(num_layers=3, python_based=True, out_key="embed", bias=False)
        td = first_step({"recurrent_state_h": (3, 8), "recurrent_state_c": (3, 8)})
        spec = tdpolicy.export(actor, self.path("lstm3.pbtxt"), example=td)
        module = spec.module.sequential.modules[1]
        self.assertEqual(list(module.overwrite_keys), ["embed"])
        self.assertEqual((module.lstm.num_layers, module.lstm.no_bias), (3, True))
        self.check_steps(self.path("lstm3.pbtxt"), actor, td)

    def test_gru_ppo_actor_with_log_probs(self):
        actor, gru = gru_ppo_actor()
        td = first_step({"recurrent_state": (2, 6)})
        spec = tdpolicy.export(actor, self.path("gru_ppo.json"), example=td)
        recurrent = spec.module.probabilistic_sequential.modules[0].sequential.modules[1].gru
        self.assertEqual((recurrent.input_size, recurrent.hidden_size, recurrent.num_layers), (8, 6, 2))
        self.assertEqual(list(recurrent.in_keys), ["embed", "recurrent_state", "is_init"])
        self.assertEqual(list(recurrent.out_keys), ["features", "next/recurrent_state"])
        actions = lambda: TensorDict({"action": torch.rand(BATCH, 2) * 1.8 - 0.9}, [BATCH])  # noqa: E731
        report = self.check_steps(self.path("gru_ppo.json"), actor, td, actions=actions)
        self.assertTrue(any("log-probs" in command and ok for command, ok, _ in report.steps), str(report))

    def test_state_and_is_init_missing_from_the_example_are_declared(self):
        # TorchRL starts a missing state at zeros; the export declares it anyway (zeros in the self
        # test) so that the C++ actor keeps it between calls.
        actor, gru = gru_ppo_actor(num_layers=1)
        td = TensorDict({"observation": torch.randn(BATCH, OBS)}, [BATCH])
        spec = tdpolicy.export(actor, self.path("gru_first.pbtxt"), example=td)
        self.assertEqual([(i.key, list(i.shape)) for i in spec.inputs],
                         [("observation", [OBS]), ("recurrent_state", [1, 6]), ("is_init", [1])])
        with_state = first_step({"recurrent_state": (1, 6)})
        with_state.set("recurrent_state", torch.randn(BATCH, 1, 6))
        with_state.set("is_init", torch.tensor([[True], [False], [False], [True], [False]]))
        report = tdpolicy.check(self.path("gru_first.pbtxt"), actor, with_state)
        self.assertTrue(report.ok, str(report))

    # ---- what is refused ----

    def test_recurrent_mode_is_refused(self):
        lstm = LSTMModule(input_size=OBS, hidden_size=8, in_key="observation", out_key="features",
                          default_recurrent_mode=True)
        actor = TensorDictSequential(lstm)
        td = TensorDict({"observation": torch.randn(BATCH, 3, OBS), "is_init": torch.zeros(BATCH, 3, 1, dtype=torch.bool)},
                        [BATCH, 3])
        self.assert_export_error(actor, td, "actor.module.0", "LSTMModule",
                                 "recurrent mode is on .*steps once per call")
        gru = GRUModule(input_size=OBS, hidden_size=8, in_key="observation", out_key="features")
        with set_recurrent_mode(True):
            self.assert_export_error(TensorDictSequential(gru), td, "actor.module.0", "GRUModule", "recurrent mode is on")

    def test_bidirectional_and_projection_are_refused(self):
        td = first_step({})
        lstm = LSTMModule(input_size=OBS, hidden_size=8, in_key="observation", out_key="features", proj_size=4)
        self.assert_export_error(TensorDictSequential(lstm), td, "actor.module.0.lstm", "LSTM", "proj_size=4")
        gru = GRUModule(input_size=OBS, hidden_size=8, in_key="observation", out_key="features", bidirectional=True)
        self.assert_export_error(TensorDictSequential(gru), td, "actor.module.0.gru", "GRU", "bidirectional=True")


if __name__ == "__main__":
    unittest.main()
