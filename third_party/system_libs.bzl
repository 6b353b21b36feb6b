"""Repository rules that expose the system's and the venv's libraries to Bazel, offline.

`pkg_config_library` turns pkg-config modules into cc_library targets (link flags and defines as the
packages' own .pc files give them) and exports programs the packages ship (gRPC's protoc plugin).
`libtorch_repository` points at the LibTorch that ./bazelw sets up (LIBTORCH_HOME: the torch 2.11
wheel in the project's venv, or any unpacked LibTorch), for CPU and, under --config=cuda, CUDA.
`python_venv` exposes that venv's interpreter to tests; `mujoco_repository` the venv's MuJoCo engine
and Gymnasium's task models; `torch_python` what a Python extension built against the venv's torch
needs. Nothing here downloads: a missing package fails with what to install.
"""

def _fail_missing(name, what, package):
    fail(("tdpolicy: {name}: {what} not found. Install the Debian package '{package}' " +
          "(./bazelw installs every package the build needs).").format(
        name = name,
        what = what,
        package = package,
    ))

def _split_flags(text):
    return [flag for flag in text.strip().split(" ") if flag]

def _pkg_config_library_impl(ctx):
    pkg_config = ctx.which("pkg-config")
    if not pkg_config:
        _fail_missing(ctx.name, "pkg-config", "pkg-config")
    build = ["package(default_visibility = [\"//visibility:public\"])", ""]
    for target, modules in ctx.attr.targets.items():
        result = ctx.execute([pkg_config, "--cflags", "--libs"] + modules)
        if result.return_code != 0:
            _fail_missing(ctx.name, "pkg-config modules " + ", ".join(modules), ctx.attr.package)
        defines = []
        linkopts = []
        includes = []
        for flag in _split_flags(result.stdout):
            if flag.startswith("-D"):
                defines.append(flag[2:])
            elif flag.startswith("-I"):
                # /usr/include is searched already. Another folder (Eigen's /usr/include/eigen3) is
                # linked into this repository: Bazel's `includes` only take paths inside it.
                folder = flag[2:]
                if folder == "/usr/include":
                    continue
                linked = "include_" + folder.strip("/").replace("/", "_")
                ctx.symlink(folder, linked)
                includes.append(linked)
            else:
                linkopts.append(flag)
        build.append("cc_library(name = {}, hdrs = {}, includes = {}, defines = {}, linkopts = {})".format(
            repr(target),
            "glob([{}])".format(", ".join([repr(folder + "/**") for folder in includes])) if includes else "[]",
            repr(includes),
            repr(defines),
            repr(linkopts),
        ))
    for target, program in ctx.attr.tools.items():
        # A program the package ships (gRPC's protoc plugin), for genrules' `tools`.
        path = ctx.which(program)
        if not path:
            _fail_missing(ctx.name, "the program " + program, ctx.attr.tools_package or ctx.attr.package)
        ctx.symlink(path, target)
        build.append("exports_files([{}])".format(repr(target)))
    ctx.file("WORKSPACE", "workspace(name = {})\n".format(repr(ctx.name)))
    ctx.file("BUILD.bazel", "\n".join(build) + "\n")

pkg_config_library = repository_rule(
    implementation = _pkg_config_library_impl,
    attrs = {
        "targets": attr.string_list_dict(mandatory = True, doc = "target name -> pkg-config modules"),
        "package": attr.string(mandatory = True, doc = "the Debian package that ships the modules"),
        "tools": attr.string_dict(doc = "file name in the repository -> program on PATH"),
        "tools_package": attr.string(doc = "the Debian package that ships the programs, if another"),
    },
    environ = ["PKG_CONFIG_PATH"],
    local = True,
)

