"""LibTorch's headers parsed once per configuration, not once per file (a gcc precompiled header).

Parsing <torch/nn/module.h> and <ATen/ATen.h> is most of what compiling one of this project's
files costs (about 15 of its 20-25 s on a 2-core machine). `cc_precompiled_header` compiles a
header with the same compiler, configuration flags, include paths and defines as a cc_library of
the same configuration would, and provides it (a copy in its own folder, the `.gch` beside it) as
a dependency; a file compiled with `-include <its name>` starts from the parsed state. A target
that uses LibTorch depends on //third_party:torch_prelude (LibTorch with its headers precompiled)
and adds TORCH_PRELUDE_COPTS:

    load("//third_party:torch_prelude.bzl", "TORCH_PRELUDE_COPTS")
    cc_library(name = "x", srcs = ["x.cc"], copts = TORCH_PRELUDE_COPTS,
               deps = ["//third_party:torch_prelude"])

gcc uses the `.gch` only where nothing that affects it differs (its -m and -f options, the macros
the headers test); elsewhere it reads the header as written, so a mismatch costs time, never
correctness (-Winvalid-pch names it). Under clang (the fuzzers, the Bazel consumer workspace) no
`.gch` is made and nothing is prepended: those builds still check that every file includes what
it uses, which the prelude hides from gcc. A target that checks what a header pulls in
(tests/actor:actor_header_test) keeps @libtorch and no prelude.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _cc_precompiled_header_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    deps = cc_common.merge_cc_infos(cc_infos = [dep[CcInfo] for dep in ctx.attr.deps])
    header = ctx.actions.declare_file("{}/{}".format(ctx.label.name, ctx.file.hdr.basename))
    ctx.actions.symlink(output = header, target_file = ctx.file.hdr)
    outputs = [header]

    # Bazel's autoconfigured toolchain names clang "clang" and gcc "compiler".
    if cc_toolchain.compiler != "clang":
        feature_configuration = cc_common.configure_features(
            ctx = ctx,
            cc_toolchain = cc_toolchain,
            requested_features = ctx.features,
            unsupported_features = ctx.disabled_features,
        )
        context = deps.compilation_context
        gch = ctx.actions.declare_file(header.basename + ".gch", sibling = header)
        variables = cc_common.create_compile_variables(
            feature_configuration = feature_configuration,
            cc_toolchain = cc_toolchain,
            user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts + ["-x", "c++-header"],
            source_file = header.path,
            output_file = gch.path,
            include_directories = context.includes,
            quote_include_directories = context.quote_includes,
            system_include_directories = context.system_includes,
            framework_include_directories = context.framework_includes,
            preprocessor_defines = context.defines,
            use_pic = True,
        )
        action = "c++-compile"
        ctx.actions.run(
            executable = cc_common.get_tool_for_action(feature_configuration = feature_configuration, action_name = action),
            arguments = cc_common.get_memory_inefficient_command_line(
                feature_configuration = feature_configuration,
                action_name = action,
                variables = variables,
            ),
            env = cc_common.get_environment_variables(
                feature_configuration = feature_configuration,
                action_name = action,
                variables = variables,
            ),
            inputs = depset([header], transitive = [context.headers, cc_toolchain.all_files]),
            outputs = [gch],
            mnemonic = "CppPrecompileHeader",
            progress_message = "Precompiling %s" % ctx.file.hdr.short_path,
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

# The copts that read //third_party:torch_prelude's header (and so its .gch) before anything else.
TORCH_PRELUDE_COPTS = select({
    str(Label("//third_party:clang")): [],
    "//conditions:default": ["-Winvalid-pch", "-include", "tdp_torch_prelude.h"],
})
