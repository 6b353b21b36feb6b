// RemoteActor against the real server: `python -m tdpolicy.serving` (KServe's model server over
// the SDK's batching actor), started and stopped here as its users start it, inside the private
// network namespace remote_actor_e2e_test.sh makes (only `lo`). Outputs equal the in-process
// Actor's for the same spec (deterministic to 1e-5, seeded random too: the server runs a seeded
// request on a stream of its own seeded with it, as an Actor loaded with that seed); bad
// observations name the key; the server's protocol errors arrive with their status; a server
// killed under a RemoteActor makes calls fail with UNAVAILABLE within the deadline, and calls work
// again once it is back. Every listener is on loopback, and no process is left behind.
//
// Environment (remote_actor_e2e_test.sh): TDP_SERVING_PYTHON (the serving venv's interpreter),
// TDP_LIBRARY (libtdpolicy.so), TDP_POLICIES (policies/), PYTHONPATH (sdk/python).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/actor/remote_actor.h"
#include "tests/actor/remote_serving_process.h"
#include "tests/testing/error_of.h"
#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;
using Clock = std::chrono::steady_clock;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) {
    ADD_FAILURE() << name << " is not set: run this test through remote_actor_e2e_test.sh";
    return "";
  }
  return value;
}

std::string spec_path(const std::string& file) { return env("TDP_POLICIES") + "/" + file; }

using test_util::ServingProcess;

std::string read_file(const std::string& path) { return test_util::read_text_file(path); }

// The two servers the tests share, started once (together, to halve the wait).
struct Servers {
  ServingProcess cartpole{spec_path("cartpole_categorical.pbtxt"), "cartpole", 18080, 18081};
  ServingProcess pendulum{spec_path("pendulum_tanh_gaussian.pbtxt"), "pendulum", 18090, 18091};
};

Servers& servers() {
  static Servers* instance = [] {
    auto* s = new Servers;
    EXPECT_OK(s->cartpole.start());
    EXPECT_OK(s->pendulum.start());
    return s;
  }();
  return *instance;
}

RemoteActorOptions options() {
  return RemoteActorOptions().deadline(std::chrono::milliseconds(5000)).max_backoff(std::chrono::milliseconds(200));
}

std::unique_ptr<RemoteActor> connect(const ServingProcess& server, const std::string& model,
                                     RemoteActorOptions o = options()) {
  auto actor = RemoteActor::connect(server.target(), model, std::move(o));
  EXPECT_OK(actor.status());
  return actor.ok() ? *std::move(actor) : nullptr;
}

TensorDict observations(int64_t rows, int64_t width, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return TensorDict({{"observation", at::randn({rows, width}, generator)}}, {rows});
}

void expect_same_outputs(const TensorDict& remote, const TensorDict& local) {
  ASSERT_EQ(remote.batch_size().vec(), local.batch_size().vec());
  for (const NestedKey& key : local.keys(true, true)) {
    SCOPED_TRACE(key.to_string());
    ASSERT_TRUE(remote.contains(key));
    at::Tensor r = remote.get(key), l = local.get(key);
    ASSERT_EQ(r.scalar_type(), l.scalar_type());
    ASSERT_EQ(r.sizes(), l.sizes());
    if (at::isFloatingType(l.scalar_type())) {
      EXPECT_TRUE(at::allclose(r, l, 1e-5, 1e-5)) << "max |diff| " << (r - l).abs().max().item<double>();
    } else {
      EXPECT_TRUE(at::equal(r, l));
    }
  }
}

// Run first: the namespace has only loopback, and every listener is on it (KServe binds the
// wildcard addresses, which here reach loopback only).
TEST(RemoteActorE2E, ListenersAreOnLoopbackOnly) {
  servers();
  std::vector<std::string> interfaces;
  std::istringstream dev(read_file("/proc/net/dev"));
  std::string line;
  for (int i = 0; std::getline(dev, line); ++i) {
    if (i < 2) continue;  // the two header lines
    interfaces.push_back(line.substr(line.find_first_not_of(' '), line.find(':') - line.find_first_not_of(' ')));
  }
  EXPECT_THAT(interfaces, ::testing::ElementsAre("lo")) << "run through remote_actor_e2e_test.sh (unshare -n)";
  int listeners = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"}) {
    std::istringstream rows(read_file(table));
    std::getline(rows, line);
    while (std::getline(rows, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const bool tcp = std::string(table).find("tcp") != std::string::npos;
      if (tcp && state != "0A") continue;  // TCP: LISTEN only; UDP: every bound socket
      ++listeners;
      const std::string address = local.substr(0, local.find(':'));
      const bool loopback_or_wildcard = address == "0100007F" || address == "00000000" ||
                                        address == "00000000000000000000000001000000" ||
                                        address == "00000000000000000000000000000000";
      EXPECT_TRUE(loopback_or_wildcard) << table << ": " << line;
    }
  }
  EXPECT_GE(listeners, 4) << "the two servers' http and grpc ports";
}