_LIBTORCH_BUILD = """
package(default_visibility = ["//visibility:public"])

# The CPU build links only libtorch_cpu and libc10, so CPU binaries never load the CUDA libraries
# (about 1.5 GB) even though the wheel ships them. --config=cuda adds libtorch_cuda, libc10_cuda
# and the CUDA runtime from the same wheel. Both configurations compile with the same headers and
# include paths, the CUDA runtime's (cuda_include/, which ATen/cuda/* includes) among them when
# the wheel has it, and TDP_WITH_CUDA=1 is defined only in `local_defines` of the targets whose
# sources have CUDA-only code: switching configurations recompiles those files and relinks the
# binaries, nothing else. (A header or include path that only --config=cuda declared would reach
# the compile of every target above its user and change all their action keys.)
cc_library(
    name = "libtorch",
    hdrs = glob(["include/**", "cuda_include/**"]),
    includes = ["include/torch/csrc/api/include", "include"] + {cuda_includes},
    linkopts = {linkopts} + select({{
        "{cuda_setting}": {cuda_linkopts},
        "//conditions:default": [],
    }}),
    deps = select({{
        "{cuda_setting}": [":cuda_available"],
        "//conditions:default": [],
    }}),
)

{cuda_target}
"""

_CUDA_PRESENT = """
cc_library(name = "cuda_available")
"""

_CUDA_MISSING = """
genrule(
    name = "cuda_missing",
    outs = ["cuda_missing.h"],
    cmd = "echo 'tdpolicy: --config=cuda needs a CUDA-enabled LibTorch and the CUDA runtime headers: {why}' >&2; exit 1",
)

cc_library(name = "cuda_available", hdrs = [":cuda_missing"])
"""

def _libtorch_repository_impl(ctx):
    home = ctx.os.environ.get("LIBTORCH_HOME", "").rstrip("/")
    if not home:
        fail("tdpolicy: LIBTORCH_HOME is not set. Run Bazel through ./bazelw, which installs torch " +
             "2.11 into the project's venv and points LIBTORCH_HOME at it.")
    libdir = home + "/lib"
    if not ctx.path(libdir + "/libtorch_cpu.so").exists:
        fail(("tdpolicy: no LibTorch under LIBTORCH_HOME={} (looked for lib/libtorch_cpu.so). " +
              "./bazelw installs one (torch==2.11.0 from PyPI); or point LIBTORCH_HOME at an " +
              "unpacked LibTorch 2.11.").format(home))
    if not ctx.path(home + "/include/torch/csrc/api/include/torch/types.h").exists:
        fail("tdpolicy: LibTorch headers not found under {}/include.".format(home))
    # Only LibTorch's own header trees: the wheel's include/ also carries its bundled fmt,
    # protobuf (google/), pybind11, ... headers, which would shadow Debian's in every compile.
    for tree in ["ATen", "c10", "caffe2", "torch"]:
        ctx.symlink(home + "/include/" + tree, "include/" + tree)

    # The CUDA runtime that libtorch_cuda.so was linked with: the wheel's nvidia/cu13 package
    # (site-packages/nvidia/cu13, next to torch/), else the system toolkit.
    cuda_why = ""
    cuda_linkopts = []
    if not ctx.path(libdir + "/libtorch_cuda.so").exists:
        cuda_why = "{} has no libtorch_cuda.so. Set LIBTORCH_HOME to a CUDA LibTorch.".format(libdir)
    else:
        cuda_home = None
        for candidate in [home + "/../nvidia/cu13", "/usr/local/cuda"]:
            if ctx.path(candidate + "/include/cuda_runtime_api.h").exists:
                cuda_home = str(ctx.path(candidate).realpath)
                break
        if not cuda_home:
            cuda_why = "no cuda_runtime_api.h next to LibTorch (nvidia/cu13) or in /usr/local/cuda."
        else:
            ctx.symlink(cuda_home + "/include", "cuda_include")
            cuda_lib = cuda_home + "/lib"
            if not ctx.path(cuda_lib + "/libcudart.so.13").exists:
                cuda_lib = cuda_home + "/lib64"
            cuda_linkopts = [
                "-L" + cuda_lib,
                "-Wl,-rpath," + cuda_lib,
                "-Wl,--no-as-needed",
                "-ltorch_cuda",
                "-lc10_cuda",
                "-Wl,--as-needed",
                "-l:libcudart.so.13",
            ]

    linkopts = [
        "-L" + libdir,
        "-Wl,-rpath," + libdir,
        "-Wl,--no-as-needed",
        "-ltorch_cpu",
        "-lc10",
        "-Wl,--as-needed",
    ]
    ctx.file("WORKSPACE", "workspace(name = {})\n".format(repr(ctx.name)))
    # tdpolicy's //:cuda, named from this repository: "@//:cuda" when tdpolicy is the main
    # workspace, "@tdpolicy//:cuda" when another workspace uses it (third_party/dependencies.bzl).
    setting = ctx.attr.cuda_setting
    ctx.file("BUILD.bazel", _LIBTORCH_BUILD.format(
        cuda_setting = "@{}//{}:{}".format(setting.workspace_name, setting.package, setting.name),
        linkopts = repr(linkopts),
        cuda_linkopts = repr(cuda_linkopts),
        cuda_includes = repr([] if cuda_why else ["cuda_include"]),
        cuda_target = _CUDA_MISSING.format(why = cuda_why) if cuda_why else _CUDA_PRESENT,
    ))
    ctx.file("defs.bzl", "LIBTORCH_HOME = {}\nLIBTORCH_HAS_CUDA = {}\n".format(repr(home), not cuda_why))

