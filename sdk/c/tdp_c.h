/* tdp_c.h: the C API of tdpolicy, a stable ABI over tdp::actor::Actor for simulators written in C,
 * C#, Rust, Python (ctypes) or any language that calls C. It loads a policy spec (text .pbtxt,
 * binary .pb or JSON .json) into an actor and maps caller-owned arrays of observations to
 * caller-owned arrays of actions and log-probs, batch by batch.
 *
 *   tdp_actor_options* options = NULL;
 *   tdp_actor* actor = NULL;
 *   tdp_options_create(&options);
 *   tdp_options_set_seed(options, 7);
 *   if (tdp_actor_load("policies/cartpole_categorical.pbtxt", options, &actor) != TDP_OK) {
 *     fprintf(stderr, "%s\n", tdp_last_error());        // names the file, the field, what was expected
 *     return 1;
 *   }
 *   float obs[2 * 4] = {0};                              // 2 environments, "observation" [4] float32
 *   int64_t action[2];                                   // categorical "action" [] int64
 *   float log_prob[2];
 *   tdp_input in[] = {{"observation", TDP_FLOAT32, obs, 8}};
 *   tdp_output out[] = {{"action", TDP_INT64, action, 2}, {"action_log_prob", TDP_FLOAT32, log_prob, 2}};
 *   tdp_actor_act(actor, 2, in, 1, out, 2, TDP_INTERACTION_ACTOR);
 *   tdp_actor_free(actor);
 *   tdp_options_free(options);
 *
 * Rules:
 * - Every function that can fail returns a tdp_status (TDP_OK = 0). The message of the failure
 *   is tdp_last_error(): per thread, set by every tdp_ function that returns a tdp_status ("" after
 *   a success), and valid until the next such call on the same thread. No C++ exception crosses
 *   this API (out of memory included: TDP_OUT_OF_MEMORY).
 * - Handles are opaque; each *_create / tdp_actor_load is paired with its *_free (NULL is allowed).
 * - Keys are the spec's, nested levels joined by "/" ("next/observation"). Arrays are row-major,
 *   batch first: an input of declared shape [4] at batch 2 holds 2 * 4 elements. Element counts
 *   are checked against the declared shapes; a mismatch is an error naming the key.
 *   A batch whose batch x elements-per-environment does not fit a size_t is TDP_INVALID_ARGUMENT.
 * - Non-finite and extreme inputs: a NaN, a +-Inf or a value beyond +-1e18 in a floating-point
 *   input is TDP_INVALID_ARGUMENT naming the key and the first bad row, on every backend and in
 *   tdp_actor_act_flat (actor.h: ActorOptions::check_finite, kLargestInput; the C API always checks).
 * - An interaction type the policy's distribution has no value for (MEDIAN or MEAN of a
 *   categorical) is TDP_INVALID_ARGUMENT naming the distribution's method. A device other than
 *   "cpu" or "cuda[:n]" (e.g. "meta") is a short load error naming it.
 * - Names, shapes and strings returned by an actor live as long as the actor.
 * - tdp_actor_act, tdp_actor_act_flat and tdp_actor_reset may be called from several threads at
 *   once on one actor (see actor.h for the recurrent-state and random-stream rules: threads sharing
 *   a recurrent actor share its kept state); tdp_actor_free may not run concurrently with any other
 *   call on the same actor. Options handles are not synchronized.
 * - Compatibility: functions and enum values are only ever added. The structs tdp_input and
 *   tdp_output keep their layout.
 */
#ifndef TDPOLICY_SDK_C_TDP_C_H_
#define TDPOLICY_SDK_C_TDP_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TDP_C_EXPORT __attribute__((visibility("default")))
#else
#define TDP_C_EXPORT
#endif

/* The version of this API: major changes only remove or change something (never, so far). */
#define TDP_C_API_VERSION_MAJOR 0
#define TDP_C_API_VERSION_MINOR 2