TEST(RemoteActorE2E, DeterministicOutputsEqualTheInProcessActor) {
  Servers& s = servers();
  for (auto [server, spec, model, width] :
       {std::tuple{&s.cartpole, "cartpole_categorical.pbtxt", "cartpole", 4},
        std::tuple{&s.pendulum, "pendulum_tanh_gaussian.pbtxt", "pendulum", 3}}) {
    SCOPED_TRACE(model);
    auto remote = connect(*server, model);
    ASSERT_NE(remote, nullptr);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Actor> local, Actor::load(spec_path(spec)));
    ASSERT_OK_AND_ASSIGN(bool ready, remote->model_ready());
    EXPECT_TRUE(ready);
    ASSERT_OK_AND_ASSIGN(bool live, remote->server_live());
    EXPECT_TRUE(live);
    ASSERT_OK_AND_ASSIGN(bool server_ready, remote->server_ready());
    EXPECT_TRUE(server_ready);
    // The metadata is the policy's signature.
    ASSERT_EQ(remote->inputs().size(), 1u);
    EXPECT_EQ(remote->inputs()[0].name, "observation");
    EXPECT_EQ(remote->inputs()[0].shape, std::vector<int64_t>({-1, width}));
    EXPECT_EQ(remote->outputs().size(), local->signature().outputs.size());
    for (int64_t rows : {1, 7, 64}) {
      TensorDict obs = observations(rows, width, rows);
      expect_same_outputs(remote->act(obs, nn::InteractionType::kDeterministic),
                          local->act(obs, nn::InteractionType::kDeterministic));
    }
    // Batch dims beyond one travel flattened.
    TensorDict grid({{"observation", at::randn({2, 3, width})}}, {2, 3});
    expect_same_outputs(remote->act(grid, nn::InteractionType::kDeterministic),
                        local->act(grid, nn::InteractionType::kDeterministic));
  }
}

TEST(RemoteActorE2E, SeededRandomOutputsEqualAnActorLoadedWithThatSeed) {
  Servers& s = servers();
  for (auto [server, spec, model, width] :
       {std::tuple{&s.cartpole, "cartpole_categorical.pbtxt", "cartpole", 4},
        std::tuple{&s.pendulum, "pendulum_tanh_gaussian.pbtxt", "pendulum", 3}}) {
    SCOPED_TRACE(model);
    auto remote = connect(*server, model);
    ASSERT_NE(remote, nullptr);
    TensorDict obs = observations(16, width, 3);
    for (uint64_t generator_seed : {1u, 2u}) {
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(generator_seed);
      at::Generator replay = generator.clone();
      TensorDict out = remote->act(obs, nn::InteractionType::kRandom, generator);
      // The seed the call sent, and an Actor loaded with it (LibTorch, as the server's seeded calls).
      const int64_t seed = at::randint(std::numeric_limits<int64_t>::max(), {1}, replay, at::kLong).item<int64_t>();
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<Actor> local,
                           Actor::load(spec_path(spec), ActorOptions().seed(seed).backend(Backend::kLibTorch)));
      expect_same_outputs(out, local->act(obs, nn::InteractionType::kRandom));
      // The same seed again gives the same sample, whatever ran in between.
      at::Generator again = at::make_generator<at::CPUGeneratorImpl>(generator_seed);
      expect_same_outputs(remote->act(obs, nn::InteractionType::kRandom, again), out);
    }
  }
}

TEST(RemoteActorE2E, ConcurrentCallersGetTheirOwnRows) {
  Servers& s = servers();
  auto remote = connect(s.pendulum, "pendulum");
  ASSERT_NE(remote, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Actor> local, Actor::load(spec_path("pendulum_tanh_gaussian.pbtxt")));
  std::vector<TensorDict> remote_out(8), local_in(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    local_in[t] = observations(1 + t, 3, 100 + t);
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) remote_out[t] = remote->act(local_in[t], nn::InteractionType::kDeterministic);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) {
    SCOPED_TRACE(t);
    expect_same_outputs(remote_out[t], local->act(local_in[t], nn::InteractionType::kDeterministic));
  }
}

