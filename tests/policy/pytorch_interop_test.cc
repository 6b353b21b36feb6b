// Actors built from real tensordict.nn / torchrl.modules objects in Python
// (policies/pytorch/regenerate.py, through tdpolicy.export) compute the same TensorDict in C++: loaded from their
// exported specs, run on the same inputs under the deterministic interaction type, they write
// the same keys (log-prob key names included), with the same shapes, dtypes and values (to
// 1e-6 plus 1.3e-6 of the value), and score given actions with the same log-probs, under both composite_lp_aggregate
// modes (the Python actor built under tensordict.nn.set_composite_lp_aggregate(mode), the C++
// one loaded under CompositeLpAggregateGuard(mode)). The self test the exporter wrote into each
// spec passes at load time, and a TorchScript file saved by the Python side loads and runs.
//
// The files come from policies/pytorch/ (committed), or from the folder named by
// TDP_PYTORCH_EXPORTS, where //tests/policy:pytorch_regenerated_test has the script write them
// fresh with the venv's torch, tensordict and TorchRL.
#include <ATen/ATen.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "sdk/nn/scripted_module.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/probabilistic/probabilistic_sequential.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using nn::InteractionType;
using Tensors = std::map<std::string, at::Tensor>;

// |C++ - Python| <= kAbsolute + kRelative * |Python|: kRelative is torch.testing's float32 rtol.
// A relative part, because the committed files were computed on another CPU and ATen picks its
// vectorized kernels (AVX2, AVX-512) at run time, which round differently in the last bits: a
// log-prob of -17 came out 2 ulps (3.8e-6) apart on an AVX-512 machine.
constexpr double kAbsolute = 1e-6;
constexpr double kRelative = 1.3e-6;

// Every actor policies/pytorch/regenerate.py writes.
const std::vector<std::string>& actors() {
  static const std::vector<std::string> names = {"gaussian_actor",    "tanh_gaussian_actor",
                                                 "categorical_actor", "composite_actor",
                                                 "gru_actor",         "torchscript_actor"};
  return names;
}

// The reference's sections per composite_lp_aggregate mode.
struct Mode {
  std::string name;
  bool aggregate;
};
const std::vector<Mode>& modes() {
  static const std::vector<Mode> all = {{"lp_aggregate_false", false}, {"lp_aggregate_true", true}};
  return all;
}

std::string exports_dir() {
  const char* dir = std::getenv("TDP_PYTORCH_EXPORTS");
  return dir != nullptr && *dir != '\0' ? dir : "policies/pytorch";
}

// NAME.reference.pbtxt: a tdpolicy.Parameters message used as a list of named tensors.
Tensors read_reference(const std::string& name) {
  const std::string path = exports_dir() + "/" + name + ".reference.pbtxt";
  tdpolicy::Parameters reference;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(testing::read_file(path), &reference)) << path;
  Tensors tensors;
  for (const auto& named : reference.tensors()) {
    auto value = from_tensor_proto(named.tensor());
    EXPECT_OK(value) << path << ": " << named.name();
    EXPECT_TRUE(tensors.count(named.name()) == 0) << path << ": " << named.name() << " twice";
    if (value.ok()) tensors[named.name()] = *value;
  }
  return tensors;
}

// The reference's entries under "PREFIX/", keyed by the rest of their name.
Tensors section(const Tensors& reference, const std::string& prefix) {
  Tensors out;
  for (const auto& [name, value] : reference) {
    if (name.rfind(prefix + "/", 0) == 0) out[name.substr(prefix.size() + 1)] = value;
  }
  return out;
}

// Every leaf of `td`, keyed as specs write keys ("action/type").
Tensors leaves(const TensorDict& td) {
  Tensors out;
  for (const auto& [key, entry] : td.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    out[key_string(key)] = entry.tensor();
  }
  return out;
}

TensorDict tensordict_of(const Tensors& tensors) {
  std::vector<int64_t> batch;
  if (!tensors.empty()) batch = {tensors.begin()->second.size(0)};
  TensorDict td(batch);
  for (const auto& [key, value] : tensors) {
    auto parsed = parse_key(key);
    EXPECT_OK(parsed) << "reference entry " << key;
    if (parsed.ok()) td.set(*parsed, value);
  }
  return td;
}

std::string names_of(const std::set<std::string>& names) {
  std::ostringstream out;
  out << "{";
  for (const auto& name : names) out << (name == *names.begin() ? "" : ", ") << '"' << name << '"';
  return out.str() + "}";
}

void expect_close(const at::Tensor& cpp, const at::Tensor& python, const std::string& what) {
  EXPECT_EQ(cpp.sizes(), python.sizes()) << what << ": shape";
  EXPECT_EQ(cpp.scalar_type(), python.scalar_type()) << what << ": dtype";
  if (cpp.sizes() != python.sizes()) return;
  const at::Tensor reference = python.to(at::kDouble);
  const double worst =
      cpp.numel() == 0 ? 0.0
                       : ((cpp.to(at::kDouble) - reference).abs() - kRelative * reference.abs()).max().item<double>();
  EXPECT_LE(worst, kAbsolute) << what << ": C++ " << cpp << "\nPython " << python;
}

