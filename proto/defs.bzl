"""tdp_proto_library: C++ messages from .proto files with the system protoc (no rules_proto).

    tdp_proto_library(name = "tensor_proto", srcs = ["tdpolicy/tensor.proto"])

gives a cc_library whose header is included as "tdpolicy/tensor.pb.h". Import paths are relative
to the package holding the .proto files (`import "tdpolicy/tensor.proto";`). With `grpc = True`
the services get gRPC stubs too (Debian's grpc_cpp_plugin): "inference/grpc_predict_v2.grpc.pb.h".
"""

def tdp_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    """Generates <file>.pb.h/.pb.cc for each of `srcs` and wraps them in cc_library `name`.

    Args:
      name: the cc_library.
      srcs: .proto files in this package.
      deps: other tdp_proto_library targets whose .proto files these import.
      grpc: also generate <file>.grpc.pb.h/.grpc.pb.cc (service stubs) and link gRPC.
      visibility: of the cc_library.
    """
    stems = [src[:-len(".proto")] for src in srcs]
    headers = [stem + ".pb.h" for stem in stems]
    sources = [stem + ".pb.cc" for stem in stems]
    if grpc:
        headers += [stem + ".grpc.pb.h" for stem in stems]
        sources += [stem + ".grpc.pb.cc" for stem in stems]
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
        tools = ["@grpc//:grpc_cpp_plugin"] if grpc else [],
        cmd = "protoc --proto_path={dir} --cpp_out=$(GENDIR)/{dir} {grpc}{files}".format(
            dir = package_dir,
            grpc = ("--plugin=protoc-gen-grpc=$(location @grpc//:grpc_cpp_plugin) " +
                    "--grpc_out=$(GENDIR)/{} ").format(package_dir) if grpc else "",
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
        deps = deps + ["@protobuf"] + (["@grpc"] if grpc else []) + select({
            "//proto:tsan": ["//proto:protobuf_tsan_abi"],
            "//conditions:default": [],
        }),
        visibility = visibility,
    )
