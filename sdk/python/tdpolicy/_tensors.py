"""Tensors and keys as the spec writes them: TensorProto bytes, "a/b" nested keys."""

import numpy as np
import torch
from tensordict.utils import unravel_key

from tdpolicy._proto import tensor_pb2

# torch dtype -> (tdpolicy.DType name, little-endian numpy dtype)
DTYPES = {
    torch.float32: ("FLOAT32", "<f4"),
    torch.float64: ("FLOAT64", "<f8"),
    torch.float16: ("FLOAT16", "<f2"),
    torch.int64: ("INT64", "<i8"),
    torch.int32: ("INT32", "<i4"),
    torch.int16: ("INT16", "<i2"),
    torch.int8: ("INT8", "i1"),
    torch.uint8: ("UINT8", "u1"),
    torch.bool: ("BOOL", "?"),
}
TORCH_DTYPES = {name: (dtype, np_dtype) for dtype, (name, np_dtype) in DTYPES.items()}
TORCH_DTYPES["BFLOAT16"] = (torch.bfloat16, None)


def dtype_enum(dtype, where):
    if dtype == torch.bfloat16:
        return tensor_pb2.BFLOAT16
    if dtype not in DTYPES:
        raise ValueError("%s: dtype %s has no tdpolicy.DType (%s)"
                         % (where, dtype, ", ".join(str(d) for d in list(DTYPES) + [torch.bfloat16])))
    return tensor_pb2.DType.Value(DTYPES[dtype][0])


def tensor_array(tensor, where):
    """(tdpolicy.DType value, shape, little-endian numpy array) of `tensor`, detached, on the CPU,
    row-major; the array shares the tensor's memory where it can."""
    t = tensor.detach().cpu().contiguous()
    dtype = dtype_enum(t.dtype, where)
    if t.dtype == torch.bfloat16:
        array = t.view(torch.int16).numpy().astype("<i2", copy=False)
    else:
        array = t.numpy().astype(DTYPES[t.dtype][1], copy=False)
    return dtype, tuple(int(s) for s in t.shape), array


def to_tensor_proto(tensor, where, out=None):
    """A tdpolicy.TensorProto holding `tensor` (detached, on the CPU, row-major)."""
    dtype, shape, array = tensor_array(tensor, where)
    msg = out if out is not None else tensor_pb2.TensorProto()
    msg.dtype = dtype
    msg.shape.extend(shape)
    msg.data = array.tobytes()
    return msg


def from_tensor_proto(msg):
    name = tensor_pb2.DType.Name(msg.dtype) if msg.dtype else "FLOAT32"
    dtype, np_dtype = TORCH_DTYPES[name]
    shape = tuple(msg.shape)
    if dtype == torch.bfloat16:
        array = np.frombuffer(msg.data, dtype="<i2").reshape(shape)
        return torch.from_numpy(array.copy()).view(torch.bfloat16)
    return torch.from_numpy(np.frombuffer(msg.data, dtype=np_dtype).reshape(shape).copy())


def key_text(key, where="key"):
    """('a', 'b') -> "a/b", as specs write nested keys."""
    key = unravel_key(key)
    parts = (key,) if isinstance(key, str) else key
    for part in parts:
        if not part or "/" in part:
            raise ValueError("%s %r: spec keys cannot hold '/' or empty levels" % (where, key))
    return "/".join(parts)


def parse_key(text):
    parts = tuple(text.split("/"))
    return parts[0] if len(parts) == 1 else parts


def leaves(td):
    """(unravelled key, tensor) for every leaf of a TensorDict, in its order."""
    return [(unravel_key(k), v) for k, v in td.items(include_nested=True, leaves_only=True)]
