"""Prints the golden values of tests/distributions/torchrl_bounded_test.cc and
tests/policy/torchrl_bounded_test.cc, computed by the venv's TorchRL (0.13.3):

    ~/.cache/tdpolicy/venv/bin/python tests/distributions/make_torchrl_bounded_golden.py
"""

import torch
from torchrl.data import Bounded, Categorical, OneHot
from torchrl.modules import TanhDelta, TanhModule
from torchrl.modules import TruncatedNormal
from tensordict import TensorDict


def show(name, t):
    values = ", ".join("%.9g" % v for v in t.detach().double().reshape(-1).tolist())
    print("// %s %s\n{%s}" % (name, list(t.shape), values.replace("inf", "kInf")))


param = torch.tensor([[0.3, -1.2, 2.5], [-0.7, 0.05, -3.0]])
low, high = torch.tensor([-1.0, -2.0, 0.5]), torch.tensor([1.0, 0.5, 3.0])
d = TanhDelta(param, low=low, high=high)
show("tanh_delta tensor bounds mode", d.mode)
show("tanh_delta log_prob(mode)", d.log_prob(d.mode))
show("tanh_delta log_prob(mode + 0.1)", d.log_prob(d.mode + 0.1))
d = TanhDelta(param, low=-2.0, high=2.0)
show("tanh_delta [-2, 2] mode", d.mode)

loc = torch.tensor([[0.3, -1.2, 2.5], [-0.7, 0.05, -3.0]])
scale = torch.tensor([[0.5, 1.0, 0.2], [2.0, 0.1, 0.7]])
t = TruncatedNormal(loc, scale, low=-1.5, high=2.0, tanh_loc=True, upscale=3.0)
show("truncated tanh_loc mean", t.mean)
show("truncated tanh_loc mode", t.mode)
value = torch.tensor([[0.1, -1.0, 1.9], [-1.4, 0.0, 2.5]])
show("truncated tanh_loc log_prob", t.log_prob(value))
t = TruncatedNormal(loc, scale, low=low, high=high)
show("truncated tensor bounds mean", t.mean)
show("truncated tensor bounds mode", t.mode)
value = torch.tensor([[0.1, -1.0, 1.9], [-0.9, 0.4, 0.6]])
show("truncated tensor bounds log_prob", t.log_prob(value))

x = torch.tensor([[0.3, -1.2, 2.5], [-0.7, 0.05, -3.0]]) * 10
m = TanhModule(in_keys=["x"], out_keys=["y"], spec=Bounded(low, high, shape=(3,)))
show("tanh_module spec", m(TensorDict({"x": x}, [2]))["y"])
m = TanhModule(in_keys=["x"], out_keys=["y"], clamp=True)
show("tanh_module clamp", m(TensorDict({"x": x}, [2]))["y"])

box = Bounded(low, high, shape=(3,))
show("bounded project", box.project(x / 10))
cat = Categorical(4, shape=(3,))
show("categorical project", cat.project(torch.tensor([[0.4, 2.6, 7.0], [-1.2, 3.5, 1.0]])))
one_hot = OneHot(3)
show("one_hot project", one_hot.project(torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])).to(torch.float64))
