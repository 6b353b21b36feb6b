// sdk/actor/actor.h on its own: this file includes nothing else from the project (only gtest,
// the standard library and ATen's tensor factories), so it compiles only while the header
// declares everything its API needs, and it fails to compile if the header pulls in generated
// protobuf headers or torch::nn (a simulator that includes actor.h gets neither). actor.h includes: <ATen/core/Generator.h>,
// <ATen/core/Tensor.h>, <absl/status/statusor.h>, <c10/core/Device.h>, <torch/arg.h>,
// sdk/probabilistic/interaction_type.h, sdk/tensordict/nested_key.h and
// sdk/tensordict/tensordict.h.
#include "sdk/actor/actor.h"

#ifdef GOOGLE_PROTOBUF_VERSION
#error "sdk/actor/actor.h includes protobuf headers"
#endif
#ifdef GOOGLE_PROTOBUF_INCLUDED_tdpolicy_2fspec_2eproto
#error "sdk/actor/actor.h includes tdpolicy/spec.pb.h"
#endif
#ifdef TORCH_MODULE
#error "sdk/actor/actor.h includes torch/nn headers"
#endif

#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <type_traits>
#include <utility>

namespace {

template <typename T, typename = void>
struct is_complete : std::false_type {};
template <typename T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// Only declared by actor.h: the pimpl keeps their definitions out.
static_assert(!is_complete<tdpolicy::PolicySpec>::value, "actor.h defines tdpolicy::PolicySpec");
static_assert(!is_complete<tdp::nn::TensorDictModuleBase>::value, "actor.h defines TensorDictModuleBase");
static_assert(!is_complete<tdp::policy::Policy>::value, "actor.h defines tdp::policy::Policy");
static_assert(std::is_nothrow_move_constructible_v<tdp::actor::Actor>);
static_assert(std::is_nothrow_move_assignable_v<tdp::actor::Actor>);
static_assert(!std::is_copy_constructible_v<tdp::actor::Actor>);

constexpr const char* kRecurrent = R"pb(
  name: "header_gru" version: "1" init_seed: 5
  inputs { key: "observation" shape: [4] }
  inputs { key: "hidden" shape: [8] }
  output_keys: ["action", "action_log_prob"]
  module { probabilistic_sequential {
    modules { overwrite_keys: ["hidden"]
              network { in_keys: ["observation", "hidden"] out_keys: ["hidden"]
                        network { gru_cell { input_size: 4 hidden_size: 8 } } } }
    modules { network { in_keys: ["hidden"] out_keys: ["logits"]
                        network { linear { in_features: 8 out_features: 2 } } } }
    modules { probabilistic { in_keys: ["logits"] out_keys: ["action"] distribution: "categorical"
                              return_log_prob: true } } } }
)pb";

TEST(ActorHeaderTest, TheWholeApiThroughActorHAlone) {
  const std::string path = ::testing::TempDir() + "/header_gru.pbtxt";
  std::ofstream(path) << kRecurrent;
  absl::StatusOr<std::unique_ptr<tdp::actor::Actor>> loaded =
      tdp::actor::Actor::load(path, tdp::actor::ActorOptions()
                                        .seed(3)
                                        .interaction_type(tdp::nn::InteractionType::kMode)
                                        .composite_lp_aggregate(false)
                                        .return_all_entries(false)
                                        .device(c10::Device(c10::kCPU)));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  tdp::actor::Actor actor = std::move(**loaded);  // movable
  EXPECT_EQ(actor.signature().state_keys, std::vector<tdp::NestedKey>{"hidden"});
  EXPECT_EQ(actor.options().seed(), 3u);
  EXPECT_NE(&actor.spec(), nullptr);
  EXPECT_TRUE(actor.module() != nullptr);

  const at::Tensor observation = at::ones({2, 4});
  tdp::TensorDict out = actor.act({{"observation", observation}});
  EXPECT_EQ(out.get("action").sizes(), at::IntArrayRef({2}));
  EXPECT_EQ(out.get("hidden").sizes(), at::IntArrayRef({2, 8}));
  tdp::TensorDict td({{"observation", observation}}, {2});
  actor.act(td, tdp::nn::InteractionType::kRandom);
  actor.act(td, std::nullopt);  // each module's own default
  actor.set_interaction_type(tdp::nn::InteractionType::kDeterministic);
  actor.reset(at::ones({2}, at::kBool));
  actor.reset();

  tdp::actor::Actor other = std::move(actor);
  other.act(td);
  actor = std::move(other);
  EXPECT_EQ(actor.act(td).get("hidden").size(0), 2);
}

}  // namespace
