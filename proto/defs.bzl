"""tdp_proto_library: C++ messages from .proto files with the system protoc (no rules_proto).

    tdp_proto_library(name = "tensor_proto", srcs = ["tdpolicy/tensor.proto"])

gives a cc_library whose header is included as "tdpolicy/tensor.pb.h". Import paths are relative
to the package holding the .proto files (`import "tdpolicy/tensor.proto";`).
"""

def tdp_proto_library(name, srcs, deps = [], visibility = None):
    """Generates <file>.pb.h/.pb.cc for each of `srcs` and wraps them in cc_library `name`.

    Args:
      name: the cc_library.
      srcs: .proto files in this package.
      deps: other tdp_proto_library targets whose .proto files these import.
      visibility: of the cc_library.
    """
    stems = [src[:-len(".proto")] for src in srcs]
    headers = [stem + ".pb.h" for stem in stems]
    sources = [stem + ".pb.cc" for stem in stems]
    native.filegroup(name = name + "_srcs", srcs = srcs + [dep + "_srcs" for dep in deps])
    package_dir = native.package_name() or "."
    # Inside another workspace (tdpolicy as an external repository) the sources and outputs live
    # under external/<name>/.
    repository = native.repository_name()
    if repository != "@":
        package_dir = "external/{}/{}".format(repository[1:], package_dir)
    native.genrule(
        name = name + "_protoc",
        srcs = srcs + [dep + "_srcs" for dep in deps],
        outs = headers + sources,
        cmd = "protoc --proto_path={dir} --cpp_out=$(GENDIR)/{dir} {files}".format(
            dir = package_dir,
            files = " ".join(["{}/{}".format(package_dir, src) for src in srcs]),
        ),
        message = "protoc " + " ".join(srcs),
    )
    native.cc_library(
        name = name,
        srcs = sources,
        hdrs = headers,
        includes = ["."],
        # Under --config=tsan, protobuf's layout as the uninstrumented library has it (//proto:tsan).
        deps = deps + ["@protobuf"] + select({
            "//proto:tsan": ["//proto:protobuf_tsan_abi"],
            "//conditions:default": [],
        }),
        visibility = visibility,
    )
