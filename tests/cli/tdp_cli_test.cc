// Runs the built `tdp` binary on tests/cli/testdata and checks exit codes, what goes to stdout
// and stderr, the JSON contract, and that `run` and `bench` call the policy as tdp::actor::Actor
// does (the same output for the same options, the recurrent state handled as the actor does).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/cli/json_tensordict.h"
#include "tdpolicy/spec.pb.h"
#include "tests/testing/files.h"

namespace {

namespace test_util = tdp::test_util;

using ::testing::HasSubstr;
using ::testing::StartsWith;

using test_util::read_file;
using test_util::runfile;
using test_util::temp_path;
using test_util::write_file;
using Result = test_util::CommandResult;

// `env` is prepended to the command line ("NAME=value ").
Result tdp(const std::vector<std::string>& args, const std::string& stdin_text = "", const std::string& env = "") {
  return test_util::run_command(runfile("sdk/cli/tdp"), args, stdin_text, env);
}

const std::string kActor = runfile("tests/cli/testdata/actor.pbtxt");
const std::string kInput = runfile("tests/cli/testdata/input.json");
const std::string kRecurrent = runfile("policies/recurrent_gru.pbtxt");

google::protobuf::Struct parse_json(const std::string& text) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &object);
  EXPECT_TRUE(status.ok()) << status << "\n" << text;
  return object;
}

// The nested list at `path` ("goal/embedding") as rows of numbers.
std::vector<std::vector<double>> matrix(const google::protobuf::Struct& object, const std::vector<std::string>& path) {
  const google::protobuf::Struct* level = &object;
  for (size_t i = 0; i + 1 < path.size(); ++i) level = &level->fields().at(path[i]).struct_value();
  std::vector<std::vector<double>> rows;
  for (const auto& row : level->fields().at(path.back()).list_value().values()) {
    rows.emplace_back();
    for (const auto& value : row.list_value().values()) rows.back().push_back(value.number_value());
  }
  return rows;
}

