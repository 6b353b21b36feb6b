// ThreadSanitizer's suppressions for the tests run under --config=tsan (.bazelrc), compiled in
// so that no path has to be passed through TSAN_OPTIONS. TSan calls this function, when the
// binary defines it, before it reads TSAN_OPTIONS' own suppressions file.
//
// Only LibTorch is suppressed: the wheel's libtorch_cpu.so and libc10.so are not instrumented, so
// TSan sees the synchronization they do with inlined atomics (reference counts of tensors and
// storages, the dispatcher's tables) on one side only and reports races between an instrumented
// access in our code and a release it never saw. A race whose stack has a frame in our own code
// (sdk/) is still reported unless LibTorch's frame is the one TSan names first.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgomp.so.1\n"
         "race:libtorch_cpu.so\n"
         "race:libc10.so\n";
}
