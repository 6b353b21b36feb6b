"""Builds the tdpolicy package: its protobuf classes, and its compiled half, tdpolicy._C.

The schema lives once, in proto/tdpolicy/*.proto at the repository root (two levels above this
file); build_py runs protoc on it and writes tdpolicy/spec_pb2.py and tdpolicy/tensor_pb2.py
into the build tree, so the generated code is never committed and cannot drift from the schema.

Why the system protoc and not grpcio-tools: the C++ SDK compiles the same .proto files with
Debian 12's protoc 3.21.12 (proto/BUILD.bazel), so one compiler serves both languages, and
grpcio-tools would pull a second protobuf (and gRPC) just to run a compiler that is already
installed. protoc is taken from $PROTOC, else from PATH; TDPOLICY_PROTO_DIR points at another
proto/ folder (for a build from a copy of sdk/python without the repository around it).

The extension (tdpolicy.Actor, tdpolicy.envs, tdpolicy.Collector) is built by the repository's
one build system: build_ext runs `./bazelw build -c opt //sdk/python:_C.so` at the repository
root and copies the library into the package as tdpolicy/_C.so, with tdpolicy/_build_info.py
recording the torch it was built against (the project venv's, which ./bazelw manages: install
the package into that venv, or one with the same torch). TDPOLICY_BAZEL_CONFIG adds Bazel flags
(e.g. "--config=cuda"); TDPOLICY_NO_EXTENSION=1 builds the pure-Python package only (export and
check work without the extension).
"""

import glob
import os
import shlex
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TARGET = "//sdk/python:_C.so"


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


class BuildExtWithBazel(build_ext):
    """tdpolicy._C from Bazel: the same target, flags and LibTorch as the repository's tests."""

    def run(self):
        bazelw = os.path.join(ROOT, "bazelw")
        if not os.path.exists(bazelw):
            raise SystemExit("tdpolicy: %s not found: the extension is built from the repository (pip install "
                             "./sdk/python at its root); TDPOLICY_NO_EXTENSION=1 builds without it" % bazelw)
        flags = ["-c", "opt"] + shlex.split(os.environ.get("TDPOLICY_BAZEL_CONFIG", ""))
        # Bazel keys its actions on PATH: pip's isolated build environment puts its own folders in
        # front, which would miss every cached action and rebuild the whole SDK. They go.
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "pip-build-env" not in p)
        # Its sitecustomize (on PYTHONPATH) would also hide the venv's torch from the venv's python.
        for name in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME"):
            env.pop(name, None)
        subprocess.check_call([bazelw, "build"] + flags + [TARGET], cwd=ROOT, env=env)
        bin_dir = subprocess.check_output([bazelw, "info"] + flags + ["bazel-bin"], cwd=ROOT, env=env).decode().strip()
        built = os.path.join(bin_dir, "sdk", "python", "_C.so")
        # The torch the extension was linked against: the venv ./bazelw manages.
        venv = os.environ.get("TDP_VENV") or os.path.join(os.path.expanduser("~"), ".cache", "tdpolicy", "venv")
        torch_version = subprocess.check_output(
            [os.path.join(venv, "bin", "python3"), "-c", "import torch; print(torch.__version__)"], env=env).decode().strip()
        for ext in self.extensions:
            target = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(built, target)
            with open(os.path.join(os.path.dirname(target), "_build_info.py"), "w") as f:
                f.write("# Written by setup.py's build_ext.\nTORCH_VERSION = %r\n" % torch_version)

    def get_ext_filename(self, ext_name):
        # tdpolicy/_C.so, the name Bazel gives it (Python imports it under any ABI tag).
        return os.path.join(*ext_name.split(".")) + ".so"


with_extension = os.environ.get("TDPOLICY_NO_EXTENSION", "") not in ("1", "true", "yes")
setup(
    packages=["tdpolicy"],
    ext_modules=[Extension("tdpolicy._C", sources=[])] if with_extension else [],
    cmdclass={"build_py": BuildPyWithProtos, "build_ext": BuildExtWithBazel},
)