typedef enum tdp_status {
  TDP_OK = 0,
  TDP_INVALID_ARGUMENT = 1,    /* a null pointer, a wrong size or dtype, an unknown key or name */
  TDP_NOT_FOUND = 2,           /* a missing file */
  TDP_FAILED_PRECONDITION = 3, /* e.g. tdp_actor_act_flat on a policy with no fused plan */
  TDP_OUT_OF_RANGE = 4,        /* an index past the end */
  TDP_RESOURCE_EXHAUSTED = 5,  /* a spec over a loader limit */
  TDP_OUT_OF_MEMORY = 6,       /* an allocation failed */
  TDP_INTERNAL = 7,            /* any other failure inside the SDK or LibTorch */
  TDP_UNIMPLEMENTED = 8,       /* e.g. a dtype the C API cannot express */
  TDP_PERMISSION_DENIED = 9    /* a file that cannot be read */
} tdp_status;

/* Element types, as the spec's DType. */
typedef enum tdp_dtype {
  TDP_FLOAT32 = 1,
  TDP_FLOAT64 = 2,
  TDP_FLOAT16 = 3,
  TDP_BFLOAT16 = 4,
  TDP_INT64 = 5,
  TDP_INT32 = 6,
  TDP_INT16 = 7,
  TDP_INT8 = 8,
  TDP_UINT8 = 9,
  TDP_BOOL = 10 /* one byte per element, 0 or 1 */
} tdp_dtype;

/* How a probabilistic module takes its value (tensordict's InteractionType). */
typedef enum tdp_interaction {
  TDP_INTERACTION_ACTOR = -1,  /* per call: the actor's own type (tdp_options_set_interaction) */
  TDP_INTERACTION_MODULE = 0,  /* each probabilistic module's default_interaction_type */
  TDP_INTERACTION_RANDOM = 1,
  TDP_INTERACTION_MODE = 2,
  TDP_INTERACTION_MEDIAN = 3,
  TDP_INTERACTION_MEAN = 4,
  TDP_INTERACTION_DETERMINISTIC = 5
} tdp_interaction;

/* Which implementation runs a call (actor.h: Backend). */
typedef enum tdp_backend {
  TDP_BACKEND_AUTO = 0,     /* the fused CPU plan at small batches when the policy lowers, else LibTorch */
  TDP_BACKEND_LIBTORCH = 1, /* always LibTorch */
  TDP_BACKEND_FUSED = 2     /* the fused plan; a policy that does not lower is a load error */
} tdp_backend;

typedef struct tdp_actor_options tdp_actor_options;
typedef struct tdp_actor tdp_actor;

/* One input array: `count` elements of `dtype` for key `name`. */
typedef struct tdp_input {
  const char* name;
  tdp_dtype dtype;
  const void* data;
  size_t count;
} tdp_input;

/* One output array the caller provides; filled by tdp_actor_act. */
typedef struct tdp_output {
  const char* name;
  tdp_dtype dtype;
  void* data;
  size_t count;
} tdp_output;

/* "0.1.0": the library's version. */
TDP_C_EXPORT const char* tdp_version(void);
/* The message of this thread's last tdp_ call that returns a tdp_status ("" after a success). */
TDP_C_EXPORT const char* tdp_last_error(void);
/* "TDP_OK", "TDP_INVALID_ARGUMENT", ...; "unknown tdp_status" for other values. */
TDP_C_EXPORT const char* tdp_status_name(tdp_status status);
/* "float32", "int64", ...; NULL for other values. */
TDP_C_EXPORT const char* tdp_dtype_name(tdp_dtype dtype);
/* Bytes per element; 0 for other values. */
TDP_C_EXPORT size_t tdp_dtype_size(tdp_dtype dtype);

/* ---- Options (defaults: device "cpu", backend AUTO, seed 0, interaction RANDOM, self tests run,
 * composite log-probs as the environment says (COMPOSITE_LP_AGGREGATE), fused_max_batch 16384). */