TEST(RemoteActorE2E, BadObservationsAndRejectedRequestsNameTheKey) {
  Servers& s = servers();
  auto remote = connect(s.cartpole, "cartpole");
  ASSERT_NE(remote, nullptr);
  EXPECT_THAT(error_of<std::invalid_argument>([&] { remote->act(TensorDict({{"obs", at::zeros({2, 4})}}, {2})); }),
              HasSubstr("RemoteActor(model \"cartpole\" at 127.0.0.1:18081): input \"observation\" is missing; the "
                        "model expects FP32 (Float) of shape batch_size + [4]"));
  EXPECT_THAT(
      error_of<std::invalid_argument>([&] { remote->act(TensorDict({{"observation", at::zeros({2, 5})}}, {2})); }),
      HasSubstr("input \"observation\" has shape [2, 5] with batch_size [2]; the model expects FP32 (Float) of "
                "shape batch_size + [4]"));
  EXPECT_THAT(error_of<std::invalid_argument>(
                  [&] { remote->act(TensorDict({{"observation", at::zeros({2, 4}, at::kDouble)}}, {2})); }),
              HasSubstr("input \"observation\" has dtype Double"));
  // What only the server can refuse comes back with its status: a batch over its max batch size,
  // an interaction type the categorical has no value for.
  try {
    remote->act(observations(65, 4, 0));
    ADD_FAILURE() << "expected the server to refuse 65 rows";
  } catch (const RemoteCallError& error) {
    EXPECT_EQ(error.status().code(), absl::StatusCode::kInvalidArgument) << error.what();
    EXPECT_THAT(error.what(), HasSubstr("ModelInfer failed: INVALID_ARGUMENT"));
    EXPECT_THAT(error.what(), HasSubstr("observation"));
  }
  try {
    remote->act(observations(2, 4, 0), nn::InteractionType::kMean);
    ADD_FAILURE() << "expected the server to refuse the mean of a categorical";
  } catch (const RemoteCallError& error) {
    EXPECT_EQ(error.status().code(), absl::StatusCode::kInvalidArgument) << error.what();
    EXPECT_THAT(error.what(), HasSubstr("mean"));
  }
  // The server goes on.
  EXPECT_EQ(remote->act(observations(2, 4, 0)).get("action").size(0), 2);
  auto unknown = RemoteActor::connect(s.cartpole.target(), "no_such_model", options());
  EXPECT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("ModelMetadata failed"));
}

TEST(RemoteActorE2E, AServerRestartFailsCallsWithinTheDeadlineThenTheyRecover) {
  Servers& s = servers();
  const auto deadline = std::chrono::milliseconds(1500);
  auto remote = connect(s.cartpole, "cartpole", options().deadline(deadline));
  ASSERT_NE(remote, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Actor> local, Actor::load(spec_path("cartpole_categorical.pbtxt")));
  TensorDict obs = observations(5, 4, 9);
  expect_same_outputs(remote->act(obs, nn::InteractionType::kDeterministic),
                      local->act(obs, nn::InteractionType::kDeterministic));

  s.cartpole.kill_now();  // a crash: no goodbye on the connection
  for (int call = 0; call < 2; ++call) {
    const auto start = Clock::now();
    try {
      remote->act(obs, nn::InteractionType::kDeterministic);
      ADD_FAILURE() << "a call succeeded with the server down";
    } catch (const RemoteCallError& error) {
      EXPECT_THAT(error.status().code(),
                  ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
          << error.what();
      EXPECT_THAT(error.what(), HasSubstr("RemoteActor(model \"cartpole\" at 127.0.0.1:18081): ModelInfer failed: "));
    }
    // Within the deadline, with slack for a loaded machine.
    EXPECT_LT(Clock::now() - start, deadline + std::chrono::milliseconds(1000));
  }
  EXPECT_FALSE(remote->server_live().ok());

  ASSERT_OK(s.cartpole.start());
  // The channel reconnects within max_backoff, but a connection attempt the channel began while
  // the server was still starting can outlast one call's deadline on a loaded machine: calls
  // recover within a few deadlines, each failing only as UNAVAILABLE or DEADLINE_EXCEEDED.
  std::optional<TensorDict> recovered;
  for (const auto restarted = Clock::now(); !recovered && Clock::now() - restarted < 5 * deadline;) {
    try {
      recovered = remote->act(obs, nn::InteractionType::kDeterministic);
    } catch (const RemoteCallError& error) {
      ASSERT_THAT(error.status().code(),
                  ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
          << error.what();
    }
  }
  ASSERT_TRUE(recovered.has_value()) << "no call succeeded within 5 deadlines of the restart";
  expect_same_outputs(*recovered, local->act(obs, nn::InteractionType::kDeterministic));
  ASSERT_OK_AND_ASSIGN(bool ready, remote->model_ready());
  EXPECT_TRUE(ready);
}

// Run last: both servers stop on SIGTERM (exit 0), and no process of theirs is left in this
// namespace.
TEST(RemoteActorE2E, ServersStopAndLeaveNoProcess) {
  Servers& s = servers();
  EXPECT_EQ(s.cartpole.stop(), 0) << s.cartpole.log();
  EXPECT_EQ(s.pendulum.stop(), 0) << s.pendulum.log();
  EXPECT_THAT(s.cartpole.log(), HasSubstr("tdpolicy.serving: stopped model cartpole"));
  const std::string own_namespace = std::filesystem::read_symlink("/proc/self/ns/net");
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(getpid())) continue;
    std::error_code error;
    const auto ns = std::filesystem::read_symlink(entry.path() / "ns" / "net", error);
    if (error || ns.string() != own_namespace) continue;
    // remote_actor_e2e_test.sh makes this binary the namespace's first process (unshare, then
    // exec): any other process in it was started by this test.
    std::string cmdline = read_file(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    left.push_back(pid + ": " + cmdline);
  }
  EXPECT_THAT(left, ::testing::IsEmpty());
}

}  // namespace
}  // namespace tdp::actor