// The same keys (as sets: a missing or extra key fails), and each entry close.
void expect_same_entries(const Tensors& cpp, const Tensors& python, const std::string& what) {
  std::set<std::string> cpp_keys, python_keys, only_cpp, only_python;
  for (const auto& [key, value] : cpp) cpp_keys.insert(key);
  for (const auto& [key, value] : python) python_keys.insert(key);
  for (const auto& key : cpp_keys) {
    if (!python_keys.count(key)) only_cpp.insert(key);
  }
  for (const auto& key : python_keys) {
    if (!cpp_keys.count(key)) only_python.insert(key);
  }
  EXPECT_EQ(cpp_keys, python_keys) << what << ": the key sets differ; only in C++: " << names_of(only_cpp)
                                   << ", only in Python: " << names_of(only_python);
  for (const auto& [key, value] : python) {
    auto found = cpp.find(key);
    if (found != cpp.end()) expect_close(found->second, value, what + " \"" + key + "\"");
  }
}

struct Case {
  std::string actor;
  Mode mode;
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.actor << " under " << c.mode.name; }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.actor + "_" + info.param.mode.name;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const auto& actor : actors()) {
    for (const auto& mode : modes()) all.push_back({actor, mode});
  }
  return all;
}

class PytorchInteropTest : public ::testing::TestWithParam<Case> {};

// The whole output TensorDict under the deterministic interaction type, and the log-probs of
// given actions, as tensordict computes them.
TEST_P(PytorchInteropTest, MatchesTensordict) {
  const Case& c = GetParam();
  const Tensors reference = read_reference(c.actor);
  const Tensors inputs = section(reference, "inputs");
  const Tensors actions = section(reference, "actions");
  const Tensors outputs = section(reference, c.mode.name + "/outputs");
  const Tensors log_probs = section(reference, c.mode.name + "/log_prob");
  ASSERT_FALSE(inputs.empty()) << "no inputs/ in the reference";
  ASSERT_FALSE(actions.empty()) << "no actions/ in the reference";
  ASSERT_FALSE(outputs.empty()) << "no " << c.mode.name << "/outputs/ in the reference";
  ASSERT_FALSE(log_probs.empty()) << "no " << c.mode.name << "/log_prob/ in the reference";

  // Log-prob keys follow the mode at construction, as in tensordict: load under it.
  nn::CompositeLpAggregateGuard aggregate(c.mode.aggregate, /*thread_local_only=*/true);
  LoadOptions options;
  // The spec's self test holds per-entry log-probs (the default mode's keys).
  options.run_self_tests = !c.mode.aggregate;
  ASSERT_OK_AND_ASSIGN(Policy policy, load_policy(exports_dir() + "/" + c.actor + ".pbtxt", options));

  TensorDict out = testing::run(policy, tensordict_of(inputs), InteractionType::kDeterministic);
  expect_same_entries(leaves(out), outputs, "deterministic output");

  auto actor = std::dynamic_pointer_cast<nn::ProbabilisticTensorDictSequentialImpl>(policy.module);
  ASSERT_NE(actor, nullptr) << "the policy is not a ProbabilisticTensorDictSequential";
  TensorDict given = tensordict_of(inputs);
  given.update(tensordict_of(actions));
  nn::LogProb lp;
  {
    nn::InteractionTypeGuard deterministic(InteractionType::kDeterministic, /*thread_local_only=*/true);
    lp = actor->log_prob(given.clone(/*deep=*/false));
  }
  Tensors cpp_log_probs;
  if (const auto* td = std::get_if<TensorDict>(&lp)) {
    cpp_log_probs = leaves(*td);
  } else {
    // One tensor: named by the actor's one log-prob key, as the reference names Python's.
    const std::vector<NestedKey> keys = actor->log_prob_keys();
    ASSERT_EQ(keys.size(), 1u) << "log_prob returned one tensor but the actor has " << keys.size()
                               << " log-prob keys";
    cpp_log_probs[key_string(keys[0])] = std::get<at::Tensor>(lp);
  }
  expect_same_entries(cpp_log_probs, log_probs, "log_prob of the given actions");
}

INSTANTIATE_TEST_SUITE_P(Exports, PytorchInteropTest, ::testing::ValuesIn(cases()), case_name);

TEST(PytorchInterop, TheExportedParameterNamesAreTheLoadersOwn) {
  for (const std::string& name : actors()) {
    auto spec = read_spec(exports_dir() + "/" + name + ".pbtxt");
    ASSERT_OK(spec);
    tdpolicy::PolicySpec seeded;
    *seeded.mutable_module() = spec->module();
    *seeded.mutable_inputs() = spec->inputs();
    seeded.set_init_seed(0);
    auto policy = build_policy(seeded, name, exports_dir());
    ASSERT_OK(policy);
    std::vector<std::string> cpp_names;
    for (const auto& item : policy->module->named_parameters()) cpp_names.push_back(item.key());
    std::vector<std::string> python_names;
    for (const auto& named : spec->parameters().tensors()) python_names.push_back(named.name());
    EXPECT_EQ(cpp_names, python_names) << name;
  }
}

// The network torch.jit.script'ed and torch.jit.save'd by the Python side, loaded on its own:
// it writes what the Python TensorDictModule around it wrote.
TEST(PytorchInterop, TheTorchScriptFileLoadsAndRuns) {
  const Tensors reference = read_reference("torchscript_actor");
  nn::TensorDictModule module = nn::load_scripted_module(exports_dir() + "/torchscript_actor.pt",
                                                         nn::TensorDictModuleOptions({"observation"}, {"loc", "scale"}));
  TensorDict out = module->forward(tensordict_of(section(reference, "inputs")));
  Tensors python = section(reference, "lp_aggregate_false/outputs");
  ASSERT_TRUE(python.count("loc") && python.count("scale"));
  expect_close(out.get("loc"), python.at("loc"), "loc");
  expect_close(out.get("scale"), python.at("scale"), "scale");
}

}  // namespace
}  // namespace tdp::policy
