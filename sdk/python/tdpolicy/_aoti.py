"""fallback="aoti": a network no tdpolicy.Network kind expresses, exported as an AOTInductor package.

The network (the `module` of a TensorDictModule, called with its in_keys' tensors) is traced by
torch.export with one dynamic batch dim and compiled by AOTInductor
(torch._inductor.aoti_compile_and_package) into a .pt2 file next to the spec; the spec's
aoti_package names the file and its SHA-256. Its example inputs are the tensors that reached the
TensorDictModule when the whole policy ran on the export's example (recorded by a forward
pre-hook), so the package is traced on exactly what it will be given.

The C++ module (sdk/nn/aoti_package.h) flattens a call's leading batch dims into the program's
one batch dim and restores them on the outputs; the package's metadata (tdpolicy.inputs,
tdpolicy.outputs) records each tensor's dtype and shape after the batch dim for those checks.
"""

import copy
import hashlib
import math
import os
import shutil
import tempfile

import torch
from torch import nn

from tdpolicy._errors import ExportError

# c10's names of the scalar types (c10::toString), which the C++ module compares with.
_DTYPE_NAMES = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
    torch.bool: "Bool",
}

_FALLBACK_HINT = ('; tdpolicy.export(..., fallback="aoti") would export this network through torch.export and '
                  'AOTInductor (a compiled .pt2 file next to the spec)')


def with_fallback_hint(error):
    """The ExportError of a network no kind expresses, saying what would export it."""
    if _FALLBACK_HINT not in str(error):
        error.args = (str(error) + _FALLBACK_HINT,)
    return error


class InputRecorder:
    """Records, per TensorDictModule of a tree, the tensors at its in_keys on its first call."""

    def __init__(self, root, module_class):
        self.inputs = {}
        self.handles = []
        for sub in root.modules():
            if isinstance(sub, module_class):
                self.handles.append(sub.register_forward_pre_hook(self._hook_for(sub)))

    def _hook_for(self, sub):
        def hook(_, args, kwargs=None):
            if id(sub) in self.inputs or not args:
                return
            td = args[0]
            try:
                tensors = [td.get(key) for key in sub.in_keys]
            except Exception:  # a call that does not hold its inputs fails in the module itself
                return
            # Under vmap (an EnsembleModule's copies) the tensors are batched views, not inputs.
            if all(isinstance(t, torch.Tensor) and not torch._C._functorch.is_batchedtensor(t) for t in tensors):
                self.inputs[id(sub)] = [t.detach().clone() for t in tensors]
        return hook

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []


class _Program(nn.Module):
    """The network as torch.export sees it: positional tensors in, a tuple of tensors out."""

    def __init__(self, net, method):
        super().__init__()
        self.net = net
        self.method = method

    def forward(self, *inputs):
        out = self.net(*inputs) if self.method in (None, "forward") else getattr(self.net, self.method)(*inputs)
        return (out,) if isinstance(out, torch.Tensor) else tuple(out)


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _signature(tensors):
    return ";".join("%s[%s]" % (_DTYPE_NAMES[t.dtype], ",".join(str(int(s)) for s in t.shape[1:])) for t in tensors)


