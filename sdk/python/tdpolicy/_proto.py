"""The generated spec classes, with a clear message when they were not generated."""

try:
    from tdpolicy import spec_pb2, tensor_pb2  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on how the package was installed
    raise ImportError(
        "tdpolicy's protobuf classes (tdpolicy/spec_pb2.py) are missing: install the package with "
        "`pip install ./sdk/python`, which generates them from proto/tdpolicy/*.proto, or run "
        "`protoc --proto_path=proto --python_out=DIR proto/tdpolicy/*.proto` and put DIR on "
        "PYTHONPATH (%s)" % error) from error

from google.protobuf import json_format, text_format  # noqa: E402,F401
