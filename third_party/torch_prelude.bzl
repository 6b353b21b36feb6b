"""LibTorch's headers parsed once per configuration, not once per file (a precompiled header).

Parsing <torch/nn/module.h> and <ATen/ATen.h> is most of what compiling one of this project's
files costs (about 15 of its 20-25 s on a 2-core machine). `cc_precompiled_header` compiles a
header with the same compiler, configuration flags, include paths and defines as a cc_library of
the same configuration would, and provides it (a copy in its own folder, the `.gch` folder of
precompiled variants beside it) as a dependency; a file compiled with `-include <it>` starts from
the parsed state. A target that uses LibTorch depends on //third_party:torch_prelude (LibTorch
with its headers precompiled) and adds TORCH_PRELUDE_COPTS:

    load("//third_party:torch_prelude.bzl", "TORCH_PRELUDE_COPTS")
    cc_library(name = "x", srcs = ["x.cc"], copts = TORCH_PRELUDE_COPTS,
               deps = ["//third_party:torch_prelude"])

gcc uses a variant only where nothing that affects it differs (its -m and -f options, the macros
the headers test); elsewhere it reads the header as written, so a mismatch costs time, never
correctness (`--copt=-Winvalid-pch` names it; under -c opt it also names the variant each file
passes over). clang (the fuzzers, the Bazel consumer workspace) refuses to compile a file that no
variant fits ("no suitable precompiled header file found"): every target with these copts
compiles with the configuration's flags alone, as the variants do. clang also refuses one made
before an upgrade of the compiler or the system headers, which Bazel does not track ("has been
modified since the precompiled header was built"): `./bazelw clean` rebuilds it. Since every SDK file is
compiled after the prelude, a missing LibTorch include shows only where a public header is used
without it: a target that checks what a header pulls in (tests/actor:actor_header_test) keeps
@libtorch and no prelude, as the CMake consumer of an install does.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _shell_quote(word):
    return "'" + word.replace("'", "'\\''") + "'"

def _cc_precompiled_header_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    deps = cc_common.merge_cc_infos(cc_infos = [dep[CcInfo] for dep in ctx.attr.deps])
    header = ctx.actions.declare_file("{}/{}".format(ctx.label.name, ctx.file.hdr.basename))
    ctx.actions.symlink(output = header, target_file = ctx.file.hdr)
    outputs = [header]

    # Bazel's autoconfigured toolchain names clang "clang" and gcc "compiler".
    clang = cc_toolchain.compiler == "clang"
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    context = deps.compilation_context
    action = "c++-compile"

    # -MD records in the precompiled header the headers it was made of, which each file's dependency
    # output then lists (gcc: with -fpch-deps; clang always): Bazel recompiles the file when one of
    # them changes.
    flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts + ["-x", "c++-header", "-MD", "-MF", "/dev/null"]
    if clang:
        # clang records the path of every header it read and checks them when a file uses the
        # precompiled header. Relocatable, the paths under the execution root are recorded relative
        # to it (the files that use it say where that is: "-isysroot ." in TORCH_PRELUDE_COPTS), so
        # a sandbox or another output base finds them; no timestamps, so a fresh checkout of the
        # same header is the same header.
        flags = flags + ["-Xclang", "-fno-pch-timestamp", "-Xclang", "-relocatable-pch"]

    # The compiler reads every precompiled header in the `.gch` folder and uses the first that fits
    # the file's compile (clang insists on one that fits). Bazel compiles position-independent code
    # everywhere except for the binaries of -c opt (position-independent executables, gcc's
    # default on Debian), which also compiles each library for its shared form.
    gch = ctx.actions.declare_directory(header.basename + ".gch", sibling = header)
    variants = [("pic", True)] + ([("pie", False)] if ctx.var["COMPILATION_MODE"] == "opt" else [])
    variables = [cc_common.create_compile_variables(
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        user_compile_flags = flags,
        source_file = header.path,
        output_file = "{}/{}".format(gch.path, variant),
        include_directories = context.includes,
        quote_include_directories = context.quote_includes,
        system_include_directories = context.system_includes,
        framework_include_directories = context.framework_includes,
        preprocessor_defines = context.defines,
        use_pic = use_pic,
    ) for variant, use_pic in variants]
    tool = cc_common.get_tool_for_action(feature_configuration = feature_configuration, action_name = action)
    commands = []
    for variant_variables in variables:
        command_line = [tool] + cc_common.get_memory_inefficient_command_line(
            feature_configuration = feature_configuration,
            action_name = action,
            variables = variant_variables,
        )
        words = [_shell_quote(word) for word in command_line]
        if clang:
            # The root that the recorded paths are relative to: this action's working directory.
            words += ["-Xclang", "-isysroot", "-Xclang", '"$PWD"']
        commands.append(" ".join(words) + " &")
    ctx.actions.run_shell(
        command = "\n".join(["set -e", "mkdir -p " + _shell_quote(gch.path)] + commands +
                            ["for job in $(jobs -p); do wait $job; done"]),
        # The toolchain's environment for a compile, the same for every variant.
        env = cc_common.get_environment_variables(
            feature_configuration = feature_configuration,
            action_name = action,
            variables = variables[0],
        ),
        inputs = depset([header], transitive = [context.headers, cc_toolchain.all_files]),
        outputs = [gch],
        mnemonic = "CppPrecompileHeader",
        progress_message = "Precompiling %s (%s)" % (ctx.file.hdr.short_path, ", ".join([v for v, _ in variants])),
    )
    outputs.append(gch)

    own = CcInfo(compilation_context = cc_common.create_compilation_context(
        headers = depset(outputs),
        includes = depset([header.dirname]),
    ))
    return [
        DefaultInfo(files = depset(outputs)),
        cc_common.merge_cc_infos(direct_cc_infos = [own], cc_infos = [deps]),
    ]

cc_precompiled_header = rule(
    implementation = _cc_precompiled_header_impl,
    attrs = {
        "hdr": attr.label(allow_single_file = [".h"], mandatory = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)

# Where //third_party:torch_prelude puts its header, from the execution root: clang's driver looks
# for the precompiled header beside the path -include names (gcc searches the include path).
_PRELUDE_HEADER = "tdp_torch_prelude.h"
_PRELUDE_PATH = "$(BINDIR)/" + "/".join([part for part in [
    Label("//third_party:BUILD.bazel").workspace_root,
    "third_party/torch_prelude",
    _PRELUDE_HEADER,
] if part])

# The copts that read //third_party:torch_prelude's header (and so its precompiled form) before
# anything else. clang resolves the paths the precompiled header recorded against "-isysroot ."
# (the execution root; its system headers are found as without it).
TORCH_PRELUDE_COPTS = select({
    str(Label("//third_party:clang")): ["-include", _PRELUDE_PATH, "-Xclang", "-isysroot", "-Xclang", "."],
    "//conditions:default": ["-fpch-deps", "-include", _PRELUDE_HEADER],
})
