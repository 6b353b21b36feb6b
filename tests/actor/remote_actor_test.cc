// RemoteActor without a model server: an Open Inference Protocol service written here answers
// over gRPC's in-process channel (no socket), so the tests see exactly what the client puts on
// the wire (raw bytes, shapes, parameters) and can script the replies (typed or raw outputs,
// UNAVAILABLE, slow answers, malformed responses). A loopback port held bound but not listening
// gives "nothing listens there". tests/actor/remote_actor_e2e_test.cc runs it against KServe.
#include "sdk/actor/remote_actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "absl/base/config.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "tests/testing/error_of.h"
#include "tests/testing/status_matchers.h"

namespace tdp::actor {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;

struct TensorSpec {
  std::string name, datatype;
  std::vector<int64_t> shape;
};

// An OIP v2 model "toy": inputs "observation" FP32 [-1, 4] and "goal/position" INT64 [-1, 2];
// outputs "action" FP32 [-1] (the row sum of the observation plus the positions' sum) and
// "next/count" INT64 [-1, 2] (the positions times 10). Scripted faults for the client's retries.
class ScriptedService final : public inference::GRPCInferenceService::Service {
 public:
  std::vector<TensorSpec> inputs = {{"observation", "FP32", {-1, 4}}, {"goal/position", "INT64", {-1, 2}}};
  std::vector<TensorSpec> outputs = {{"action", "FP32", {-1}}, {"next/count", "INT64", {-1, 2}}};
  std::atomic<int> unavailable_before_success{0};  // ModelInfer answers UNAVAILABLE this many times first
  std::atomic<int> delay_ms{0};                    // ModelInfer sleeps this long first
  std::atomic<bool> typed_outputs{false};          // InferTensorContents instead of raw bytes
  std::atomic<bool> short_raw_output{false};       // "action" one element short
  std::atomic<bool> reject{false};                 // INVALID_ARGUMENT naming the input
  std::atomic<int> infer_calls{0};
  std::mutex mutex;
  inference::ModelInferRequest last_request;

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override {
    response->set_ready(request->name() == "toy");
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override {
    if (request->name() != "toy") return grpc::Status(grpc::StatusCode::NOT_FOUND, "no model " + request->name());
    response->set_name("toy");
    for (const auto& [specs, add] : {std::pair{&inputs, true}, std::pair{&outputs, false}}) {
      for (const TensorSpec& spec : *specs) {
        auto* tensor = add ? response->add_inputs() : response->add_outputs();
        tensor->set_name(spec.name);
        tensor->set_datatype(spec.datatype);
        for (int64_t size : spec.shape) tensor->add_shape(size);
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override {
    ++infer_calls;
    {
      std::lock_guard<std::mutex> lock(mutex);
      last_request = *request;
    }
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (unavailable_before_success > 0) {
      --unavailable_before_success;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "warming up");
    }
    if (reject) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input \"observation\": expected values in [0, 1]");
    }
    if (request->inputs_size() != 2 || request->raw_input_contents_size() != 2) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "expected 2 raw inputs");
    }
    const int64_t rows = request->inputs(0).shape(0);
    const float* observation = reinterpret_cast<const float*>(request->raw_input_contents(0).data());
    const int64_t* position = reinterpret_cast<const int64_t*>(request->raw_input_contents(1).data());
    std::vector<float> action(rows);
    std::vector<int64_t> count(rows * 2);
    for (int64_t r = 0; r < rows; ++r) {
      action[r] = observation[4 * r] + observation[4 * r + 1] + observation[4 * r + 2] + observation[4 * r + 3] +
                  static_cast<float>(position[2 * r] + position[2 * r + 1]);
      count[2 * r] = 10 * position[2 * r];
      count[2 * r + 1] = 10 * position[2 * r + 1];
    }
    auto* a = response->add_outputs();
    a->set_name("action");
    a->set_datatype("FP32");
    a->add_shape(rows);
    auto* c = response->add_outputs();
    c->set_name("next/count");
    c->set_datatype("INT64");
    c->add_shape(rows);
    c->add_shape(2);
    if (typed_outputs) {
      for (float v : action) a->mutable_contents()->add_fp32_contents(v);
      for (int64_t v : count) c->mutable_contents()->add_int64_contents(v);
    } else {
      const size_t action_bytes = (short_raw_output ? rows - 1 : rows) * sizeof(float);
      response->add_raw_output_contents(reinterpret_cast<const char*>(action.data()), action_bytes);
      response->add_raw_output_contents(reinterpret_cast<const char*>(count.data()), count.size() * sizeof(int64_t));
    }
    return grpc::Status::OK;
  }
};

class RemoteActorTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef ABSL_HAVE_THREAD_SANITIZER
    // The in-process channel hands the client's serialized request to the server's thread inside
    // Debian's uninstrumented libgrpc, so TSan sees the generated parser read bytes the generated
    // serializer wrote with no order between them. remote_actor_e2e_test checks the client under
    // TSan against a server in another process.
    GTEST_SKIP() << "gRPC's in-process handoff is invisible to TSan";
#endif
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();  // none when SetUp skipped
  }

  std::unique_ptr<RemoteActor> connect(RemoteActorOptions options = {}) {
    auto actor = RemoteActor::connect(server_->InProcessChannel(grpc::ChannelArguments()), "toy", std::move(options));
    EXPECT_OK(actor.status());
    return actor.ok() ? *std::move(actor) : nullptr;
  }

  static TensorDict observation(std::vector<int64_t> batch_size) {
    std::vector<int64_t> obs_shape = batch_size, pos_shape = batch_size;
    obs_shape.push_back(4);
    pos_shape.push_back(2);
    int64_t rows = 1;
    for (int64_t size : batch_size) rows *= size;
    TensorDict td(batch_size);
    td.set("observation", at::arange(rows * 4, at::kFloat).reshape(obs_shape) / 8);
    td.set({"goal", "position"}, at::arange(rows * 2, at::kLong).reshape(pos_shape));
    return td;
  }

  inference::ModelInferRequest last_request() {
    std::lock_guard<std::mutex> lock(service_.mutex);
    return service_.last_request;
  }

  ScriptedService service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(RemoteActorTest, ReadsTheModelsMetadataOnce) {
  auto actor = connect();
  ASSERT_NE(actor, nullptr);
  ASSERT_EQ(actor->inputs().size(), 2u);
  EXPECT_EQ(actor->inputs()[1].name, "goal/position");
  EXPECT_EQ(actor->inputs()[1].key, NestedKey({"goal", "position"}));
  EXPECT_EQ(actor->inputs()[1].dtype, at::kLong);
  EXPECT_EQ(actor->inputs()[0].shape, std::vector<int64_t>({-1, 4}));
  ASSERT_EQ(actor->outputs().size(), 2u);
  EXPECT_EQ(actor->outputs()[1].key, NestedKey({"next", "count"}));
  EXPECT_EQ(actor->model_name(), "toy");
  ASSERT_OK_AND_ASSIGN(bool live, actor->server_live());
  EXPECT_TRUE(live);
  ASSERT_OK_AND_ASSIGN(bool ready, actor->model_ready());
  EXPECT_TRUE(ready);
  // ServerReady is not implemented by this service: the error carries gRPC's code and the call.
  absl::StatusOr<bool> server_ready = actor->server_ready();
  EXPECT_EQ(server_ready.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(server_ready.status().message()), HasSubstr("ServerReady failed: UNIMPLEMENTED"));
  EXPECT_EQ(service_.infer_calls, 0);
}

