"""Builds the tdpolicy package, generating the spec's protobuf classes on the way.

The schema lives once, in proto/tdpolicy/*.proto at the repository root (two levels above this
file); build_py runs protoc on it and writes tdpolicy/spec_pb2.py and tdpolicy/tensor_pb2.py
into the build tree, so the generated code is never committed and cannot drift from the schema.

Why the system protoc and not grpcio-tools: the C++ SDK compiles the same .proto files with
Debian 12's protoc 3.21.12 (proto/BUILD.bazel), so one compiler serves both languages, and
grpcio-tools would pull a second protobuf (and gRPC) just to run a compiler that is already
installed. protoc is taken from $PROTOC, else from PATH; TDPOLICY_PROTO_DIR points at another
proto/ folder (for a build from a copy of sdk/python without the repository around it).
"""

import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_dir():
    folder = os.environ.get("TDPOLICY_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
    folder = os.path.abspath(folder)
    if not glob.glob(os.path.join(folder, "tdpolicy", "*.proto")):
        raise SystemExit(
            "tdpolicy: no tdpolicy/*.proto under %s: build the package from the repository "
            "(pip install ./sdk/python) or set TDPOLICY_PROTO_DIR to the repository's proto/ folder" % folder)
    return folder


def protoc():
    found = os.environ.get("PROTOC") or shutil.which("protoc")
    if not found:
        raise SystemExit("tdpolicy: protoc not found (install Debian's protobuf-compiler, which ./bazelw "
                         "installs, or set PROTOC to a protoc 3.21)")
    return found


def generate(out_dir):
    """Writes out_dir/tdpolicy/{spec,tensor}_pb2.py from proto/tdpolicy/*.proto."""
    folder = proto_dir()
    protos = sorted(glob.glob(os.path.join(folder, "tdpolicy", "*.proto")))
    os.makedirs(os.path.join(out_dir, "tdpolicy"), exist_ok=True)
    subprocess.check_call([protoc(), "--proto_path=" + folder, "--python_out=" + out_dir] + protos)


class BuildPyWithProtos(build_py):
    def run(self):
        super().run()
        generate(self.build_lib)


setup(packages=["tdpolicy"], cmdclass={"build_py": BuildPyWithProtos})
