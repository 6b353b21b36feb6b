"""tdp_fuzzer: one libFuzzer entry point, built two ways.

`name` is the fuzz binary. Under --config=fuzz (clang, --define=tdp_fuzz=true) it links libFuzzer
(-fsanitize=fuzzer) and `fuzz_srcs` (a custom mutator); in the default gcc build it links
replay_main.cc instead, so it still builds with //... and replays files given on its command line.
`name`_replay_test replays the seed corpus and every crasher kept in regressions/`name`/ in the
normal test suite (gcc, no clang needed).
"""

load("//third_party:torch_prelude.bzl", "TORCH_PRELUDE_COPTS")

def tdp_fuzzer(name, srcs, deps, seeds, seed_args, local_defines = [], fuzz_srcs = []):
    regressions = native.glob(["regressions/%s/*" % name])

    # The entry point, compiled once for the binary and the replay test alike.
    native.cc_library(
        name = name + "_entry",
        testonly = True,
        srcs = srcs,
        copts = TORCH_PRELUDE_COPTS,
        local_defines = local_defines,
        # LLVMFuzzerTestOneInput is what libFuzzer's main (or replay_main.cc) calls: keep it.
        alwayslink = True,
        deps = deps + ["//third_party:torch_prelude"],
    )
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = select({
            ":fuzzing": fuzz_srcs,
            "//conditions:default": ["replay_main.cc"],
        }),
        # Static: the SDK's objects go into the binary, so the Debian libraries they use (Abseil's
        # hash) are linked as needed by them (LibTorch's linkopts leave --as-needed on).
        linkstatic = True,
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = [name + "_entry"],
    )
    native.cc_test(
        name = name + "_replay_test",
        size = "small",
        srcs = ["replay_main.cc"],
        linkstatic = True,
        args = seed_args + (["tests/fuzz/regressions/" + name] if regressions else []),
        data = seeds + regressions,
        deps = [name + "_entry"],
    )
