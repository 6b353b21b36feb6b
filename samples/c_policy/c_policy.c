/* c_policy: a CartPole simulator written in C that acts through the tdpolicy C API (sdk/c/tdp_c.h).
 *
 *   ./bazelw run //samples/c_policy -- policies/cartpole_categorical.pbtxt 20
 *   ./bazelw run //samples/c_policy -- policies/recurrent_gru.pbtxt 20
 *
 * Arguments: a policy spec whose input "observation" is float32 [4] and whose output "action" is
 * an int64 in {0, 1} (default policies/cartpole_categorical.pbtxt), and how many episodes to run
 * (default 20). It steps 8 environments together, resets the policy's kept recurrent state for the
 * environments that finished (a no-op for a policy without one), and prints the mean return.
 * Every error is printed with tdp_last_error() and exits with status 1.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/c/tdp_c.h"

enum { kEnvs = 8, kObs = 4, kMaxSteps = 500 };

/* Gym's CartPole-v1 equations (Euler integration). */
typedef struct {
  float state[kObs]; /* x, x_dot, theta, theta_dot */
  int steps;
  double ret;
} CartPole;

static float uniform(unsigned* seed) { return 0.1f * ((float)rand_r(seed) / (float)RAND_MAX) - 0.05f; }

static void cartpole_reset(CartPole* env, unsigned* seed) {
  for (int i = 0; i < kObs; ++i) env->state[i] = uniform(seed);
  env->steps = 0;
  env->ret = 0.0;
}

/* Returns 1 when the episode ended (terminated or truncated at 500 steps). */
static int cartpole_step(CartPole* env, int64_t action) {
  const float gravity = 9.8f, masscart = 1.0f, masspole = 0.1f, length = 0.5f, tau = 0.02f;
  const float total_mass = masscart + masspole, polemass_length = masspole * length;
  float* s = env->state;
  const float force = action == 1 ? 10.0f : -10.0f;
  const float costheta = cosf(s[2]), sintheta = sinf(s[2]);
  const float temp = (force + polemass_length * s[3] * s[3] * sintheta) / total_mass;
  const float thetaacc =
      (gravity * sintheta - costheta * temp) / (length * (4.0f / 3.0f - masspole * costheta * costheta / total_mass));
  const float xacc = temp - polemass_length * thetaacc * costheta / total_mass;
  s[0] += tau * s[1];
  s[1] += tau * xacc;
  s[2] += tau * s[3];
  s[3] += tau * thetaacc;
  env->steps += 1;
  env->ret += 1.0;
  const float theta_threshold = 12.0f * 2.0f * 3.14159265f / 360.0f;
  return fabsf(s[0]) > 2.4f || fabsf(s[2]) > theta_threshold || env->steps >= kMaxSteps;
}

static int fail(const char* what, tdp_status status) {
  fprintf(stderr, "c_policy: %s failed (%s): %s\n", what, tdp_status_name(status), tdp_last_error());
  return 1;
}

int main(int argc, char** argv) {
  const char* spec = argc > 1 ? argv[1] : "policies/cartpole_categorical.pbtxt";
  const int episodes = argc > 2 ? atoi(argv[2]) : 20;
  if (episodes <= 0) {
    fprintf(stderr, "c_policy: the number of episodes must be positive, got %s\n", argv[2]);
    return 2;
  }

  tdp_actor_options* options = NULL;
  tdp_actor* actor = NULL;
  tdp_status status = tdp_options_create(&options);
  if (status != TDP_OK) return fail("tdp_options_create", status);
  tdp_options_set_seed(options, 1);
  status = tdp_actor_load(spec, options, &actor);
  tdp_options_free(options);
  if (status != TDP_OK) return fail("tdp_actor_load", status);

  /* What the policy reads and writes, as the simulator would check it before running. */
  size_t num_inputs = 0, num_outputs = 0;
  tdp_actor_num_inputs(actor, &num_inputs);
  tdp_actor_num_outputs(actor, &num_outputs);
  printf("%s (version %s), tdpolicy %s\n", tdp_actor_name(actor), tdp_actor_spec_version(actor), tdp_version());
  for (size_t i = 0; i < num_inputs + num_outputs; ++i) {
    const char* name = NULL;
    tdp_dtype dtype;
    const int64_t* dims = NULL;
    size_t ndim = 0;
    status = i < num_inputs ? tdp_actor_input(actor, i, &name, &dtype, &dims, &ndim)
                            : tdp_actor_output(actor, i - num_inputs, &name, &dtype, &dims, &ndim);
    if (status != TDP_OK) return fail("tdp_actor_input/output", status);
    printf("  %s %-16s %-8s [", i < num_inputs ? "in " : "out", name, tdp_dtype_name(dtype));
    for (size_t d = 0; d < ndim; ++d) printf(d ? ", %lld" : "%lld", (long long)dims[d]);
    printf("]\n");
  }
  size_t obs_size = 0, action_size = 0;
  if ((status = tdp_actor_element_count(actor, "observation", &obs_size)) != TDP_OK ||
      (status = tdp_actor_element_count(actor, "action", &action_size)) != TDP_OK) {
    tdp_actor_free(actor);
    return fail("tdp_actor_element_count", status);
  }
  if (obs_size != kObs || action_size != 1) {
    fprintf(stderr, "c_policy: %s reads %zu observation values and writes %zu action values; CartPole needs 4 and 1\n",
            spec, obs_size, action_size);
    tdp_actor_free(actor);
    return 1;
  }

  CartPole envs[kEnvs];
  unsigned seed = 7;
  for (int e = 0; e < kEnvs; ++e) cartpole_reset(&envs[e], &seed);
  float observation[kEnvs * kObs];
  int64_t action[kEnvs];
  float log_prob[kEnvs];
  uint8_t done[kEnvs];
  int finished = 0;
  long steps = 0;
  double total = 0.0, best = 0.0;
  while (finished < episodes) {
    for (int e = 0; e < kEnvs; ++e) memcpy(&observation[e * kObs], envs[e].state, sizeof envs[e].state);
    const tdp_input in[] = {{"observation", TDP_FLOAT32, observation, kEnvs * kObs}};
    const tdp_output out[] = {{"action", TDP_INT64, action, kEnvs}, {"action_log_prob", TDP_FLOAT32, log_prob, kEnvs}};
    status = tdp_actor_act(actor, kEnvs, in, 1, out, 2, TDP_INTERACTION_ACTOR);
    if (status != TDP_OK) {
      tdp_actor_free(actor);
      return fail("tdp_actor_act", status);
    }
    for (int e = 0; e < kEnvs; ++e) {
      if (action[e] != 0 && action[e] != 1) {
        fprintf(stderr, "c_policy: action %lld is not a CartPole action (0 or 1)\n", (long long)action[e]);
        tdp_actor_free(actor);
        return 1;
      }
      done[e] = (uint8_t)cartpole_step(&envs[e], action[e]);
      ++steps;
      if (done[e]) {
        if (finished < episodes) {
          total += envs[e].ret;
          if (envs[e].ret > best) best = envs[e].ret;
          ++finished;
        }
        cartpole_reset(&envs[e], &seed);
      }
    }
    status = tdp_actor_reset(actor, done, kEnvs);
    if (status != TDP_OK) {
      tdp_actor_free(actor);
      return fail("tdp_actor_reset", status);
    }
  }
  printf("%d episodes in %d environments, %ld steps: return mean %.2f, max %.0f\n", episodes, kEnvs, steps,
         total / episodes, best);
  tdp_actor_free(actor);
  return 0;
}
