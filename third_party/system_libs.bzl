"""Repository rules that expose Debian's system libraries to Bazel, offline.

`pkg_config_library` turns pkg-config modules into cc_library targets (link flags and
defines as the packages' own .pc files give them). `libtorch_repository` points at a LibTorch
install (LIBTORCH_HOME, default Debian's /usr) and detects whether it was built with CUDA.
Nothing here downloads: a missing package fails with the Debian package to install.
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
        for flag in _split_flags(result.stdout):
            if flag.startswith("-D"):
                defines.append(flag[2:])
            elif flag.startswith("-I"):
                # Debian installs these headers under /usr/include, which the compiler searches already.
                continue
            else:
                linkopts.append(flag)
        build.append("cc_library(name = {}, defines = {}, linkopts = {})".format(
            repr(target),
            repr(defines),
            repr(linkopts),
        ))
    ctx.file("WORKSPACE", "workspace(name = {})\n".format(repr(ctx.name)))
    ctx.file("BUILD.bazel", "\n".join(build) + "\n")

pkg_config_library = repository_rule(
    implementation = _pkg_config_library_impl,
    attrs = {
        "targets": attr.string_list_dict(mandatory = True, doc = "target name -> pkg-config modules"),
        "package": attr.string(mandatory = True, doc = "the Debian package that ships the modules"),
    },
    environ = ["PKG_CONFIG_PATH"],
    local = True,
)

_LIBTORCH_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "libtorch",
    hdrs = glob(["api_include/**"]{extra_hdrs}),
    includes = ["api_include"{extra_includes}],
    linkopts = {linkopts} + select({{
        "@//:cuda": {cuda_linkopts},
        "//conditions:default": [],
    }}),
    defines = select({{
        "@//:cuda": ["TDP_WITH_CUDA=1"],
        "//conditions:default": [],
    }}),
    deps = select({{
        "@//:cuda": [":cuda_available"],
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
    cmd = "echo 'tdpolicy: --config=cuda needs a CUDA-enabled LibTorch, but {libdir} has no libtorch_cuda.so. Set LIBTORCH_HOME to a CUDA LibTorch.' >&2; exit 1",
)

cc_library(name = "cuda_available", hdrs = [":cuda_missing"])
"""

def _libtorch_repository_impl(ctx):
    home = ctx.os.environ.get("LIBTORCH_HOME", "/usr").rstrip("/") or "/"
    libdir = None
    for candidate in [home + "/lib", home + "/lib/x86_64-linux-gnu", home + "/lib64"]:
        if ctx.path(candidate + "/libtorch_cpu.so").exists:
            libdir = candidate
            break
    if not libdir:
        fail(("tdpolicy: no LibTorch under LIBTORCH_HOME={} (looked for lib/libtorch_cpu.so). " +
              "Install Debian's 'libtorch-dev' or point LIBTORCH_HOME at an unpacked LibTorch.").format(home))
    api_include = home + "/include/torch/csrc/api/include"
    if not ctx.path(api_include + "/torch/types.h").exists:
        fail("tdpolicy: LibTorch headers not found at {} (install 'libtorch-dev').".format(api_include))
    has_cuda = ctx.path(libdir + "/libtorch_cuda.so").exists
    ctx.symlink(api_include, "api_include")

    system_prefix = home == "/usr"
    extra_hdrs = ""
    extra_includes = ""
    linkopts = []
    if not system_prefix:
        # Outside /usr the compiler does not search these headers by itself, so Bazel must know them.
        ctx.symlink(home + "/include", "include")
        extra_hdrs = ' + glob(["include/ATen/**", "include/c10/**", "include/caffe2/**", "include/torch/**"], exclude = ["include/torch/csrc/api/include/**"])'
        extra_includes = ', "include"'
        linkopts += ["-L" + libdir, "-Wl,-rpath," + libdir]
    linkopts += ["-Wl,--no-as-needed", "-ltorch", "-ltorch_cpu", "-lc10", "-Wl,--as-needed"]
    cuda_linkopts = ["-Wl,--no-as-needed", "-ltorch_cuda", "-lc10_cuda", "-Wl,--as-needed"]

    ctx.file("WORKSPACE", "workspace(name = {})\n".format(repr(ctx.name)))
    ctx.file("BUILD.bazel", _LIBTORCH_BUILD.format(
        extra_hdrs = extra_hdrs,
        extra_includes = extra_includes,
        linkopts = repr(linkopts),
        cuda_linkopts = repr(cuda_linkopts),
        cuda_target = _CUDA_PRESENT if has_cuda else _CUDA_MISSING.format(libdir = libdir),
    ))
    ctx.file("defs.bzl", "LIBTORCH_HOME = {}\nLIBTORCH_HAS_CUDA = {}\n".format(repr(home), has_cuda))

libtorch_repository = repository_rule(
    implementation = _libtorch_repository_impl,
    environ = ["LIBTORCH_HOME"],
    local = True,
)