TEST_F(RemoteActorTest, SendsRawLittleEndianInputsAndTheCallsParameters) {
  auto actor = connect(RemoteActorOptions().seed(5));
  ASSERT_NE(actor, nullptr);
  TensorDict obs = observation({3});
  obs.set("ignored", at::zeros({3, 7}));  // not declared by the model: not sent
  actor->act(obs, nn::InteractionType::kDeterministic);
  inference::ModelInferRequest request = last_request();
  EXPECT_EQ(request.model_name(), "toy");
  ASSERT_EQ(request.inputs_size(), 2);
  EXPECT_EQ(request.inputs(0).name(), "observation");
  EXPECT_EQ(request.inputs(0).datatype(), "FP32");
  EXPECT_THAT(request.inputs(0).shape(), ::testing::ElementsAre(3, 4));
  EXPECT_EQ(request.inputs(1).name(), "goal/position");
  EXPECT_EQ(request.inputs(1).datatype(), "INT64");
  EXPECT_THAT(request.inputs(1).shape(), ::testing::ElementsAre(3, 2));
  EXPECT_FALSE(request.inputs(0).has_contents());
  ASSERT_EQ(request.raw_input_contents_size(), 2);
  at::Tensor sent = obs.get("observation").contiguous();
  ASSERT_EQ(request.raw_input_contents(0).size(), sent.nbytes());
  EXPECT_EQ(std::memcmp(request.raw_input_contents(0).data(), sent.data_ptr(), sent.nbytes()), 0);
  EXPECT_EQ(request.parameters().at("interaction_type").string_param(), "deterministic");

  // The seed: drawn from the actor's own generator seeded with options.seed, so two actors with the
  // same seed send the same sequence.
  at::Generator replay = at::make_generator<at::CPUGeneratorImpl>(5);
  const int64_t first = at::randint(std::numeric_limits<int64_t>::max(), {1}, replay, at::kLong).item<int64_t>();
  EXPECT_EQ(request.parameters().at("seed").int64_param(), first);
  actor->act(obs);  // the options' interaction type: random
  request = last_request();
  EXPECT_EQ(request.parameters().at("interaction_type").string_param(), "random");
  const int64_t second = at::randint(std::numeric_limits<int64_t>::max(), {1}, replay, at::kLong).item<int64_t>();
  EXPECT_EQ(request.parameters().at("seed").int64_param(), second);

  // A call's generator gives its seed; without options.seed nor generator no seed is sent, and
  // without an interaction type anywhere none is either.
  auto unseeded = connect(RemoteActorOptions().interaction_type(std::nullopt));
  unseeded->act(obs);
  request = last_request();
  EXPECT_EQ(request.parameters().count("seed"), 0u);
  EXPECT_EQ(request.parameters().count("interaction_type"), 0u);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
  at::Generator copy = generator.clone();
  unseeded->act(obs, nn::InteractionType::kMode, generator);
  request = last_request();
  EXPECT_EQ(request.parameters().at("interaction_type").string_param(), "mode");
  EXPECT_EQ(request.parameters().at("seed").int64_param(),
            at::randint(std::numeric_limits<int64_t>::max(), {1}, copy, at::kLong).item<int64_t>());
}

TEST_F(RemoteActorTest, DecodesRawAndTypedOutputsIntoTheObservationsBatch) {
  auto actor = connect();
  ASSERT_NE(actor, nullptr);
  for (bool typed : {false, true}) {
    SCOPED_TRACE(typed ? "typed contents" : "raw contents");
    service_.typed_outputs = typed;
    // Two batch dims travel as one leading dim of 6 rows and come back as [2, 3].
    TensorDict obs = observation({2, 3});
    TensorDict out = actor->act(obs);
    EXPECT_EQ(out.batch_size().vec(), std::vector<int64_t>({2, 3}));
    at::Tensor expected_action =
        obs.get("observation").sum(-1) + obs.get({"goal", "position"}).sum(-1).to(at::kFloat);
    EXPECT_TRUE(at::equal(out.get("action"), expected_action)) << out.get("action");
    EXPECT_EQ(out.get({"next", "count"}).scalar_type(), at::kLong);
    EXPECT_TRUE(at::equal(out.get({"next", "count"}), obs.get({"goal", "position"}) * 10));
    EXPECT_EQ(last_request().inputs(0).shape(0), 6);
  }
  // No batch dims: one row.
  TensorDict out = actor->act(observation({1})[0]);
  EXPECT_EQ(out.batch_size().size(), 0u);
  EXPECT_EQ(out.get({"next", "count"}).sizes().vec(), std::vector<int64_t>({2}));
  // Named tensors: the batch dims come from the declared shapes.
  TensorDict named = actor->act({{"observation", at::ones({5, 4})}, {{"goal", "position"}, at::ones({5, 2}, at::kLong)}});
  EXPECT_EQ(named.batch_size().vec(), std::vector<int64_t>({5}));
  EXPECT_TRUE(at::equal(named.get("action"), at::full({5}, 6.0f)));
}

