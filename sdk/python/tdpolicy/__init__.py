"""tdpolicy: export tensordict / TorchRL actors to tdpolicy policy specs, and check them.

    import tdpolicy
    tdpolicy.export(actor, "actor.pbtxt", example=td)      # spec + weights + self test
    report = tdpolicy.check("actor.pbtxt", actor, td)      # the C++ `tdp` against Python, per key
    cpp = tdpolicy.Actor.load("actor.pbtxt", seed=0)       # the C++ Actor, in this process
    out = cpp.act(td)                                      # a TensorDict of its outputs

Actor, envs and Collector come from the compiled extension tdpolicy._C (built by
`pip install ./sdk/python` with the repository's ./bazelw); they are imported on first use, so
the exporter works without it. tdpolicy.distributed (Collector in Ray actors) also needs `ray`.

The spec's protobuf classes (tdpolicy.spec_pb2, tdpolicy.tensor_pb2) are generated from
proto/tdpolicy/*.proto when the package is built; see setup.py.
"""

# The generated spec_pb2/tensor_pb2 may live in another folder named tdpolicy on sys.path (the
# tests generate them into a scratch folder instead of installing the package): extend_path makes
# both folders one package.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from tdpolicy._errors import CheckError, ExportError  # noqa: E402

# tdpolicy.serving runs in a venv of its own without torch (see that module): there the package
# imports without the exporter, and asking for it names what is missing.
_NO_TORCH = None
try:
    from tdpolicy._export import export, spec_format  # noqa: E402
    from tdpolicy._check import CheckReport, check, find_tdp  # noqa: E402
    from tdpolicy._modules import LSTMCell  # noqa: E402
except ModuleNotFoundError as _error:
    if _error.name not in ("torch", "tensordict"):
        raise
    _NO_TORCH = _error

_NATIVE = {"Actor": "tdpolicy._C", "Collector": "tdpolicy._collector", "envs": "tdpolicy.envs",
           "distributed": "tdpolicy.distributed"}


def __getattr__(name):
    # The compiled half is imported only when asked for: export and check need no compiler.
    if _NO_TORCH is not None and name in __all__:
        raise ImportError("tdpolicy.%s needs torch and tensordict, which this Python lacks (%s): use the project's "
                          "venv (third_party/python/requirements.txt)" % (name, _NO_TORCH))
    if name not in _NATIVE:
        raise AttributeError("module 'tdpolicy' has no attribute %r" % name)
    import importlib

    import torch  # (the extension uses torch's tensor types: torch is imported first)

    try:
        from tdpolicy._build_info import TORCH_VERSION
    except ImportError:
        TORCH_VERSION = None  # a build that did not go through setup.py (the tests copy _C.so in)
    if TORCH_VERSION is not None and TORCH_VERSION != torch.__version__:
        raise ImportError("tdpolicy.%s: the extension tdpolicy._C was built against torch %s but this Python has "
                          "torch %s; reinstall the package (pip install ./sdk/python) in an environment with "
                          "torch %s, or use the project's venv" % (name, TORCH_VERSION, torch.__version__,
                                                                   TORCH_VERSION))
    try:
        module = importlib.import_module(_NATIVE[name])
    except ImportError as error:
        if getattr(error, "name", None) == "ray":
            raise ImportError("tdpolicy.%s needs Ray (pip install ray==2.60.0, the version pinned in the repository's "
                              "third_party/python/requirements.txt)" % name) from error
        raise ImportError("tdpolicy.%s needs the compiled extension tdpolicy._C (%s); `pip install ./sdk/python` "
                          "from the repository builds it with ./bazelw" % (name, error)) from error
    value = module if name in ("envs", "distributed") else getattr(module, name)
    globals()[name] = value
    return value


__all__ = ["Actor", "Collector", "envs", "distributed", "export", "check", "ExportError", "CheckError", "CheckReport", "LSTMCell", "find_tdp", "spec_format"]