libtorch_repository = repository_rule(
    implementation = _libtorch_repository_impl,
    attrs = {"cuda_setting": attr.label(default = Label("//:cuda"))},
    environ = ["LIBTORCH_HOME"],
    local = True,
)

def _venv_python(ctx, variable = "TDP_VENV"):
    """The venv named by `variable` (TDP_VENV: the project's; TDP_SERVING_VENV: the serving one;
    ./bazelw sets both) and its interpreter; fails without them."""
    venv = ctx.os.environ.get(variable, "").rstrip("/")
    python = venv + "/bin/python3"
    if not venv or not ctx.path(python).exists:
        fail(("tdpolicy: the Python environment {}={} has no bin/python3. Run Bazel " +
              "through ./bazelw, which creates it.").format(variable, venv))
    return venv, python

def _python_venv_impl(ctx):
    venv, python = _venv_python(ctx, ctx.attr.variable)

    # A wrapper, not a symlink: a venv's python finds its site-packages through its own path.
    ctx.file("python3", "#!/bin/sh\nexec {} \"$@\"\n".format(repr(python)), executable = True)
    ctx.file("WORKSPACE", "workspace(name = {})\n".format(repr(ctx.name)))
    ctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])

# The interpreter of the venv named by {variable}: the project's (torch, tensordict, torchrl, numpy;
# third_party/python/requirements.txt) or the serving one (KServe, tritonclient;
# third_party/python/serving-requirements.txt).
exports_files(["python3"])
""".format(variable = ctx.attr.variable))

python_venv = repository_rule(
    implementation = _python_venv_impl,
    attrs = {"variable": attr.string(default = "TDP_VENV")},
    environ = ["TDP_VENV", "TDP_SERVING_VENV"],
    local = True,
)

def _mujoco_repository_impl(ctx):
    venv, python = _venv_python(ctx)

    # The mujoco wheel carries the engine (libmujoco.so) and its headers as torch's carries LibTorch;
    # Gymnasium carries the task models. Asking the venv's interpreter where they are avoids
    # guessing the site-packages layout.
    result = ctx.execute([python, "-c", "\n".join([
        "import os, importlib.util as u",
        "m = u.find_spec('mujoco'); g = u.find_spec('gymnasium')",
        "print(os.path.dirname(m.origin) if m else '')",
        "print(os.path.join(os.path.dirname(g.origin), 'envs', 'mujoco', 'assets') if g else '')",
    ])])
    lines = result.stdout.strip().split("\n") if result.return_code == 0 else []
    if len(lines) != 2 or not lines[0] or not lines[1]:
        fail(("tdpolicy: mujoco or gymnasium is missing from {} ({}). ./bazelw installs them " +
              "(third_party/python/requirements.txt).").format(venv, result.stderr.strip()))
    package, assets = lines[0], lines[1]
    libraries = [f.basename for f in ctx.path(package).readdir() if f.basename.startswith("libmujoco.so.")]
    if len(libraries) != 1 or not ctx.path(package + "/include/mujoco/mujoco.h").exists:
        fail("tdpolicy: {} holds no libmujoco.so.* and include/mujoco/mujoco.h.".format(package))
    ctx.symlink(package + "/include/mujoco", "include/mujoco")
    ctx.file("include/gymnasium_assets.h", "\n".join([
        "// Written by tdpolicy's mujoco_repository rule: where the venv's Gymnasium keeps its",
        "// MuJoCo task models.",
        "#pragma once",
        "inline constexpr char kGymnasiumMujocoAssets[] = {};".format(json.encode(assets)),
        "",
    ]))
    ctx.file("WORKSPACE", "workspace(name = {})\n".format(repr(ctx.name)))
    ctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])

# MuJoCo {library} from the venv's mujoco wheel ({package}).
cc_library(
    name = "mujoco",
    hdrs = glob(["include/mujoco/*.h"]),
    includes = ["include"],
    linkopts = {linkopts},
)

# The directory of Gymnasium's MuJoCo task models (kGymnasiumMujocoAssets).
cc_library(
    name = "gymnasium_assets",
    hdrs = ["include/gymnasium_assets.h"],
    includes = ["include"],
)
""".format(
        library = libraries[0],
        package = package,
        linkopts = repr(["-L" + package, "-Wl,-rpath," + package, "-l:" + libraries[0]]),
    ))