class AotiPackager:
    """Compiles the packages of one export into a scratch folder; write() moves them beside the spec."""

    def __init__(self, stem, batch_dims, device):
        self.stem = stem
        self.batch_dims = batch_dims
        self.device = device
        self.scratch = None
        self.files = []  # (file name, path in the scratch folder)

    def package(self, obj, net, path, method, inputs, msg):
        """Writes msg.aoti_package for `net`, called as `obj` (a TensorDictModule) calls it."""
        if inputs is None:
            raise ExportError(path, net, "did not run with tensors at its in_keys when the policy ran on the "
                              "example, so torch.export has no example inputs for it")
        n_out = len(obj.out_keys)
        batch = None
        for i, (key, value) in enumerate(zip(obj.in_keys, inputs)):
            if value.dtype not in _DTYPE_NAMES:
                raise ExportError(path, net, "input %r has dtype %s, which the package cannot take" % (key, value.dtype))
            if value.dim() < self.batch_dims:
                raise ExportError(path, net, "input %r has shape %s, without the example's %d batch dim(s)"
                                  % (key, tuple(value.shape), self.batch_dims))
            leading = tuple(value.shape[:self.batch_dims])
            if batch is not None and leading != batch:
                raise ExportError(path, net, "input %r has the batch dims %s, another input %s" % (key, leading, batch))
            batch = leading
        rows = math.prod(batch)
        flat = [x.reshape((rows,) + tuple(x.shape[self.batch_dims:])) for x in inputs]
        program = _Program(net, method).eval()
        with torch.no_grad():
            try:
                direct = program(*inputs)
                flat_out = program(*flat)
            except Exception as error:
                raise ExportError(path, net, "cannot be called on its inputs flattened to one batch dim: %s"
                                  % _first_line(error))
        if len(direct) != n_out or not all(isinstance(t, torch.Tensor) for t in direct):
            raise ExportError(path, net, "returns %d value(s); the TensorDictModule has %d out_keys and the "
                              "package returns tensors only" % (len(direct), n_out))
        for i, (d, f) in enumerate(zip(direct, flat_out)):
            if d.dtype not in _DTYPE_NAMES:
                raise ExportError(path, net, "output %d has dtype %s, which the package cannot return" % (i, d.dtype))
            if tuple(d.shape[:self.batch_dims]) != batch or f.dim() == 0 or f.shape[0] != rows:
                raise ExportError(path, net, "output %d has shape %s for inputs of batch dims %s: a package's outputs "
                                  "keep the batch dims in front" % (i, tuple(d.shape), batch))
            if not torch.allclose(f.reshape(d.shape), d, rtol=1e-6, atol=1e-6, equal_nan=True):
                raise ExportError(path, net, "output %d differs when its batch dims are flattened into one: the "
                                  "package runs rows independently of each other" % i)
        # torch.export specializes a dim of size 0 or 1: trace on at least two rows.
        traced = [x if rows >= 2 else (x.expand((2,) + tuple(x.shape[1:])).contiguous() if rows == 1
                                       else x.new_zeros((2,) + tuple(x.shape[1:]))) for x in flat]
        if self.device == "cuda":
            program = _Program(copy.deepcopy(net).to("cuda"), method).eval()
            traced = [x.to("cuda") for x in traced]
        batch_dim = torch.export.Dim("batch")
        try:
            # forward(*inputs): the shapes of its one variadic argument.
            dynamic = (tuple({0: batch_dim} for _ in traced),)
            exported = torch.export.export(program, tuple(traced), dynamic_shapes=dynamic)
        except Exception as error:
            raise ExportError(path, net, "torch.export could not trace it with a dynamic batch dim: %s"
                              % _first_line(error))
        if self.scratch is None:
            self.scratch = tempfile.mkdtemp(prefix="tdpolicy_aoti_")
        filename = "%s.%d.pt2" % (self.stem, len(self.files))
        target = os.path.join(self.scratch, filename)
        metadata = {"tdpolicy.inputs": _signature(flat), "tdpolicy.outputs": _signature(flat_out)}
        try:
            # Random ops compile to inductor's own generator otherwise (torch.normal is wrong on
            # CPU in torch 2.11); a policy's networks are deterministic, and this keeps them eager's.
            with torch._inductor.config.patch(fallback_random=True):
                torch._inductor.aoti_compile_and_package(
                    exported, package_path=target, inductor_configs={"aot_inductor.metadata": metadata})
        except Exception as error:
            raise ExportError(path, net, "AOTInductor could not compile it: %s" % _first_line(error))
        with open(target, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        self.files.append((filename, target))
        msg.aoti_package.file = filename
        msg.aoti_package.sha256 = digest
        msg.aoti_package.device = self.device

    def close(self):
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