TEST_F(RemoteActorTest, BadObservationsNameTheKeyAndAreNeverSent) {
  auto actor = connect();
  ASSERT_NE(actor, nullptr);
  TensorDict missing = observation({3});
  missing.erase({"goal", "position"});
  EXPECT_THAT(error_of<std::invalid_argument>([&] { actor->act(missing); }),
              HasSubstr("input \"goal/position\" is missing; the model expects INT64 (Long) of shape batch_size + [2]"));
  TensorDict wrong_dtype = observation({3});
  wrong_dtype.set("observation", at::zeros({3, 4}, at::kDouble));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { actor->act(wrong_dtype); }),
              HasSubstr("input \"observation\" has dtype Double; the model expects FP32 (Float)"));
  TensorDict wrong_shape = observation({3});
  wrong_shape.set("observation", at::zeros({3, 5}));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { actor->act(wrong_shape); }),
              HasSubstr("input \"observation\" has shape [3, 5] with batch_size [3]; the model expects FP32 (Float) "
                        "of shape batch_size + [4]"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { actor->act({{"observation", at::zeros({3, 4})}}); }),
              HasSubstr("input \"goal/position\" is missing"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { actor->act({{"other", at::zeros({3, 4})}}); }),
              HasSubstr("input \"observation\" is missing"));
  EXPECT_EQ(service_.infer_calls, 0);
}

TEST_F(RemoteActorTest, ServerErrorsAndMalformedResponsesAreRemoteCallErrors) {
  auto actor = connect();
  ASSERT_NE(actor, nullptr);
  service_.reject = true;
  try {
    actor->act(observation({2}));
    ADD_FAILURE() << "expected a RemoteCallError";
  } catch (const RemoteCallError& error) {
    EXPECT_EQ(error.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(error.what(), HasSubstr("RemoteActor(model \"toy\" at a given channel): ModelInfer failed: "
                                        "INVALID_ARGUMENT: input \"observation\": expected values in [0, 1] "
                                        "(1 attempt in"));
  }
  service_.reject = false;
  service_.short_raw_output = true;
  try {
    actor->act(observation({2}));
    ADD_FAILURE() << "expected a RemoteCallError";
  } catch (const RemoteCallError& error) {
    EXPECT_EQ(error.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(error.what(), HasSubstr("ModelInfer returned output \"action\" that has 4 raw bytes; expected 8 "
                                        "for FP32 [2]"));
  }
}

TEST_F(RemoteActorTest, MetadataItCannotServeIsAConnectError) {
  service_.inputs = {{"text", "BYTES", {-1}}};
  auto bytes = RemoteActor::connect(server_->InProcessChannel(grpc::ChannelArguments()), "toy");
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(bytes.status().message()),
              HasSubstr("declares input \"text\" with a datatype this client cannot carry: datatype \"BYTES\""));
  service_.inputs = {{"observation", "FP32", {4}}};
  auto unbatched = RemoteActor::connect(server_->InProcessChannel(grpc::ChannelArguments()), "toy");
  EXPECT_THAT(std::string(unbatched.status().message()),
              HasSubstr("input \"observation\" with shape [4]; expected a leading batch dim of any size (-1)"));
  auto unknown = RemoteActor::connect(server_->InProcessChannel(grpc::ChannelArguments()), "nope");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("RemoteActor(model \"nope\" at a given channel): ModelMetadata failed: NOT_FOUND: no model nope"));
  auto bad_options = RemoteActor::connect(server_->InProcessChannel(grpc::ChannelArguments()), "toy",
                                          RemoteActorOptions().deadline(std::chrono::milliseconds(0)));
  EXPECT_THAT(std::string(bad_options.status().message()), HasSubstr("deadline must be positive"));
}

