// CudaGraphModule: what every machine checks (options, the eager fallback and its one warning),
// and, where a GPU is visible in a --config=cuda binary (tests/gpu/), that replays compute what
// eager calls compute, reject inputs the graph was not captured for, draw fresh samples, and keep
// static inputs apart from static outputs. Without a GPU the GPU cases skip and say why.
#include "sdk/nn/cuda_graph_module.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/tensordict/tensordict.h"
#include "tests/testing/error_of.h"
#include "tests/testing/gpu.h"
#include "tests/testing/log_capture.h"

namespace tdp::nn {
namespace {

using ::testing::HasSubstr;
using test_util::error_of;

// observation -> hidden = tanh(Linear(4, 8)) -> action = Linear(8, 2): three modules, one sequence.
TensorDictSequential small_policy(const c10::Device& device) {
  torch::manual_seed(0);
  TensorDictModule layer(torch::nn::Linear(4, 8), TensorDictModuleOptions({"observation"}, {"pre"}));
  TensorDictModule activation([](const at::Tensor& x) { return at::tanh(x); },
                              TensorDictModuleOptions({"pre"}, {"hidden"}));
  TensorDictModule head(torch::nn::Linear(8, 2), TensorDictModuleOptions({"hidden"}, {"action"}));
  TensorDictSequential policy({layer, activation, head});
  policy->to(device);
  return policy;
}

TensorDict observation(int64_t batch, const c10::Device& device, int64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return TensorDict({{"observation", at::randn({batch, 4}, generator).to(device)}}, {batch});
}

// ---- every machine -------------------------------------------------------------------------

TEST(CudaGraphModuleOptionsTest, WarmupBelowOneIsAnError) {
  auto policy = small_policy(c10::kCPU);
  EXPECT_THAT(error_of<std::invalid_argument>(
                  [&] { CudaGraphModule graphed(policy, CudaGraphModuleOptions().warmup(0)); }),
              HasSubstr("warmup must be at least 1"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { CudaGraphModule graphed{std::shared_ptr<TensorDictModuleBase>()}; }), HasSubstr("null"));
}

TEST(CudaGraphModuleOptionsTest, KeysComeFromTheModuleUnlessGiven) {
  auto policy = small_policy(c10::kCPU);
  CudaGraphModule from_module(policy, CudaGraphModuleOptions().device(c10::Device(c10::kCPU)));
  EXPECT_EQ(from_module.in_keys(), policy->in_keys());
  EXPECT_EQ(from_module.out_keys(), policy->out_keys());
  CudaGraphModule given(policy, CudaGraphModuleOptions().device(c10::Device(c10::kCPU)).out_keys(
                                    std::vector<NestedKey>{"action"}));
  EXPECT_EQ(given.out_keys(), std::vector<NestedKey>{"action"});
  // The wrapped module is a child: parameters() and to() reach it.
  EXPECT_EQ(from_module.parameters().size(), policy->parameters().size());
}

TEST(CudaGraphModuleEagerTest, OnACpuDeviceItWarnsOnceAndRunsTheModule) {
  auto policy = small_policy(c10::kCPU);
  test_util::LogCapture log;
  CudaGraphModule graphed(policy, CudaGraphModuleOptions().device(c10::Device(c10::kCPU)));
  EXPECT_FALSE(graphed.enabled());
  EXPECT_THAT(log.text(), HasSubstr("runs eagerly"));
  const std::string warned = log.text();
  for (int call = 0; call < 4; ++call) {
    TensorDict expected = policy->forward(observation(3, c10::kCPU, call));
    TensorDict got = graphed.forward(observation(3, c10::kCPU, call));
    EXPECT_TRUE(at::equal(got.get("action"), expected.get("action"))) << "call " << call;
  }
  EXPECT_FALSE(graphed.captured());
  EXPECT_EQ(log.text(), warned) << "the warning is given once, at construction";
}

TEST(CudaGraphModuleEagerTest, WithoutAGpuTheDefaultDeviceRunsEagerly) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible: the GPU cases below cover this machine";
  test_util::LogCapture log;
  CudaGraphModule graphed(small_policy(c10::kCPU));
  EXPECT_FALSE(graphed.enabled());
  EXPECT_THAT(log.text(), HasSubstr("CudaGraphModule"));
  EXPECT_EQ(graphed.forward(observation(2, c10::kCPU, 0)).get("action").sizes(), (std::vector<int64_t>{2, 2}));
}

// ---- on a GPU ------------------------------------------------------------------------------

const c10::Device kCuda("cuda:0");

TEST(CudaGraphModuleGpuTest, ReplaysEqualEagerCallsAndCaptureAfterWarmup) {
  SKIP_WITHOUT_GPU();
  auto policy = small_policy(kCuda);
  CudaGraphModule graphed(policy, CudaGraphModuleOptions().warmup(2));
  ASSERT_TRUE(graphed.enabled());
  for (int call = 0; call < 6; ++call) {
    EXPECT_EQ(graphed.captured(), call > 2) << "call " << call;
    TensorDict input = observation(5, kCuda, call);
    TensorDict expected = policy->forward(input.clone());
    TensorDict got = graphed.forward(input);
    EXPECT_TRUE(got.is_same(input)) << "outputs go back into the caller's TensorDict";
    EXPECT_TRUE(at::allclose(got.get("action"), expected.get("action"), 1e-6, 1e-6)) << "call " << call;
    EXPECT_TRUE(at::allclose(got.get("hidden"), expected.get("hidden"), 1e-6, 1e-6)) << "call " << call;
  }
  EXPECT_TRUE(graphed.captured());
}

TEST(CudaGraphModuleGpuTest, OutputsAreClonesUnlessZeroCopy) {
  SKIP_WITHOUT_GPU();
  auto policy = small_policy(kCuda);
  CudaGraphModule cloned(policy, CudaGraphModuleOptions().warmup(1));
  CudaGraphModule zero_copy(policy, CudaGraphModuleOptions().warmup(1).zero_copy(true));
  for (int call = 0; call < 2; ++call) {
    cloned.forward(observation(2, kCuda, call));
    zero_copy.forward(observation(2, kCuda, call));
  }
  at::Tensor first = cloned.forward(observation(2, kCuda, 10)).get("action");
  at::Tensor second = cloned.forward(observation(2, kCuda, 11)).get("action");
  EXPECT_NE(first.data_ptr(), second.data_ptr());
  EXPECT_FALSE(at::equal(first, second));
  at::Tensor view = zero_copy.forward(observation(2, kCuda, 10)).get("action");
  at::Tensor kept = view.clone();
  at::Tensor next = zero_copy.forward(observation(2, kCuda, 11)).get("action");
  EXPECT_EQ(view.data_ptr(), next.data_ptr()) << "zero_copy returns the static output buffer";
  EXPECT_FALSE(at::equal(view, kept)) << "which the next call overwrites";
}

TEST(CudaGraphModuleGpuTest, InputsOtherThanTheCapturedOnesAreErrorsNamingTheKey) {
  SKIP_WITHOUT_GPU();
  CudaGraphModule graphed(small_policy(kCuda), CudaGraphModuleOptions().warmup(1));
  graphed.forward(observation(4, kCuda, 0));
  graphed.forward(observation(4, kCuda, 1));  // captured
  EXPECT_THAT(error_of<std::invalid_argument>([&] { graphed.forward(observation(5, kCuda, 2)); }),
              HasSubstr("input 'observation' is Float[5, 4]; the graph was captured with Float[4, 4]"));
  TensorDict as_double({{"observation", at::randn({4, 4}, at::TensorOptions().dtype(at::kDouble).device(kCuda))}}, {4});
  EXPECT_THAT(error_of<std::invalid_argument>([&] { graphed.forward(as_double); }), HasSubstr("Double[4, 4]"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { graphed.forward(observation(4, c10::kCPU, 3)); }),
              HasSubstr("input 'observation' is on cpu; the graph runs on cuda:0"));
  // at:: factories ignore TensorOptions::requires_grad; set it on the leaf.
  TensorDict with_grad({{"observation", at::randn({4, 4}, at::TensorOptions().device(kCuda)).set_requires_grad(true)}},
                       {4});
  EXPECT_THAT(error_of<std::invalid_argument>([&] { graphed.forward(with_grad); }), HasSubstr("requires grad"));
  EXPECT_THAT(error_of<std::invalid_argument>([&] { graphed.forward(TensorDict({4})); }),
              HasSubstr("input 'observation' is missing"));
}

// A module that reads and writes "h" (h <- h + x): the caller's new "h" must reach the graph.
TEST(CudaGraphModuleGpuTest, AModuleWritingItsOwnInputReadsTheCallersNextValue) {
  SKIP_WITHOUT_GPU();
  TensorDictModule step([](const at::Tensor& h, const at::Tensor& x) { return h + x; },
                                                 TensorDictModuleOptions({"h", "x"}, {"h"}));
  CudaGraphModule graphed(step, CudaGraphModuleOptions().warmup(1));
  const auto options = at::TensorOptions().device(kCuda);
  for (int call = 0; call < 5; ++call) {
    const double h = 10.0 * call;
    TensorDict td({{"h", at::full({3, 2}, h, options)}, {"x", at::ones({3, 2}, options)}}, {3});
    TensorDict out = graphed.forward(td);
    EXPECT_TRUE(at::equal(out.get("h").cpu(), at::full({3, 2}, h + 1))) << "call " << call;
  }
}

TEST(CudaGraphModuleGpuTest, RandomDrawsAreFreshOnEveryReplayAndFollowTheSeed) {
  SKIP_WITHOUT_GPU();
  at::Generator generator = at::globalContext().defaultGenerator(kCuda).clone();
  TensorDictModule noise(
      [generator](const at::Tensor& x) { return x + at::randn(x.sizes(), generator, x.options()); },
      TensorDictModuleOptions({"x"}, {"y"}));
  auto run = [&](uint64_t seed) {
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_current_seed(seed);
      generator.set_offset(0);
    }
    CudaGraphModule graphed(noise, CudaGraphModuleOptions().warmup(1).generators({generator}));
    std::vector<at::Tensor> draws;
    for (int call = 0; call < 6; ++call) {
      TensorDict td({{"x", at::zeros({4096}, at::TensorOptions().device(kCuda))}}, {4096});
      draws.push_back(graphed.forward(td).get("y").cpu());
    }
    return draws;
  };
  const std::vector<at::Tensor> first = run(7);
  for (size_t i = 2; i < first.size(); ++i) {  // replays
    EXPECT_FALSE(at::equal(first[i], first[i - 1])) << "replay " << i << " repeated the previous draw";
    EXPECT_NEAR(first[i].mean().item<double>(), 0.0, 0.1);
    EXPECT_NEAR(first[i].std().item<double>(), 1.0, 0.1);
  }
  const std::vector<at::Tensor> again = run(7);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(at::equal(first[i], again[i])) << "call " << i;
}

TEST(CudaGraphModuleGpuTest, AModuleReturningANewTensorDictGetsACopy) {
  SKIP_WITHOUT_GPU();
  struct Doubled : TensorDictModuleBase {
    Doubled() : TensorDictModuleBase("Doubled", {"x"}, {"y"}) {}
    TensorDict forward_impl(TensorDict td, const std::optional<TensorDict>&) override {
      return TensorDict({{"y", td.get("x") * 2}}, td.batch_size().vec());
    }
  };
  CudaGraphModule graphed(std::make_shared<Doubled>(), CudaGraphModuleOptions().warmup(1));
  for (int call = 0; call < 4; ++call) {
    TensorDict td({{"x", at::full({2}, double(call), at::TensorOptions().device(kCuda))}}, {2});
    TensorDict out = graphed.forward(td);
    EXPECT_FALSE(out.is_same(td));
    EXPECT_FALSE(td.contains("y"));
    EXPECT_TRUE(at::equal(out.get("y").cpu(), at::full({2}, 2.0 * call))) << "call " << call;
  }
}

}  // namespace
}  // namespace tdp::nn