TEST(TdpCli, UsageErrorsExitWithTwo) {
  Result none = tdp({});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.out, "");
  EXPECT_THAT(none.err, HasSubstr("usage: tdp <command> SPEC [flags]"));

  Result unknown = tdp({"frobnicate", kActor});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, StartsWith("tdp: unknown command \"frobnicate\"\n"));
  EXPECT_THAT(unknown.err, HasSubstr("validate SPEC"));

  Result no_spec = tdp({"validate"});
  EXPECT_EQ(no_spec.exit_code, 2);
  EXPECT_THAT(no_spec.err, StartsWith("tdp: validate needs a SPEC file\n"));

  Result two_specs = tdp({"describe", kActor, kActor});
  EXPECT_EQ(two_specs.exit_code, 2);
  EXPECT_THAT(two_specs.err, StartsWith("tdp: describe takes one SPEC file, got 2 arguments\n"));

  Result bad_flag = tdp({"run", kActor, "--inptu=x.json"});
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_THAT(bad_flag.err, StartsWith("tdp: unknown flag --inptu=x.json\n"));

  Result no_input = tdp({"run", kActor});
  EXPECT_EQ(no_input.exit_code, 2);
  EXPECT_THAT(no_input.err, StartsWith("tdp: run needs --input=FILE.json (or --input=- for stdin)\n"));

  Result bad_interaction = tdp({"run", kActor, "--input=" + kInput, "--interaction=greedy"});
  EXPECT_EQ(bad_interaction.exit_code, 2);
  EXPECT_THAT(bad_interaction.err, StartsWith("tdp: --interaction: "));
  EXPECT_THAT(bad_interaction.err, HasSubstr("greedy"));

  Result bad_aggregate = tdp({"run", kActor, "--input=" + kInput, "--lp_aggregate=maybe"});
  EXPECT_EQ(bad_aggregate.exit_code, 2);
  EXPECT_THAT(bad_aggregate.err, StartsWith("tdp: --lp_aggregate: expected true or false, got \"maybe\"\n"));

  Result bad_seed = tdp({"run", kActor, "--input=" + kInput, "--seed=-3"});
  EXPECT_EQ(bad_seed.exit_code, 2);
  EXPECT_THAT(bad_seed.err, StartsWith("tdp: --seed: expected a non-negative integer, got \"-3\"\n"));

  Result bad_backend = tdp({"run", kActor, "--input=" + kInput, "--backend=gpu"});
  EXPECT_EQ(bad_backend.exit_code, 2);
  EXPECT_THAT(bad_backend.err, StartsWith("tdp: --backend: expected auto, libtorch or fused, got \"gpu\"\n"));

  Result bad_device = tdp({"run", kActor, "--input=" + kInput, "--device=gpu"});
  EXPECT_EQ(bad_device.exit_code, 2);
  EXPECT_THAT(bad_device.err, StartsWith("tdp: --device: expected cpu, cuda or cuda:N, got \"gpu\"\n"));
  Result bad_index = tdp({"run", kActor, "--input=" + kInput, "--device=cuda:x"});
  EXPECT_EQ(bad_index.exit_code, 2);
  EXPECT_THAT(bad_index.err, StartsWith("tdp: --device: expected cpu, cuda or cuda:N, got \"cuda:x\"\n"));
  Result bad_graph = tdp({"bench", kActor, "--batch=1", "--cuda_graph=yes"});
  EXPECT_EQ(bad_graph.exit_code, 2);
  EXPECT_THAT(bad_graph.err, StartsWith("tdp: --cuda_graph: expected spec, on or off, got \"yes\"\n"));

  Result no_batch = tdp({"bench", kActor});
  EXPECT_EQ(no_batch.exit_code, 2);
  EXPECT_THAT(no_batch.err, StartsWith("tdp: bench needs --batch=B with B > 0\n"));

  Result huge_bench = tdp({"bench", kActor, "--batch=1", "--iterations=1000000000000"});
  EXPECT_EQ(huge_bench.exit_code, 2);
  EXPECT_THAT(huge_bench.err,
              StartsWith("tdp: --iterations: 1000000000000 is more than the limit of 10,000,000 calls (run several "
                         "benches)\n"));

  // The random inputs are bounded like a declared tensor before they are made.
  Result huge_batch = tdp({"bench", kActor, "--batch=100000000"});
  EXPECT_EQ(huge_batch.exit_code, 2);
  EXPECT_THAT(
      huge_batch.err,
      StartsWith("tdp: --batch: the input \"observation\" at batch 100000000 has 400000000 elements, more than "
                 "the limit of 268435456 (max_tensor_elements: raise it with LoadOptions.limits.max_tensor_elements "
                 "or the tdp flag --max_tensor_elements)\n"));

  Result many_threads = tdp({"bench", kActor, "--batch=1", "--threads=100000"});
  EXPECT_EQ(many_threads.exit_code, 2);
  EXPECT_THAT(many_threads.err, StartsWith("tdp: --threads: 100000 is more than "));

  Result help = tdp({"help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, StartsWith("usage: tdp <command> SPEC [flags]\n"));
}

TEST(TdpCli, Validate) {
  Result ok = tdp({"validate", kActor});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "OK: cli_test_actor 0.1\n");
  EXPECT_EQ(ok.err, "");

  Result missing = tdp({"validate", temp_path("nothing.pbtxt")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.out, "");
  EXPECT_THAT(missing.err, HasSubstr("nothing.pbtxt: cannot open the spec file"));

  std::string spec = read_file(kActor);
  const std::string normal = "distribution: \"normal\"";
  spec.replace(spec.find(normal), normal.size(), "distribution: \"gaussian\"");
  const std::string bad = temp_path("bad_distribution.pbtxt");
  write_file(bad, spec);
  Result invalid = tdp({"validate", bad});
  EXPECT_EQ(invalid.exit_code, 1);
  EXPECT_EQ(invalid.out, "");
  EXPECT_THAT(invalid.err, HasSubstr("bad_distribution.pbtxt"));
  EXPECT_THAT(invalid.err, HasSubstr("gaussian"));
}

// A self test built from what `tdp run` printed passes `tdp validate`; a wrong one fails it, and
// ends `tdp run --self_tests`.
TEST(TdpCli, ValidateRunsSelfTests) {
  Result run = tdp({"run", kActor, "--input=" + kInput, "--interaction=deterministic"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto action = matrix(parse_json(run.out), {"action"});
  ASSERT_EQ(action.size(), 3u);

  const auto float_bytes = [](const std::vector<std::vector<double>>& rows) {
    std::string bytes;
    for (const auto& row : rows) {
      for (double value : row) {
        const float f = static_cast<float>(value);
        bytes.append(reinterpret_cast<const char*>(&f), sizeof f);
      }
    }
    return bytes;
  };
  const auto escaped = [](const std::string& bytes) {
    std::string out;
    char buffer[8];
    for (unsigned char c : bytes) {
      std::snprintf(buffer, sizeof buffer, "\\%03o", c);
      out += buffer;
    }
    return out;
  };
  const auto self_test = [&](const std::vector<std::vector<double>>& expected) {
    const std::vector<std::vector<double>> observation{{0.5, -1.0, 0.25, 2.0}, {0, 0, 0, 0}, {1.5, 1.0, -0.5, -2.0}};
    const std::vector<std::vector<double>> position{{1, 2}, {0, 0}, {-1, 0.5}};
    return "self_tests {\n"
           "  inputs { name: \"observation\" tensor { dtype: FLOAT32 shape: [3, 4] data: \"" +
           escaped(float_bytes(observation)) +
           "\" } }\n"
           "  inputs { name: \"goal/position\" tensor { dtype: FLOAT32 shape: [3, 2] data: \"" +
           escaped(float_bytes(position)) +
           "\" } }\n"
           "  expected_outputs { name: \"action\" tensor { dtype: FLOAT32 shape: [3, 2] data: \"" +
           escaped(float_bytes(expected)) + "\" } }\n}\n";
  };

  const std::string good = temp_path("self_test_good.pbtxt");
  write_file(good, read_file(kActor) + self_test(action));
  Result passes = tdp({"validate", good});
  EXPECT_EQ(passes.exit_code, 0) << passes.err;
  EXPECT_EQ(passes.out, "OK: cli_test_actor 0.1\n");
  // Self tests hold per-part log-probs whatever the environment's default.
  Result aggregating_env = tdp({"validate", good}, "", "COMPOSITE_LP_AGGREGATE=1 ");
  EXPECT_EQ(aggregating_env.exit_code, 0) << aggregating_env.err;

  auto wrong = action;
  wrong[1][0] += 0.5;
  const std::string bad = temp_path("self_test_bad.pbtxt");
  write_file(bad, read_file(kActor) + self_test(wrong));
  Result fails = tdp({"validate", bad});
  EXPECT_EQ(fails.exit_code, 1);
  EXPECT_EQ(fails.out, "");
  EXPECT_THAT(fails.err, HasSubstr("action"));

  // run --self_tests: the self tests, then the run, in one process; a failing self test ends it
  // with validate's message and prints no output.
  const std::vector<std::string> run_flags{"--input=" + kInput, "--interaction=deterministic", "--self_tests"};
  std::vector<std::string> tested_run{"run", good};
  tested_run.insert(tested_run.end(), run_flags.begin(), run_flags.end());
  Result tested = tdp(tested_run);
  EXPECT_EQ(tested.exit_code, 0) << tested.err;
  EXPECT_EQ(tested.out, run.out);
  tested_run[1] = bad;
  Result untested = tdp(tested_run);
  EXPECT_EQ(untested.exit_code, 1);
  EXPECT_EQ(untested.out, "");
  EXPECT_EQ(untested.err, fails.err);
}

TEST(TdpCli, Describe) {
  Result describe = tdp({"describe", kActor});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_THAT(describe.out, StartsWith("cli_test_actor 0.1\nGaussian actor used by tests/cli\n"));
  EXPECT_THAT(describe.out, HasSubstr("inputs:\n  observation  [4]  FLOAT32\n  goal/position  [2]  FLOAT32\n"));
  EXPECT_THAT(describe.out, HasSubstr("outputs:\n  action  [2]  FLOAT32\n  action_log_prob  [2]  FLOAT32\n  goal/embedding  [3]  FLOAT32\n"));
  EXPECT_THAT(describe.out, HasSubstr("module:\nProbabilisticTensorDictSequential("));
  EXPECT_THAT(describe.out, HasSubstr("key graph (reads -> writes):\n  0 (TensorDictModule): observation -> params\n"));
  // MLP 4 -> 8 -> 4: 4*8 + 8 + 8*4 + 4; Linear 2 -> 3: 2*3 + 3.
  EXPECT_THAT(describe.out, HasSubstr("parameters:\n  trunk (TensorDictModule): 76\n  goal (TensorDictModule): 9\n"));
  EXPECT_THAT(describe.out, HasSubstr("  total: 85\n"));
  // Two inputs, each read by its own network: every module lowers to the fused plan.
  EXPECT_THAT(describe.out, HasSubstr("backend (auto: the fused CPU plan up to batch 16384, LibTorch above):\n"
                                      "  module.probabilistic_sequential.modules[0]: fused (Mlp 4->4, tanh)\n"
                                      "  module.probabilistic_sequential.modules[1]: fused (Linear)\n"));
}

TEST(TdpCli, DescribeDotPrintsTheKeyGraph) {
  Result dot = tdp({"describe", kActor, "--dot"});
  ASSERT_EQ(dot.exit_code, 0) << dot.err;
  EXPECT_THAT(dot.out, StartsWith("digraph keys {\n"));
  EXPECT_THAT(dot.out, HasSubstr("\"key:observation\" -> \"module:0\";"));
  EXPECT_THAT(dot.out, HasSubstr("\"key:goal/position\""));
  EXPECT_THAT(dot.out, ::testing::EndsWith("}\n"));
}

TEST(TdpCli, DescribeShowsTheFusedPathOfEachModule) {
  Result describe = tdp({"describe", runfile("policies/pendulum_tanh_gaussian.pbtxt")});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_THAT(describe.out, HasSubstr("  module.probabilistic_sequential.modules[0]: fused (Mlp 3->2, tanh)\n"
                                      "  module.probabilistic_sequential.modules[1]: fused (NormalParamExtractor)\n"
                                      "  module.probabilistic_sequential.modules[2]: fused (tanh_normal, default "
                                      "deterministic)\n"));
}

TEST(TdpCli, BackendFusedOnAnAutoregressivePolicyFailsNamingTheModule) {
  const std::string autoregressive = runfile("policies/goal_autoregressive.pbtxt");
  Result run = tdp({"bench", autoregressive, "--batch=2", "--iterations=1", "--warmup=0", "--backend=fused"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("backend kFused: not lowerable to the fused CPU plan: "
                                 "module.probabilistic_sequential.modules[2]"));
  Result libtorch = tdp({"bench", autoregressive, "--batch=2", "--iterations=1", "--warmup=0", "--backend=libtorch"});
  EXPECT_EQ(libtorch.exit_code, 0) << libtorch.err;
  EXPECT_THAT(libtorch.out, HasSubstr(" us"));
  // A recurrent policy lowers: its kept state runs on the plan.
  Result recurrent = tdp({"bench", kRecurrent, "--batch=2", "--iterations=1", "--warmup=0", "--backend=fused"});
  EXPECT_EQ(recurrent.exit_code, 0) << recurrent.err;
}

TEST(TdpCli, RunPrintsTheOutputTensorDictAsJson) {
  Result run = tdp({"run", kActor, "--input=" + kInput, "--interaction=mode"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const google::protobuf::Struct out = parse_json(run.out);
  for (const char* key : {"observation", "goal", "params", "loc", "scale", "action", "action_log_prob"}) {
    EXPECT_TRUE(out.fields().count(key)) << key << "\n" << run.out;
  }
  EXPECT_EQ(matrix(out, {"observation"}),
            (std::vector<std::vector<double>>{{0.5, -1.0, 0.25, 2.0}, {0, 0, 0, 0}, {1.5, 1.0, -0.5, -2.0}}));
  EXPECT_EQ(matrix(out, {"goal", "position"}), (std::vector<std::vector<double>>{{1, 2}, {0, 0}, {-1, 0.5}}));
  EXPECT_EQ(matrix(out, {"goal", "embedding"}).size(), 3u);
  EXPECT_EQ(matrix(out, {"goal", "embedding"})[0].size(), 3u);
  // The mode of a normal is its loc.
  EXPECT_EQ(matrix(out, {"action"}), matrix(out, {"loc"}));
  EXPECT_EQ(matrix(out, {"action"})[0].size(), 2u);

  // stdin gives the same; the weights come from init_seed, so every run agrees.
  Result from_stdin = tdp({"run", kActor, "--input=-", "--interaction=mode"}, read_file(kInput));
  EXPECT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(from_stdin.out, run.out);

  // Aggregated log-probs go where tensordict puts them, under "sample_log_prob".
  Result aggregated = tdp({"run", kActor, "--input=" + kInput, "--interaction=mode", "--lp_aggregate=true"});
  ASSERT_EQ(aggregated.exit_code, 0) << aggregated.err;
  const google::protobuf::Struct summed = parse_json(aggregated.out);
  EXPECT_EQ(summed.fields().count("action_log_prob"), 0u) << aggregated.out;
  EXPECT_EQ(matrix(summed, {"sample_log_prob"}), matrix(out, {"action_log_prob"}));
}

TEST(TdpCli, RandomRunsAreReproducibleWithASeed) {
  const std::vector<std::string> base{"run", kActor, "--input=" + kInput, "--interaction=random"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    Result result = tdp(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return matrix(parse_json(result.out), {"action"});
  };
  const auto first = with({"--seed=1"});
  EXPECT_EQ(with({"--seed=1"}), first);
  EXPECT_NE(with({"--seed=2"}), first);
  Result mode = tdp({"run", kActor, "--input=" + kInput, "--interaction=mode"});
  EXPECT_NE(matrix(parse_json(mode.out), {"action"}), first);
}

TEST(TdpCli, RunRejectsBadInputOnStderr) {
  const std::string bad_json = temp_path("bad.json");
  write_file(bad_json, R"({"observation": [[0.5, -1.0, 0.25, 2.0]], )");
  Result syntax = tdp({"run", kActor, "--input=" + bad_json});
  EXPECT_EQ(syntax.exit_code, 1);
  EXPECT_EQ(syntax.out, "");
  EXPECT_THAT(syntax.err, HasSubstr("bad.json: the input is not valid JSON"));

  Result shape = tdp({"run", kActor, "--input=-"},
                     R"({"observation": [[0.5, -1.0, 0.25]], "goal": {"position": [[1, 2]]}})");
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_EQ(shape.out, "");
  EXPECT_THAT(shape.err,
              HasSubstr("stdin: input \"observation\": shape [1, 3] does not end with the declared per-env shape [4]"));

  Result missing = tdp({"run", kActor, "--input=-"}, R"({"observation": [[0.5, -1.0, 0.25, 2.0]]})");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("stdin: missing input \"goal/position\" (declared shape [2], FLOAT32)"));

  Result no_file = tdp({"run", kActor, "--input=" + temp_path("absent.json")});
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_THAT(no_file.err, HasSubstr("absent.json: cannot open the input file"));
}

// Hostile inputs: each ends in exit status 1 (2 for a bad flag) and a message that
// names the file and the limit, without a crash, a hang or an unbounded allocation.
TEST(TdpCli, HostileFilesEndInClearErrors) {
  Result zero = tdp({"validate", "/dev/zero"});
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_EQ(zero.err, "tdp: INVALID_ARGUMENT: /dev/zero: the spec file is a character device, not a regular file\n");

  const std::string dir = temp_path("");
  Result directory = tdp({"describe", dir});
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_THAT(directory.err, HasSubstr(": the spec file is a directory, not a regular file"));

  Result input_zero = tdp({"run", kActor, "--input=/dev/zero"});
  EXPECT_EQ(input_zero.exit_code, 1);
  EXPECT_EQ(input_zero.err, "tdp: INVALID_ARGUMENT: /dev/zero: the input file is a character device, not a regular file\n");

  Result too_big = tdp({"run", kActor, "--input=" + kInput, "--max_input_bytes=10"});
  EXPECT_EQ(too_big.exit_code, 1);
  EXPECT_THAT(too_big.err, HasSubstr("more than the limit of 10 (max_input_bytes: raise it with "
                                     "LoadOptions.limits.max_input_bytes or the tdp flag --max_input_bytes)"));
  Result stdin_too_big = tdp({"run", kActor, "--input=-", "--max_input_bytes=10"}, read_file(kInput));
  EXPECT_EQ(stdin_too_big.exit_code, 1);
  EXPECT_THAT(stdin_too_big.err, HasSubstr("stdin: the input (read so far) has "));

  // 100,000 nested lists (200 KB) never finished; now the depth is counted before parsing.
  const std::string deep = temp_path("deep.json");
  write_file(deep, "{\"observation\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  Result deep_run = tdp({"run", kActor, "--input=" + deep});
  EXPECT_EQ(deep_run.exit_code, 1);
  EXPECT_THAT(deep_run.err, HasSubstr("deep.json: the input's JSON nesting has 33 levels (or more), more than the "
                                      "limit of 32 (max_json_depth: raise it with"));
  Result too_deep_flag = tdp({"run", kActor, "--input=" + deep, "--max_json_depth=51"});
  EXPECT_EQ(too_deep_flag.exit_code, 2);
  EXPECT_EQ(too_deep_flag.err, "tdp: --max_json_depth: 51 is more than 50, the deepest protobuf's JSON parser reads\n");
  Result bad_limit = tdp({"validate", kActor, "--max_total_elements=0"});
  EXPECT_EQ(bad_limit.exit_code, 2);
  EXPECT_EQ(bad_limit.err, "tdp: --max_total_elements: expected 1 or more, got 0\n");

  // A text spec nested 3,300 deep crashed protobuf's parser.
  const std::string nested = temp_path("nested.pbtxt");
  std::string text = "name: \"x\" module { ";
  for (int i = 0; i < 3300; ++i) text += "sequential { modules { ";
  for (int i = 0; i < 3300; ++i) text += "} } ";
  write_file(nested, text + "}");
  Result nested_validate = tdp({"validate", nested});
  EXPECT_EQ(nested_validate.exit_code, 1);
  EXPECT_THAT(nested_validate.err, HasSubstr("nested.pbtxt: the spec's nesting has 101 levels (or more), more than "
                                             "the limit of 100 (max_nesting_depth"));

  // The actor's own spec, with the objects limit below its count: the flag reaches the loader.
  Result few_objects = tdp({"validate", kActor, "--max_spec_objects=10"});
  EXPECT_EQ(few_objects.exit_code, 1);
  EXPECT_THAT(few_objects.err,
              HasSubstr("messages and strings (or more), more than the limit of 10 (max_spec_objects"));

  // parameters_file: "/dev/zero" is outside the spec's folder, and not a regular file when allowed.
  std::string spec = read_file(kActor);
  const size_t seed = spec.find("\ninit_seed: 7\n");
  ASSERT_NE(seed, std::string::npos);
  spec.replace(seed, std::string("\ninit_seed: 7\n").size(), "\nparameters_file: \"/dev/zero\"\n");
  const std::string zero_params = temp_path("zero_params.pbtxt");
  write_file(zero_params, spec);
  Result outside = tdp({"validate", zero_params});
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_THAT(outside.err, HasSubstr("zero_params.pbtxt: parameters_file: \"/dev/zero\" is an absolute path (hint: "
                                     "name a file in the spec's folder, or allow outside files with "
                                     "LoadOptions.allow_outside_files or the tdp flag --allow_outside_files)"));
  Result allowed = tdp({"validate", zero_params, "--allow_outside_files"});
  EXPECT_EQ(allowed.exit_code, 1);
  EXPECT_THAT(allowed.err, HasSubstr("zero_params.pbtxt: parameters_file: /dev/zero: the parameters file is a "
                                     "character device, not a regular file"));
}

TEST(TdpCli, MeanIsNotAnActionOfACategoricalPolicy) {
  const std::string spec = temp_path("categorical.pbtxt");
  write_file(spec, R"pb(
    name: "categorical" version: "1" init_seed: 1
    inputs { key: "observation" shape: 4 }
    output_keys: ["action", "action_log_prob"]
    module { probabilistic_sequential {
      modules { network { in_keys: "observation" out_keys: "logits"
                          network { linear { in_features: 4 out_features: 2 } } } }
      modules { probabilistic { in_keys: "logits" out_keys: "action" distribution: "categorical"
                                return_log_prob: true } } } }
  )pb");
  const std::string input = temp_path("categorical.json");
  write_file(input, R"({"observation": [[0.1, 0.2, 0.3, 0.4]]})");
  Result mean = tdp({"run", spec, "--input=" + input, "--interaction=mean"});
  EXPECT_EQ(mean.exit_code, 1);
  EXPECT_EQ(mean.out, "");
  EXPECT_THAT(mean.err, HasSubstr("interaction type MEAN: Categorical has no mean (its actions are discrete); "
                                  "use MODE or DETERMINISTIC"));
}

TEST(TdpCli, Bench) {
  Result bench = tdp({"bench", kActor, "--batch=8", "--iterations=20", "--warmup=2", "--threads=1"});
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_THAT(bench.out, StartsWith("cli_test_actor 0.1: batch 8, 20 calls after 2 warmup, 1 threads, cpu\n"));
  EXPECT_THAT(bench.out, HasSubstr("latency per call: mean "));
  EXPECT_THAT(bench.out, HasSubstr(" us, p50 "));
  EXPECT_THAT(bench.out, HasSubstr(" us, p99 "));
  EXPECT_THAT(bench.out, HasSubstr("calls/s, "));
}

// A CUDA device where this binary cannot use one is a load error naming the device (exit 1);
// on a GPU (tests/gpu/) the same command runs.
TEST(TdpCli, ACudaDeviceWithoutOneIsALoadError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible here";
  Result run = tdp({"run", kActor, "--input=" + kInput, "--device=cuda:0", "--cuda_graph=on"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("device cuda:0 requested, but "));
}

// What tdp::actor::Actor prints for `input_json` with `options`, as `tdp run` prints it.
std::string actor_json(const std::string& spec, const std::string& input_json, tdp::actor::ActorOptions options) {
  auto actor = tdp::actor::Actor::load(spec, options.run_self_tests(false).return_all_entries(true));
  EXPECT_TRUE(actor.ok()) << actor.status();
  if (!actor.ok()) return "";
  auto td = tdp::cli::tensordict_from_json(input_json, (*actor)->signature().inputs, /*state_optional=*/true);
  EXPECT_TRUE(td.ok()) << td.status();
  if (!td.ok()) return "";
  auto json = tdp::cli::tensordict_to_json((*actor)->act(*td));
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *json : "";
}

// `run` is Actor::act with the options the flags name: the same entries, bit for bit.
TEST(TdpCli, RunComputesWhatAnActorWithTheSameOptionsComputes) {
  using tdp::actor::ActorOptions;
  using tdp::nn::InteractionType;
  const std::string input = read_file(kInput);
  // --seed seeds the actor's own stream: the same samples as an Actor with that seed.
  Result seeded = tdp({"run", kActor, "--input=" + kInput, "--interaction=random", "--seed=5"});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.err;
  EXPECT_EQ(seeded.out, actor_json(kActor, input, ActorOptions().seed(5).interaction_type(InteractionType::kRandom)));
  // Without --seed: an Actor's default seed.
  Result unseeded = tdp({"run", kActor, "--input=" + kInput, "--interaction=random"});
  ASSERT_EQ(unseeded.exit_code, 0) << unseeded.err;
  EXPECT_EQ(unseeded.out, actor_json(kActor, input, ActorOptions().interaction_type(InteractionType::kRandom)));
  // Without --interaction: each module's own default (here tensordict's, deterministic).
  Result by_default = tdp({"run", kActor, "--input=" + kInput});
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_EQ(by_default.out, actor_json(kActor, input, ActorOptions().interaction_type(std::nullopt)));
  EXPECT_NE(by_default.out, seeded.out);
  // --lp_aggregate is the actor's aggregation mode.
  Result aggregated = tdp({"run", kActor, "--input=" + kInput, "--interaction=mode", "--lp_aggregate=true"});
  ASSERT_EQ(aggregated.exit_code, 0) << aggregated.err;
  EXPECT_EQ(aggregated.out, actor_json(kActor, input,
                                       ActorOptions().interaction_type(InteractionType::kMode).composite_lp_aggregate(true)));
}

// A recurrent policy's state may be left out of the input: the actor starts it from zeros, as at
// a simulator's first step; given, it is used as is.
TEST(TdpCli, RunHandlesTheRecurrentStateAsTheActorDoes) {
  const std::string observation = R"("observation": [[0.5, -1, 0.25, 2], [0, 1, 0, -1]])";
  std::string zeros = "[0";
  for (int i = 1; i < 32; ++i) zeros += ", 0";
  zeros += "]";
  Result without = tdp({"run", kRecurrent, "--input=-", "--interaction=mode"}, "{" + observation + "}");
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(without.err, "");
  const google::protobuf::Struct out = parse_json(without.out);
  ASSERT_TRUE(out.fields().count("hidden")) << without.out;
  EXPECT_EQ(matrix(out, {"hidden"}).size(), 2u);
  EXPECT_EQ(matrix(out, {"hidden"})[0].size(), 32u);
  EXPECT_EQ(without.out, actor_json(kRecurrent, "{" + observation + "}",
                                    tdp::actor::ActorOptions().interaction_type(tdp::nn::InteractionType::kMode)));

  Result from_zeros = tdp({"run", kRecurrent, "--input=-", "--interaction=mode"},
                          "{" + observation + R"(, "hidden": [)" + zeros + ", " + zeros + "]}");
  ASSERT_EQ(from_zeros.exit_code, 0) << from_zeros.err;
  EXPECT_EQ(from_zeros.out, without.out);

  Result bench = tdp({"bench", kRecurrent, "--batch=4", "--iterations=5", "--warmup=1"});
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_THAT(bench.out, StartsWith("recurrent_gru 1: batch 4, 5 calls after 1 warmup, "));
}

// describe names the top-level modules of the sequence as the spec does, or the root alone.
TEST(TdpCli, DescribeListsTheSequencesModules) {
  Result recurrent = tdp({"describe", kRecurrent});
  ASSERT_EQ(recurrent.exit_code, 0) << recurrent.err;
  // GRUCell(4, 32): 3*32*(4+32) + 2*3*32; MLP 32 -> 64 -> 2: 32*64 + 64 + 64*2 + 2.
  EXPECT_THAT(recurrent.out, HasSubstr("parameters:\n  gru (TensorDictModule): 3,648\n  head (TensorDictModule): 2,242\n"
                                       "  actor (ProbabilisticTensorDictModule): 0\n  total: 5,890\n"));

  const std::string single = temp_path("single.pbtxt");
  write_file(single, R"pb(
    name: "single" version: "1" init_seed: 1
    inputs { key: "observation" shape: 4 }
    output_keys: ["action"]
    module { network { in_keys: "observation" out_keys: "action"
                       network { linear { in_features: 4 out_features: 2 } } } }
  )pb");
  Result root = tdp({"describe", single});
  ASSERT_EQ(root.exit_code, 0) << root.err;
  EXPECT_THAT(root.out, HasSubstr("parameters:\n  module (TensorDictModule): 10\n  total: 10\n"));
}

// The commands in tdp_main.cc's first comment, as written there.
TEST(TdpCli, TheCommandsInTheFileCommentRun) {
  const std::string cartpole = runfile("policies/cartpole_categorical.pbtxt");
  Result validate = tdp({"validate", cartpole});
  EXPECT_EQ(validate.exit_code, 0) << validate.err;
  EXPECT_THAT(validate.out, StartsWith("OK: cartpole_categorical "));
  Result describe = tdp({"describe", cartpole});
  EXPECT_EQ(describe.exit_code, 0) << describe.err;
  Result run = tdp({"run", cartpole, "--input=-", "--interaction=mode"}, R"({"observation": [[0.1, 0.2, 0.3, 0.4]]})");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("\"action\": [")) << run.out;
  Result bench = tdp({"bench", cartpole, "--batch=256", "--iterations=1000"});
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
}

}  // namespace