TEST_F(RemoteActorTest, RetriesUnavailableWithinTheDeadline) {
  auto actor = connect(RemoteActorOptions().initial_backoff(std::chrono::milliseconds(5)));
  ASSERT_NE(actor, nullptr);
  service_.unavailable_before_success = 3;
  TensorDict out = actor->act(observation({2}));
  EXPECT_EQ(service_.infer_calls, 4);
  EXPECT_EQ(out.get("action").size(0), 2);

  // Always unavailable: the call gives up by its deadline, with the last status and the count.
  auto quick = connect(RemoteActorOptions()
                           .deadline(std::chrono::milliseconds(300))
                           .initial_backoff(std::chrono::milliseconds(5))
                           .max_backoff(std::chrono::milliseconds(40)));
  service_.unavailable_before_success = 1 << 30;
  const auto start = std::chrono::steady_clock::now();
  try {
    quick->act(observation({2}));
    ADD_FAILURE() << "expected a RemoteCallError";
  } catch (const RemoteCallError& error) {
    EXPECT_EQ(error.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(error.what(), HasSubstr("ModelInfer failed: UNAVAILABLE: warming up ("));
    EXPECT_THAT(error.what(), HasSubstr("attempts in"));
  }
  // Backoff never sleeps past the deadline; slack for a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(800));
}

TEST_F(RemoteActorTest, ASlowServerMeetsTheDeadline) {
  auto actor = connect(RemoteActorOptions().deadline(std::chrono::milliseconds(200)));
  ASSERT_NE(actor, nullptr);
  service_.delay_ms = 1500;
  const auto start = std::chrono::steady_clock::now();
  try {
    actor->act(observation({2}));
    ADD_FAILURE() << "expected a RemoteCallError";
  } catch (const RemoteCallError& error) {
    EXPECT_EQ(error.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(error.what(), HasSubstr("ModelInfer failed: DEADLINE_EXCEEDED"));
    EXPECT_THAT(error.what(), HasSubstr("deadline 200 ms"));
  }
  // The deadline with slack for a loaded machine, well under the server's delay.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
}

TEST(RemoteActorNothingListens, ConnectFailsWithUnavailableWithinTheDeadline) {
  // A loopback port this process holds bound but not listening: connections are refused, and no
  // other process can start listening on it meanwhile.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string target = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  const auto start = std::chrono::steady_clock::now();
  auto actor = RemoteActor::connect(target, "cartpole",
                                    RemoteActorOptions()
                                        .deadline(std::chrono::milliseconds(400))
                                        .initial_backoff(std::chrono::milliseconds(10))
                                        .max_backoff(std::chrono::milliseconds(100)));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  close(fd);
  ASSERT_FALSE(actor.ok());
  // Refused connections are UNAVAILABLE; the last attempt may instead run out of time.
  EXPECT_THAT(actor.status().code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(std::string(actor.status().message()),
              HasSubstr("RemoteActor(model \"cartpole\" at " + target + "): ModelMetadata failed: "));
  EXPECT_THAT(std::string(actor.status().message()), HasSubstr("attempts in"));
  EXPECT_LT(elapsed, std::chrono::milliseconds(1500));
}

TEST(RemoteActorDatatypes, NamesMatchTheProtocol) {
  EXPECT_EQ(oip_datatype(at::kFloat).value(), "FP32");
  EXPECT_EQ(oip_datatype(at::kBool).value(), "BOOL");
  EXPECT_EQ(oip_datatype(at::kBFloat16).value(), "BF16");
  EXPECT_EQ(oip_scalar_type("INT8").value(), at::kChar);
  EXPECT_EQ(oip_scalar_type("UINT8").value(), at::kByte);
  EXPECT_EQ(oip_scalar_type("FP16").value(), at::kHalf);
  EXPECT_FALSE(oip_datatype(at::kComplexFloat).ok());
  EXPECT_THAT(std::string(oip_scalar_type("fp32").status().message()), HasSubstr("datatype \"fp32\" is not one of BOOL"));
}

}  // namespace
}  // namespace tdp::actor
