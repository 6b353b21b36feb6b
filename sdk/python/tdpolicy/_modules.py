"""Modules a tensordict actor can use where torch's own cannot be wired into a TensorDictModule."""

import torch
from torch import nn


class LSTMCell(nn.LSTMCell):
    """torch.nn.LSTMCell that reads (input, h, c) as three tensors and returns (h, c).

    torch's LSTMCell takes its state as one tuple, which a TensorDictModule cannot pass from
    TensorDict entries; this one can, and exports as the spec's ``lstm_cell``. A missing state
    (None: the key is absent) starts at zeros, as in the C++ LstmCell.

        cell = TensorDictModule(tdpolicy.LSTMCell(4, 16), in_keys=["observation", "h", "c"],
                                out_keys=["h", "c"])
    """

    def forward(self, input, h=None, c=None):  # noqa: A002 - torch's argument name
        if h is None and c is None:
            return super().forward(input)
        shape = input.shape[:-1] + (self.hidden_size,)
        zeros = input.new_zeros(shape)
        return super().forward(input, (zeros if h is None else h, zeros if c is None else c))
