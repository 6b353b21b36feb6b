"""-fopenmp for code that calls at::parallel_for.

LibTorch's headers inline at::parallel_for as OpenMP pragmas, which run in parallel only in code
compiled with OpenMP (against the libgomp LibTorch ships and loads, so one runtime and one thread
setting). Not under --config=tsan: TSan does not see the uninstrumented libgomp's
synchronization (tests/README.md, Sanitizers), so there the loops run serially.
"""

OPENMP_FLAGS = select({
    "//proto:tsan": [],
    "//conditions:default": ["-fopenmp"],
})
