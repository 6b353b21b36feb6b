// CPU allocator tuning for acting loops: keeps glibc's malloc from handing freed tensor memory
// back to the kernel after every step.
//
//   int main() {
//     absl::Status tuned = tdp::actor::tune_cpu_allocator();   // once, before the loop
//     if (!tuned.ok()) std::cerr << tuned << "\n";               // not glibc: nothing changed
//     auto actor = tdp::actor::Actor::load("policies/pendulum_tanh_gaussian.pbtxt");
//     tdp::TensorDict obs = env.reset(/*seed=*/0);
//     for (int step = 0; step < steps; ++step) obs = env.step((*actor)->act(obs));
//   }
//
// Why: LibTorch allocates CPU tensors with malloc. Under glibc's defaults, a step that frees a
// few MB of activations (batch 1024 and up) leaves a free block at the top of the heap larger
// than the trim threshold, so free() shrinks the heap and the next step faults the same pages
// back in: measured at 2-4x the compute of a batch-1024 Gaussian actor. A trim threshold far
// above one step's working set and a fixed mmap threshold keep those pages mapped. The
// setting is process-wide, which is why it is a call the program makes and not something
// Actor::load does behind its back.
#pragma once

#include <absl/status/status.h>

#include <cstddef>

namespace tdp::actor {

// Sets glibc's M_TRIM_THRESHOLD to `retain_bytes` and M_MMAP_THRESHOLD to its maximum (32 MiB
// on 64-bit), so blocks up to that size come from the heap and freed memory up to
// `retain_bytes` stays mapped. FailedPrecondition where the C library is not glibc or refuses.
// OK without a change in a sanitizer build (ASan, TSan, MSan): the sanitizer's allocator keeps
// freed memory mapped by itself.
absl::Status tune_cpu_allocator(size_t retain_bytes = size_t{512} << 20);

}  // namespace tdp::actor
