"""Exports the ONNX Runtime and AOTInductor peers of peers_benchmark.cc: CartPole and Pendulum
with their sampling compiled in, the same weights as the C++ actors (python_peer.py's builders:
torch.manual_seed(init_seed) before the MLP reproduces the C++ loader's Linear layers).

  /root/.cache/tdpolicy/venv/bin/python3 tests/benchmarks/peers_export.py OUT_DIR

Writes OUT_DIR/{cartpole,pendulum}.onnx and .pt2, each one input "observation" [B, obs] (B
dynamic) and two outputs, the action and its log-prob drawn in the graph (RANDOM, as the fused
plan's calls): CartPole samples a class and scores it; Pendulum draws a normal, squashes it into
[low, high] with tanh as TorchRL's TanhNormal does and scores it. The ONNX graphs come from
torch.onnx's TorchScript exporter (dynamo=False; needs the `onnx` package), the .pt2 packages
from torch.export + AOTInductor for the CPU, with `fallback_random` (inductor's own normal
sampler draws with the wrong scale on CPU in torch 2.11).
"""

import math
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_peer  # noqa: E402  (its spec reader and builders: the same weights as the C++ actors)


class CartPoleSampler(nn.Module):
    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp

    def forward(self, observation):
        log_p = torch.log_softmax(self.mlp(observation), dim=-1)
        action = torch.multinomial(log_p.exp(), 1)
        return action, log_p.gather(-1, action)


class PendulumSampler(nn.Module):
    def __init__(self, mlp, extractor, low, high):
        super().__init__()
        self.mlp = mlp
        self.extractor = extractor
        self.half = (high - low) / 2
        self.centre = (high + low) / 2

    def forward(self, observation):
        loc, scale = self.extractor(self.mlp(observation))
        noise = torch.randn_like(loc)
        pre = loc + scale * noise
        squashed = torch.tanh(pre)
        action = squashed * self.half + self.centre
        # Normal log-density of pre, minus log |d action / d pre| (TanhNormal's change of variables).
        log_prob = (-0.5 * noise * noise - torch.log(scale) - 0.5 * math.log(2 * math.pi)
                    - torch.log(self.half * (1 - squashed * squashed) + 1e-6)).sum(-1, keepdim=True)
        return action, log_prob


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    root = python_peer.REPO_ROOT
    for name, spec_file in (("cartpole", "cartpole_categorical.pbtxt"), ("pendulum", "pendulum_tanh_gaussian.pbtxt")):
        spec = python_peer.read_spec(os.path.join(root, "policies", spec_file))
        actor = python_peer.build_actor(spec)
        mlp = actor.module[0].module
        if spec["distribution"] == "categorical":
            model = CartPoleSampler(mlp)
        else:
            kwargs = spec["distribution_kwargs"]
            model = PendulumSampler(mlp, actor.module[1].module, kwargs.get("low", -1.0), kwargs.get("high", 1.0))
        model.eval()
        example = python_peer.observation(2, spec["in_features"])
        path = os.path.join(out_dir, f"{name}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, (example,), path, dynamo=False, input_names=["observation"],
                              output_names=["action", "log_prob"], dynamic_axes={"observation": {0: "batch"}},
                              opset_version=17)
        print(f"{path}: {spec['name']}, observation [B, {spec['in_features']}]")
        package = os.path.join(out_dir, f"{name}.pt2")
        exported = torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
        with torch._inductor.config.patch(fallback_random=True):
            torch._inductor.aoti_compile_and_package(exported, package_path=package)
        print(f"{package}: AOTInductor, CPU")


if __name__ == "__main__":
    main()
