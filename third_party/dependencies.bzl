"""tdpolicy_dependencies(): what another Bazel workspace declares to build against tdpolicy.

In the other workspace's WORKSPACE:

    local_repository(name = "tdpolicy", path = "/path/to/tdpolicy")   # or git_repository
    load("@tdpolicy//third_party:dependencies.bzl", "tdpolicy_dependencies")
    tdpolicy_dependencies()

then `deps = ["@tdpolicy//sdk/actor"]` (C++) or `["@tdpolicy//sdk/c:tdp_c"]` (C). Run Bazel through
tdpolicy's bazelw (`/path/to/tdpolicy/bazelw build //...` from the other workspace): it installs the
Debian packages and the venv, and sets LIBTORCH_HOME and TDP_VENV, which these repositories read.
The other workspace's .bazelrc needs `build --cxxopt=-std=c++17` (and, with Debian's
bazel-bootstrap, `build --spawn_strategy=local`). Repositories the other workspace already declares
(say, its own rules_cc) are left alone.
"""

load("//third_party:system_libs.bzl", "libtorch_repository", "mujoco_repository", "pkg_config_library", "python_venv", "torch_python")

def _stand_in_impl(ctx):
    # One of tdpolicy's offline stand-ins (third_party/<name>), linked into its own repository.
    source = ctx.path(ctx.attr.workspace_file).dirname
    for child in source.readdir():
        ctx.symlink(child, child.basename)

_stand_in = repository_rule(
    implementation = _stand_in_impl,
    attrs = {"workspace_file": attr.label(mandatory = True, allow_single_file = True)},
    local = True,
)

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def tdpolicy_dependencies():
    """Declares the repositories tdpolicy's targets use: LibTorch, the venv's python3, MuJoCo with
    Gymnasium's task models and torch's Python extension headers (all from the venv), Debian's
    Abseil, protobuf, gRPC, GoogleTest, Google Benchmark, zlib, spdlog, Eigen, OpenSSL's libcrypto and
    cairo, and the offline Bazel stand-ins. Repositories are fetched only when a target being built
    uses them, so a workspace that builds only the SDK never needs cairo (only the sample agents'
    plots use it)."""
    for name in ["rules_cc", "rules_java", "rules_proto", "remote_coverage_tools"]:
        _maybe(_stand_in, name, workspace_file = Label("//third_party/" + name + ":WORKSPACE"))
    _maybe(native.local_repository, "platforms", path = "/usr/share/bazel/platforms")
    _maybe(libtorch_repository, "libtorch")
    _maybe(python_venv, "python_venv")
    _maybe(python_venv, "serving_venv", variable = "TDP_SERVING_VENV")
    _maybe(mujoco_repository, "mujoco")
    _maybe(torch_python, "torch_python")
    _maybe(
        pkg_config_library,
        "absl",
        package = "libabsl-dev",
        targets = {"absl": [
            "absl_flags",
            "absl_flags_parse",
            "absl_flat_hash_map",
            "absl_flat_hash_set",
            "absl_hash",
            "absl_status",
            "absl_statusor",
            "absl_str_format",
            "absl_strings",
            "absl_synchronization",
            "absl_time",
        ]},
    )
    _maybe(pkg_config_library, "protobuf", package = "libprotobuf-dev", targets = {"protobuf": ["protobuf"]})
    # gRPC 1.51 (built on the same protobuf 3.21 and Abseil): the Open Inference Protocol client
    # (sdk/actor:remote_actor) and its protoc plugin (proto/defs.bzl, grpc = True).
    _maybe(
        pkg_config_library,
        "grpc",
        package = "libgrpc++-dev",
        targets = {"grpc": ["grpc++"]},
        tools = {"grpc_cpp_plugin": "grpc_cpp_plugin"},
        tools_package = "protobuf-compiler-grpc",
    )
    _maybe(
        pkg_config_library,
        "gtest",
        package = "libgmock-dev",
        targets = {"gtest": ["gtest", "gmock"], "gtest_main": ["gtest_main", "gmock"]},
    )
    _maybe(pkg_config_library, "benchmark", package = "libbenchmark-dev", targets = {"benchmark": ["benchmark"]})
    _maybe(pkg_config_library, "zlib", package = "zlib1g-dev", targets = {"zlib": ["zlib"]})
    _maybe(pkg_config_library, "spdlog", package = "libspdlog-dev", targets = {"spdlog": ["spdlog", "fmt"]})
    _maybe(pkg_config_library, "eigen", package = "libeigen3-dev", targets = {"eigen": ["eigen3"]})
    _maybe(pkg_config_library, "openssl", package = "libssl-dev", targets = {"crypto": ["libcrypto"]})
    _maybe(pkg_config_library, "cairo", package = "libcairo2-dev", targets = {"cairo": ["cairo"]})