TDP_C_EXPORT tdp_status tdp_options_create(tdp_actor_options** options);
TDP_C_EXPORT void tdp_options_free(tdp_actor_options* options);
/* "cpu", "cuda", "cuda:1" (LibTorch's device strings). Checked here; usability at load. */
TDP_C_EXPORT tdp_status tdp_options_set_device(tdp_actor_options* options, const char* device);
TDP_C_EXPORT tdp_status tdp_options_set_backend(tdp_actor_options* options, tdp_backend backend);
TDP_C_EXPORT tdp_status tdp_options_set_seed(tdp_actor_options* options, uint64_t seed);
/* The actor's interaction type; TDP_INTERACTION_MODULE: each module's default. */
TDP_C_EXPORT tdp_status tdp_options_set_interaction(tdp_actor_options* options, tdp_interaction type);
/* Recompute the spec's self tests at load (default 1). */
TDP_C_EXPORT tdp_status tdp_options_set_run_self_tests(tdp_actor_options* options, int run);
/* 1: a composite distribution's log-probs summed into "sample_log_prob"; 0: one per part. */
TDP_C_EXPORT tdp_status tdp_options_set_composite_lp_aggregate(tdp_actor_options* options, int aggregate);
/* Under TDP_BACKEND_AUTO, the largest batch the fused plan runs (>= 0). */
TDP_C_EXPORT tdp_status tdp_options_set_fused_max_batch(tdp_actor_options* options, int64_t batch);

/* ---- Actors */
/* Loads, validates and builds the spec at `spec_path` (options may be NULL: the defaults), runs
 * its self tests if asked, and probes the policy once at batch 1 (deterministic, its own random
 * stream untouched) to learn its output shapes and dtypes. */
TDP_C_EXPORT tdp_status tdp_actor_load(const char* spec_path, const tdp_actor_options* options, tdp_actor** actor);
TDP_C_EXPORT void tdp_actor_free(tdp_actor* actor);

/* Inputs are the spec's declared inputs (a recurrent state among them may be left out: the actor
 * then keeps it per environment; so may a recurrent module's is_init: false when absent).
 * Outputs are the spec's output keys and the recurrent state's next value (the state key
 * itself, or "next/<key>" for TorchRL's LSTMModule / GRUModule). */
TDP_C_EXPORT tdp_status tdp_actor_num_inputs(const tdp_actor* actor, size_t* count);
TDP_C_EXPORT tdp_status tdp_actor_num_outputs(const tdp_actor* actor, size_t* count);
/* Key, dtype and per-environment shape (without the batch dim) of input or output `index`. Any of
 * name, dtype, dims, ndim may be NULL when not wanted. */
TDP_C_EXPORT tdp_status tdp_actor_input(const tdp_actor* actor, size_t index, const char** name, tdp_dtype* dtype,
                                        const int64_t** dims, size_t* ndim);
TDP_C_EXPORT tdp_status tdp_actor_output(const tdp_actor* actor, size_t index, const char** name, tdp_dtype* dtype,
                                         const int64_t** dims, size_t* ndim);
/* Elements per environment of the input or output named `name` (product of its shape). */
TDP_C_EXPORT tdp_status tdp_actor_element_count(const tdp_actor* actor, const char* name, size_t* count);
/* The spec's name and version. */
TDP_C_EXPORT const char* tdp_actor_name(const tdp_actor* actor);
TDP_C_EXPORT const char* tdp_actor_spec_version(const tdp_actor* actor);

/* Runs the policy on `batch` environments. Every declared input must be in `inputs` (a recurrent
 * state or an is_init may be left out), with its declared dtype and batch * per-env elements. `outputs` names
 * any of the actor's outputs (not necessarily all), each with the output's dtype and
 * batch * per-env elements; the others are computed and dropped. On failure the output arrays
 * may be partly written. */
TDP_C_EXPORT tdp_status tdp_actor_act(tdp_actor* actor, int64_t batch, const tdp_input* inputs, size_t num_inputs,
                                      const tdp_output* outputs, size_t num_outputs, tdp_interaction type);

/* The flat float32 API (actor.h: act_flat), for single-input policies without recurrent state or
 * composite distribution that lower to the fused CPU plan: observation [batch,
 * flat_observation_size], action [batch, flat_action_size] (categorical indices as floats),
 * log_prob [batch] (or [batch, flat_action_size] for a per-element normal; may be NULL). Any other
 * policy is TDP_FAILED_PRECONDITION with the reason (recurrent and composite ones run on the plan
 * through tdp_actor_act). */
TDP_C_EXPORT tdp_status tdp_actor_flat_sizes(const tdp_actor* actor, int64_t* observation_size, int64_t* action_size);
TDP_C_EXPORT tdp_status tdp_actor_act_flat(tdp_actor* actor, int64_t batch, const float* observation, float* action,
                                           float* log_prob, tdp_interaction type);

