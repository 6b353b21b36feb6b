"""Rules for //sdk/install: the SDK's public headers and its object files.

public_headers: the headers a library's users include (the `hdrs` of every cc_library of this
workspace that `deps` reach, generated protobuf headers included) and `<name>.txt`, listing them.

    public_headers(name = "headers", deps = ["//sdk/actor", "//sdk/c:tdp_c"])
"""

PublicHeadersInfo = provider(fields = ["headers"])

def _collect_impl(target, ctx):
    own = []
    # A precompiled header (//third_party:torch_prelude) is a build aid, not a header of the SDK.
    if CcInfo in target and target.label.workspace_name == "" and ctx.rule.kind != "cc_precompiled_header":
        cc = target[CcInfo].compilation_context
        own = cc.direct_public_headers
    transitive = [dep[PublicHeadersInfo].headers for dep in getattr(ctx.rule.attr, "deps", []) if PublicHeadersInfo in dep]
    return [PublicHeadersInfo(headers = depset(own, transitive = transitive))]

_collect = aspect(implementation = _collect_impl, attr_aspects = ["deps"])

def _public_headers_impl(ctx):
    headers = depset(transitive = [dep[PublicHeadersInfo].headers for dep in ctx.attr.deps])
    # One line per header: its path among the runfiles (the workspace-relative path).
    manifest = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.write(manifest, "".join([f.short_path + "\n" for f in headers.to_list()]))
    files = depset([manifest], transitive = [headers])
    return [DefaultInfo(files = files, runfiles = ctx.runfiles(transitive_files = files))]

public_headers = rule(
    implementation = _public_headers_impl,
    attrs = {"deps": attr.label_list(aspects = [_collect], providers = [CcInfo])},
)

def _sdk_objects_impl(ctx):
    objects = []
    for dep in ctx.attr.deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            if linker_input.owner.workspace_name != "":
                continue
            for library in linker_input.libraries:
                objects.extend(library.pic_objects or library.objects or [])
    return [DefaultInfo(files = depset(objects))]

# The (PIC) object files of this workspace's libraries that `deps` link, so that a
# cc_binary(linkshared = 1) can list them in `srcs` and hold every symbol of the SDK, not only
# those something in the binary refers to (the linker drops unreferenced library members).
sdk_objects = rule(
    implementation = _sdk_objects_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)
