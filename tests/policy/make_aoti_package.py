"""Writes a tiny AOTInductor package for aoti_package_test.cc, with the venv's torch, at test time
(a package is native code for this machine's CPU, so it is not committed).

  make_aoti_package.py --out DIR   ->  DIR/tiny.pt2, DIR/tiny.expected

The package computes (tanh(linear(x)) * y[:, :1], sum(x * sum(y), -1)) for x [B, 4] and y [B, 2],
with one dynamic batch dim and the metadata tdpolicy.export writes (each tensor's dtype and shape
after the batch dim). tiny.expected holds its SHA-256 and the outputs for the inputs
x = linspace(-1, 1, 20).reshape(5, 4), y = linspace(0.5, -0.5, 10).reshape(5, 2), one value a line.
"""

import argparse
import hashlib
import os

import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x, y):
        return torch.tanh(self.linear(x)) * y[:, :1], (x * y.sum(-1, keepdim=True)).sum(-1, keepdim=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Tiny().eval()
    x = torch.linspace(-1, 1, 20).reshape(5, 4)
    y = torch.linspace(0.5, -0.5, 10).reshape(5, 2)
    batch = torch.export.Dim("batch")
    exported = torch.export.export(model, (x, y), dynamic_shapes=({0: batch}, {0: batch}))
    path = os.path.join(out, "tiny.pt2")
    metadata = {"tdpolicy.inputs": "Float[4];Float[2]", "tdpolicy.outputs": "Float[3];Float[1]"}
    with torch._inductor.config.patch(fallback_random=True):
        torch._inductor.aoti_compile_and_package(exported, package_path=path,
                                                 inductor_configs={"aot_inductor.metadata": metadata})
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with torch.no_grad():
        first, second = model(x, y)
    with open(os.path.join(out, "tiny.expected"), "w") as f:
        f.write(digest + "\n")
        for value in torch.cat([first.flatten(), second.flatten()]).tolist():
            f.write(repr(value) + "\n")


if __name__ == "__main__":
    main()
