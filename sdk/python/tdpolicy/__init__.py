"""tdpolicy: export tensordict / TorchRL actors to tdpolicy policy specs, and check them.

    import tdpolicy
    tdpolicy.export(actor, "actor.pbtxt", example=td)      # spec + weights + self test
    report = tdpolicy.check("actor.pbtxt", actor, td)      # the C++ `tdp` against Python, per key

The spec's protobuf classes (tdpolicy.spec_pb2, tdpolicy.tensor_pb2) are generated from
proto/tdpolicy/*.proto when the package is built; see setup.py.
"""

# The generated spec_pb2/tensor_pb2 may live in another folder named tdpolicy on sys.path (the
# tests generate them into a scratch folder instead of installing the package): extend_path makes
# both folders one package.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from tdpolicy._errors import CheckError, ExportError  # noqa: E402
from tdpolicy._export import export, spec_format  # noqa: E402
from tdpolicy._check import CheckReport, check, find_tdp  # noqa: E402
from tdpolicy._modules import LSTMCell  # noqa: E402

__all__ = ["export", "check", "ExportError", "CheckError", "CheckReport", "LSTMCell", "find_tdp", "spec_format"]