/* Recurrent policies: zeroes the kept state of the environments whose `env_mask` byte is nonzero
 * (`batch` bytes: the batch of the last calls). env_mask NULL forgets the state of every
 * environment (the next call starts from zeros at any batch). A policy without state: no-op. */
TDP_C_EXPORT tdp_status tdp_actor_reset(tdp_actor* actor, const uint8_t* env_mask, int64_t batch);

/* ---- Per-call seeds
 * Runs one call like tdp_actor_act, but samples from a random stream of its own seeded with `seed`
 * instead of the actor's: the same inputs and seed give the same outputs, whatever calls ran
 * before, and they equal the first call of an actor loaded with tdp_options_set_seed(seed) on the
 * LibTorch backend. The actor's own stream is untouched. */
TDP_C_EXPORT tdp_status tdp_actor_act_seeded(tdp_actor* actor, int64_t batch, const tdp_input* inputs,
                                             size_t num_inputs, const tdp_output* outputs, size_t num_outputs,
                                             tdp_interaction type, uint64_t seed);

/* ---- Batching actors (sdk/actor/batching_actor.h): one policy shared by many threads. Each
 * thread calls tdp_batching_actor_act with its own rows; a worker thread merges the calls pending
 * at once into one call of the policy (at most max_batch_size rows, waiting at most max_delay_us
 * microseconds for others to join) and hands each caller its rows back. Calls of different
 * interaction types are never merged. Policies with recurrent state are served in their stateless
 * form only: every state key must be among the inputs.
 *
 *   tdp_batching_actor* batcher = NULL;
 *   tdp_batching_actor_load("policies/cartpole_categorical.pbtxt", options, 64, 10000, &batcher);
 *   tdp_batching_actor_act(batcher, 1, in, 1, out, 2, TDP_INTERACTION_RANDOM);  // from any thread
 *   tdp_batching_stats stats;
 *   tdp_batching_actor_stats(batcher, &stats);                                   // stats.batches
 *   tdp_batching_actor_free(batcher);
 */
typedef struct tdp_batching_actor tdp_batching_actor;

/* What the batcher did so far (BatchingStats). */
typedef struct tdp_batching_stats {
  int64_t requests;         /* calls that joined a batch */
  int64_t rejected;         /* calls refused before joining one (bad inputs, full queue) */
  int64_t batches;          /* calls of the policy */
  int64_t failed_batches;   /* merged calls that failed (their requests were then run one by one) */
  int64_t retried_requests; /* requests run alone after their merged call failed */
  int64_t rows;             /* rows run */
  int64_t largest_batch;    /* most rows in one call of the policy */
  int64_t max_batch_size;   /* the option */
} tdp_batching_stats;

/* Loads the spec like tdp_actor_load (options may be NULL) and starts the batcher's worker.
 * max_batch_size >= 1 (a call with more rows is an error); max_delay_us >= 0. */
TDP_C_EXPORT tdp_status tdp_batching_actor_load(const char* spec_path, const tdp_actor_options* options,
                                                int64_t max_batch_size, int64_t max_delay_us,
                                                tdp_batching_actor** batcher);
/* Runs the calls already accepted, stops the worker and frees the batcher and its actor. */
TDP_C_EXPORT void tdp_batching_actor_free(tdp_batching_actor* batcher);
/* The actor the batcher calls, owned by the batcher: for the metadata queries (tdp_actor_input,
 * ...) and for direct calls (tdp_actor_act_seeded), which do not go through the batcher. */
TDP_C_EXPORT tdp_actor* tdp_batching_actor_actor(tdp_batching_actor* batcher);
/* tdp_actor_act through the batcher: blocks until this call's rows are computed. `type`
 * TDP_INTERACTION_ACTOR is the actor's own type; TDP_INTERACTION_MODULE is refused (load the
 * actor with tdp_options_set_interaction(TDP_INTERACTION_MODULE) and pass TDP_INTERACTION_ACTOR). */
TDP_C_EXPORT tdp_status tdp_batching_actor_act(tdp_batching_actor* batcher, int64_t batch, const tdp_input* inputs,
                                               size_t num_inputs, const tdp_output* outputs, size_t num_outputs,
                                               tdp_interaction type);
TDP_C_EXPORT tdp_status tdp_batching_actor_stats(const tdp_batching_actor* batcher, tdp_batching_stats* stats);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TDPOLICY_SDK_C_TDP_C_H_ */