mujoco_repository = repository_rule(
    implementation = _mujoco_repository_impl,
    environ = ["TDP_VENV"],
    local = True,
)

_TORCH_PYTHON_BUILD = """
package(default_visibility = ["//visibility:public"])

# What a Python extension built against the venv's torch compiles and links with: the base
# interpreter's headers (a venv has none of its own), the pybind11 that torch's wheel ships (the
# one its own bindings are built with, so torch's tensor casters and ours agree), and
# libtorch_python for those casters. The symbols of libpython itself are left undefined: the
# interpreter that imports the extension provides them.
cc_library(
    name = "torch_python",
    hdrs = glob(["python_include/**", "pybind11_include/**"]),
    includes = ["python_include", "pybind11_include"],
    linkopts = {linkopts},
    deps = ["@libtorch"],
)
"""

def _torch_python_impl(ctx):
    venv, python = _venv_python(ctx)

    # sysconfig in a venv names the base interpreter's include folder (pyenv's, Debian's, ...).
    result = ctx.execute([python, "-c", "\n".join([
        "import os, sysconfig, torch",
        "print(sysconfig.get_paths()['include'])",
        "print(os.path.dirname(torch.__file__))",
    ])])
    if result.return_code != 0:
        fail("tdpolicy: {} cannot import torch: {}".format(python, result.stderr))
    include, torch_dir = result.stdout.strip().split("\n")
    if not ctx.path(include + "/Python.h").exists:
        fail(("tdpolicy: no Python.h in {} (the headers of the venv's base interpreter). Install " +
              "the interpreter's development headers (Debian: python3-dev).").format(include))
    if not ctx.path(torch_dir + "/include/pybind11/pybind11.h").exists:
        fail("tdpolicy: the torch wheel in {} ships no pybind11 headers.".format(torch_dir))
    ctx.symlink(include, "python_include")
    ctx.symlink(torch_dir + "/include/pybind11", "pybind11_include/pybind11")
    libdir = torch_dir + "/lib"
    ctx.file("WORKSPACE", "workspace(name = {})\n".format(repr(ctx.name)))
    ctx.file("BUILD.bazel", _TORCH_PYTHON_BUILD.format(linkopts = repr([
        "-L" + libdir,
        "-Wl,-rpath," + libdir,
        "-Wl,--no-as-needed",
        "-ltorch_python",
        "-Wl,--as-needed",
    ])))

torch_python = repository_rule(
    implementation = _torch_python_impl,
    environ = ["TDP_VENV"],
    local = True,
)
