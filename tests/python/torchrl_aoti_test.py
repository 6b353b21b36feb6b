"""tdpolicy.export(..., fallback="aoti"): a network that no tdpolicy.Network kind expresses (a
user's own nn.Module) inside a TorchRL ProbabilisticActor, compiled by torch.export +
AOTInductor into a .pt2 package beside the spec, and checked through the C++ `tdp` against Python
to 1e-6 at several batch sizes, in text, JSON and binary; and the refusals around it.

Each package takes 10-70 s to compile, so the whole file compiles one.
Run by tests/python/exporter_test.sh with the package built into PYTHONPATH and TDP_BIN set.
"""

import hashlib
import os
import subprocess
import unittest
import warnings

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torchrl.modules import ProbabilisticActor, TanhNormal

import tdpolicy
from tdpolicy._export import serialize

from export_case import ExportTestCase  # beside this file, on sys.path by junit_runner.py


warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
torch.set_num_threads(1)


class GatedResidual(nn.Module):
    """What a user writes when no layer stack fits: a gate, a residual and a buffer."""

    def __init__(self, n_obs, hidden, n_out):
        super().__init__()
        self.encoder = nn.Linear(n_obs, hidden)
        self.head = nn.Linear(hidden, n_out)
        self.gate = nn.Parameter(torch.randn(hidden))
        self.register_buffer("shift", torch.linspace(-0.5, 0.5, n_out))

    def forward(self, observation):
        h = torch.tanh(self.encoder(observation)) * torch.sigmoid(self.gate)
        h = h + torch.cos(observation.sum(-1, keepdim=True))
        return self.head(h) + self.shift


def gaussian_actor(net):
    backbone = TensorDictSequential(
        TensorDictModule(net, in_keys=["observation"], out_keys=["params"]),
        TensorDictModule(NormalParamExtractor(), in_keys=["params"], out_keys=["loc", "scale"]))
    return ProbabilisticActor(backbone, in_keys=["loc", "scale"], out_keys=["action"],
                              distribution_class=TanhNormal, distribution_kwargs={"low": -2.0, "high": 2.0},
                              return_log_prob=True)


class AotiExportTest(ExportTestCase):
    def check(self, path, actor, td, backend="libtorch", self_tests=True):
        report = tdpolicy.check(path, actor, td, backend=backend, self_tests=self_tests)
        self.assertTrue(report.ok, str(report))
        self.assertIn("action_log_prob", self.entries(report))
        return report

    # The one compile: a custom network in a ProbabilisticActor, checked at batch 6 (the export's),
    # 1, 13 and [2, 3] (leading batch dims flattened into the package's one), in text, JSON and binary.
    def test_custom_network_in_a_probabilistic_actor(self):
        actor = gaussian_actor(GatedResidual(5, 16, 4))
        td = TensorDict({"observation": torch.randn(6, 5)}, [6])
        path = self.path("gated.pbtxt")
        spec = tdpolicy.export(actor, path, example=td, fallback="aoti")

        network = spec.module.probabilistic_sequential.modules[0].sequential.modules[0].network
        package = network.network.aoti_package
        self.assertEqual((package.file, package.device), ("gated.0.pt2", "cpu"))
        with open(self.path(package.file), "rb") as f:
            self.assertEqual(package.sha256, hashlib.sha256(f.read()).hexdigest())
        self.assertEqual(list(network.in_keys), ["observation"])
        self.assertEqual(list(network.out_keys), ["params"])
        # The network's weights live in the package, not in the spec's parameters.
        self.assertEqual(len(spec.parameters.tensors), 0)
        self.assertEqual(len(spec.self_tests), 1)

        for batch in ([6], [1], [13], [2, 3]):
            with self.subTest(batch=batch):
                check_td = TensorDict({"observation": torch.randn(*batch, 5),
                                       "action": torch.rand(*batch, 2) * 3.6 - 1.8}, batch)
                self.check(path, actor, check_td)
        # kAuto runs what the fused plan cannot lower on LibTorch.
        self.check(path, actor, td.clone().update({"action": torch.rand(6, 2) * 3.6 - 1.8}), backend="auto",
                   self_tests=False)
        described = subprocess.run([tdpolicy.find_tdp(), "describe", path], capture_output=True, text=True)
        self.assertEqual(described.returncode, 0, described.stderr)
        self.assertIn("an AOTInductor package runs on LibTorch", described.stdout + described.stderr)

        # The same spec in JSON and in binary, beside the same package.
        for name, fmt in (("gated.json", "json"), ("gated.pb", "binary")):
            other = self.path(name)
            with open(other, "wb") as f:
                f.write(serialize(spec, fmt))
            self.check(other, actor, td.clone().update({"action": torch.rand(6, 2) * 3.6 - 1.8}))

        # A package that is not the exported one is a load error naming the file and the field.
        with open(self.path(package.file), "ab") as f:
            f.write(b"\0")
        validated = subprocess.run([tdpolicy.find_tdp(), "validate", path], capture_output=True, text=True)
        self.assertNotEqual(validated.returncode, 0)
        self.assertIn("gated.0.pt2: the file's SHA-256 is", validated.stderr)
        self.assertIn("aoti_package.sha256", validated.stderr)

    # ---- refusals (none of them compiles) ----

    def test_without_the_fallback_the_error_says_what_would_export_it(self):
        actor = gaussian_actor(GatedResidual(5, 16, 4))
        td = TensorDict({"observation": torch.randn(6, 5)}, [6])
        with self.assertRaises(tdpolicy.ExportError) as raised:
            tdpolicy.export(actor, self.path("err.pbtxt"), example=td)
        message = str(raised.exception)
        self.assertIn("actor.module.0.module.0.module", message)
        self.assertIn("GatedResidual", message)
        self.assertIn("no tdpolicy.Network counterpart", message)
        self.assertIn('tdpolicy.export(..., fallback="aoti") would export this network', message)
        self.assertFalse(os.path.exists(self.path("err.pbtxt")))

    def test_a_network_whose_rows_depend_on_each_other_is_refused(self):
        class Centered(nn.Module):
            def forward(self, x):
                return (x - x.mean(0))[..., :4]

        # Centering over the first batch dim depends on which rows are in it: with batch dims
        # [2, 3], flattening them into one changes the result, and nothing is compiled.
        actor = gaussian_actor(Centered())
        td = TensorDict({"observation": torch.randn(2, 3, 5)}, [2, 3])
        with self.assertRaises(tdpolicy.ExportError) as raised:
            tdpolicy.export(actor, self.path("err.pbtxt"), example=td, fallback="aoti")
        message = str(raised.exception)
        self.assertIn("actor.module.0.module.0.module", message)
        self.assertIn("Centered", message)
        self.assertIn("the package runs rows independently of each other", message)
        self.assertFalse(os.path.exists(self.path("err.pbtxt")))
        self.assertEqual([f for f in os.listdir(self.dir) if f.endswith(".pt2")], [])

    def test_a_cuda_package_needs_self_test_off(self):
        actor = gaussian_actor(GatedResidual(5, 16, 4))
        td = TensorDict({"observation": torch.randn(6, 5)}, [6])
        with self.assertRaises(ValueError) as raised:
            tdpolicy.export(actor, self.path("err.pbtxt"), example=td, fallback="aoti", aoti_device="cuda")
        self.assertIn("self_test=False", str(raised.exception))
        with self.assertRaises(ValueError):
            tdpolicy.export(actor, self.path("err.pbtxt"), example=td, fallback="onnx")


if __name__ == "__main__":
    unittest.main()
