// Hostile specs and parameter files: each case ends in a Status that names the file,
// the field or the limit, and how to raise it, before anything large is allocated: no crash, no
// hang, no unbounded allocation.
#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <limits>
#include <string>

#include "sdk/policy/limits.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"
#include "tests/policy/policy_test_util.h"
#include "tests/testing/log_capture.h"
#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::parse_text_or_fail;
using testing::temp_path;
using testing::write_file;

// A linear layer and a categorical head; each test breaks it in one place.
constexpr char kValid[] = R"pb(
  name: "t"
  inputs { key: "observation" shape: 4 }
  output_keys: "action"
  module {
    sequential {
      modules { network { in_keys: "observation" out_keys: "logits" network { linear { in_features: 4 out_features: 2 } } } }
      modules { probabilistic { in_keys: "logits" out_keys: "action" distribution: "categorical" } }
    }
  }
  init_seed: 1
)pb";

tdpolicy::PolicySpec valid() { return parse_text_or_fail(kValid); }

std::string message_of(const absl::Status& status) {
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

// A folder of its own under the test's scratch folder.
std::string folder(const std::string& name) {
  const std::string path = temp_path(name);
  ::mkdir(path.c_str(), 0755);
  return path;
}

TEST(Limits, TheBoundedReaderTakesRegularFilesOnly) {
  const std::string dir = folder("a_directory");
  EXPECT_EQ(message_of(read_bounded_file(dir, 100, "max_spec_bytes", "the spec file").status()),
            dir + ": the spec file is a directory, not a regular file");
  EXPECT_EQ(message_of(read_bounded_file("/dev/zero", 100, "max_spec_bytes", "the spec file").status()),
            "/dev/zero: the spec file is a character device, not a regular file");
  EXPECT_EQ(read_bounded_file(temp_path("missing"), 100, "max_spec_bytes", "the spec file").status().code(),
            absl::StatusCode::kNotFound);
  const std::string big = temp_path("big.pbtxt");
  write_file(big, std::string(101, ' '));
  EXPECT_EQ(message_of(read_bounded_file(big, 100, "max_spec_bytes", "the spec file").status()),
            big + ": the spec file has 101 bytes, more than the limit of 100 (max_spec_bytes: raise it with "
                  "LoadOptions.limits.max_spec_bytes or the tdp flag --max_spec_bytes)");
  ASSERT_OK_AND_ASSIGN(std::string content, read_bounded_file(big, 101, "max_spec_bytes", "the spec file"));
  EXPECT_EQ(content.size(), 101u);
}

TEST(Limits, SpecFilesThatAreNotFilesOrTooLarge) {
  const std::string dir = folder("spec_dir.pbtxt");
  EXPECT_EQ(message_of(load_policy(dir).status()), dir + ": the spec file is a directory, not a regular file");
  EXPECT_EQ(message_of(load_policy("/dev/zero").status()),
            "/dev/zero: the spec file is a character device, not a regular file");
  const std::string path = temp_path("small.pbtxt");
  write_file(path, kValid);
  LoadOptions options;
  options.limits.max_spec_bytes = 10;
  EXPECT_THAT(message_of(load_policy(path, options).status()),
              HasSubstr("more than the limit of 10 (max_spec_bytes: raise it with"));
  EXPECT_OK(load_policy(path));
}

// protobuf's text parser recursed ~3,250 levels into a SIGSEGV; every format stops at the limit.
TEST(Limits, NestingDepthInEveryFormat) {
  const int n = 3300;
  std::string deep = "name: \"x\" module { ";
  for (int i = 0; i < n; ++i) deep += "sequential { modules { ";
  for (int i = 0; i < n; ++i) deep += "} } ";
  deep += "}";
  EXPECT_EQ(message_of(parse_spec(deep, SpecFormat::kText, "deep.pbtxt").status()),
            "deep.pbtxt: the spec's nesting has 101 levels (or more), more than the limit of 100 "
            "(max_nesting_depth: raise it with LoadOptions.limits.max_nesting_depth or the tdp flag "
            "--max_nesting_depth)");
  // Braces inside strings and comments do not count.
  EXPECT_OK(parse_spec("name: \"{{{{{{\" # {{{{{{{{{\n description: '}}}{'", SpecFormat::kText, "ok.pbtxt",
                       Limits{.max_nesting_depth = 2}));
  std::string json = "{\"module\": ";
  for (int i = 0; i < n; ++i) json += "{\"sequential\": {\"modules\": [";
  json += std::string(n, ']');
  EXPECT_THAT(message_of(parse_spec(json, SpecFormat::kJson, "deep.json").status()),
              StartsWith("deep.json: the spec's nesting has 101 levels (or more), more than the limit of 100"));
  // Binary: a message built 120 deep serializes, and is refused when read back.
  tdpolicy::PolicySpec nested;
  tdpolicy::Module* module = nested.mutable_module();
  for (int i = 0; i < 120; ++i) module = module->mutable_sequential()->add_modules();
  const std::string bytes = nested.SerializeAsString();
  EXPECT_EQ(message_of(parse_spec(bytes, SpecFormat::kBinary, "deep.pb").status()),
            absl::StrCat("deep.pb: not a valid binary PolicySpec (", bytes.size(),
                         " bytes: malformed wire data, a field of the wrong type, or messages nested more than 100 "
                         "deep (max_nesting_depth: raise it with LoadOptions.limits.max_nesting_depth or the tdp "
                         "flag --max_nesting_depth))"));
  EXPECT_OK(parse_spec(bytes, SpecFormat::kBinary, "deep.pb", Limits{.max_nesting_depth = 300}));
}

int64_t depth_of(absl::string_view text, bool angle_brackets, bool hash_comments, int64_t stop_above) {
  return scan_text(text, angle_brackets, hash_comments, stop_above).depth;
}

// The pre-scan's own rules, byte by byte: what counts as a level and what is skipped.
TEST(Limits, NestingDepthCountsBracketsOutsideStringsAndComments) {
  EXPECT_EQ(depth_of("", true, true, 100), 0);
  EXPECT_EQ(depth_of("a { b [ c < d > ] }", true, true, 100), 3);
  EXPECT_EQ(depth_of("a { b [ c < d > ] }", /*angle_brackets=*/false, true, 100), 2);
  EXPECT_EQ(depth_of("{ } { { } }", true, true, 100), 2);
  // An unmatched closer does not go below zero, so it cannot hide a later level.
  EXPECT_EQ(depth_of("} } ] { {", true, true, 100), 2);
  // Strings in either quote, escaped quotes inside them, and a string that a newline ends.
  EXPECT_EQ(depth_of(R"(s: "{{\"{{" t: '[[\'[[' {)", true, true, 100), 1);
  EXPECT_EQ(depth_of("s: \"{{\n{ {", true, true, 100), 2);
  EXPECT_EQ(depth_of("s: \"unterminated {{{", true, true, 100), 0);
  EXPECT_EQ(depth_of("s: \"ends in an escape \\", true, true, 100), 0);
  // Comments to the end of the line, only where the format has them (JSON does not).
  EXPECT_EQ(depth_of("# {{{\n{", true, true, 100), 1);
  EXPECT_EQ(depth_of("# {{{\n{", true, /*hash_comments=*/false, 100), 4);
  // Stops counting once past the limit.
  EXPECT_EQ(depth_of(std::string(1000, '{'), true, true, 10), 11);
  // Bytes above 127 are text.
  EXPECT_EQ(depth_of("\xff{\x80[\xfe", true, true, 100), 2);
}

// Messages and strings, what parsers allocate one by one, counted before parsing in every format.
TEST(Limits, ObjectsAreCountedBeforeParsing) {
  EXPECT_EQ(scan_text(R"(a { b: "x" c < d: 'y' > e: [1, 2] } # { "z")", true, true, 100).objects, 4);
  EXPECT_EQ(scan_text(R"({"a": [{}, {}], "b": "{"})", false, false, 100).objects, 6);  // keys count too
  const std::string bytes = valid().SerializeAsString();
  const int64_t objects = binary_objects(bytes, *tdpolicy::PolicySpec::descriptor(), 100, 1000);
  EXPECT_GT(objects, 10);
  EXPECT_EQ(binary_objects(bytes, *tdpolicy::PolicySpec::descriptor(), 100, 5), 6) << "stops once past the limit";
  // Packed and unpacked scalars are not objects; a truncated message ends the count.
  EXPECT_EQ(binary_objects(std::string("\x22\x04\x12\x02\x01\x02", 6), *tdpolicy::PolicySpec::descriptor(), 100, 1000),
            1);
  EXPECT_EQ(binary_objects(std::string("\x22\x09\x0a", 3), *tdpolicy::PolicySpec::descriptor(), 100, 1000), 2);
}

// A file of 2-byte empty entries parses into 45 times its size: refused by count in every format,
// for the spec file and the parameters file alike.
TEST(Limits, AFloodOfEmptyEntriesIsRefusedBeforeParsing) {
  Limits limits;
  limits.max_spec_objects = 1000;
  std::string binary;
  for (int i = 0; i < 1001; ++i) binary += std::string("\x22\x00", 2);  // inputs {}
  EXPECT_EQ(message_of(parse_spec(binary, SpecFormat::kBinary, "flood.pb", limits).status()),
            "flood.pb: the spec file has 1001 messages and strings (or more), more than the limit of 1000 "
            "(max_spec_objects: raise it with LoadOptions.limits.max_spec_objects or the tdp flag --max_spec_objects)");
  std::string text;
  for (int i = 0; i < 1001; ++i) text += "inputs {}";
  EXPECT_THAT(message_of(parse_spec(text, SpecFormat::kText, "flood.pbtxt", limits).status()),
              StartsWith("flood.pbtxt: the spec file has 1001 messages and strings (or more)"));
  std::string json = "{\"inputs\": [";
  for (int i = 0; i < 1000; ++i) json += "{},";
  json += "{}]}";
  EXPECT_THAT(message_of(parse_spec(json, SpecFormat::kJson, "flood.json", limits).status()),
              StartsWith("flood.json: the spec file has 1003 messages and strings (or more)"));
  limits.max_spec_objects = 1003;
  EXPECT_OK(parse_spec(json, SpecFormat::kJson, "flood.json", limits));

  const std::string dir = folder("flood_params");
  std::string params;
  for (int i = 0; i < 2000; ++i) params += std::string("\x0a\x00", 2);  // tensors {}
  write_file(dir + "/p.bin", params);
  auto spec = valid();
  spec.clear_init_seed();
  spec.set_parameters_file("p.bin");
  LoadOptions options;
  options.limits.max_spec_objects = 1000;
  EXPECT_EQ(message_of(build_policy(spec, "t.pbtxt", dir, options).status()),
            dir +
                "/p.bin: the parameters file has 1001 messages and strings (or more), more than the limit of 1000 "
                "(max_spec_objects: raise it with LoadOptions.limits.max_spec_objects or the tdp flag "
                "--max_spec_objects)");
}

TEST(Limits, BinaryParseErrorsNameTheFileAndTheByteCount) {
  const std::string path = temp_path("garbage.pb");
  write_file(path, "\xff\xff\xff\xff garbage");
  EXPECT_THAT(message_of(load_policy(path).status()),
              StartsWith(path + ": not a valid binary PolicySpec (12 bytes: malformed wire data"));
}

TEST(Limits, BinaryParseErrorsOfAParametersFileNameItAndTheByteCount) {
  const std::string dir = folder("garbage_params");
  write_file(dir + "/p.bin", "\xff\xff\xff\xff garbage");
  auto spec = valid();
  spec.clear_init_seed();
  spec.set_parameters_file("p.bin");
  EXPECT_THAT(message_of(build_policy(spec, "t.pbtxt", dir).status()),
              StartsWith(dir + "/p.bin: not a valid binary Parameters (12 bytes: malformed wire data"));
}

// A parameter declared 2^40 elements with no data aborted in the allocator.
TEST(Limits, AHugeDeclaredParameterFailsBeforeAllocation) {
  auto spec = valid();
  spec.clear_init_seed();
  auto* tensor = spec.mutable_parameters()->add_tensors();
  tensor->set_name("module.0.module.weight");
  tensor->mutable_tensor()->set_dtype(tdpolicy::FLOAT32);
  tensor->mutable_tensor()->add_shape(int64_t{1} << 40);
  EXPECT_EQ(message_of(build_policy(spec, "t.pbtxt", ".").status()),
            "t.pbtxt: parameters.tensors[0] (\"module.0.module.weight\").tensor.shape: the parameter [1099511627776] "
            "has 1099511627776 elements, more than the limit of 268435456 (max_tensor_elements: raise it with "
            "LoadOptions.limits.max_tensor_elements or the tdp flag --max_tensor_elements)");
  // Raised, the limit lets it through to the byte count check, still before allocating.
  LoadOptions options;
  options.limits.max_tensor_elements = options.limits.max_total_elements = int64_t{1} << 41;
  EXPECT_THAT(message_of(build_policy(spec, "t.pbtxt", ".", options).status()),
              HasSubstr("has shape [1099511627776] but the layer's is [2, 4]"));
  EXPECT_EQ(message_of(from_tensor_proto(tensor->tensor()).status()),
            "data has 0 bytes but shape [1099511627776] of FLOAT32 needs 4398046511104");
  tensor->mutable_tensor()->add_shape(int64_t{1} << 40);  // 2^80 overflows int64
  EXPECT_EQ(message_of(from_tensor_proto(tensor->tensor()).status()),
            "shape [1099511627776, 1099511627776] is too large");
}

TEST(Limits, ATooLargeParameterInAFileFailsBeforeAllocation) {
  const std::string dir = folder("huge_parameters_file");
  tdpolicy::Parameters parameters;
  auto* tensor = parameters.add_tensors();
  tensor->set_name("module.0.module.weight");
  tensor->mutable_tensor()->set_dtype(tdpolicy::FLOAT32);
  tensor->mutable_tensor()->add_shape(int64_t{1} << 40);
  write_file(dir + "/weights.pb", parameters.SerializeAsString());
  auto spec = valid();
  spec.clear_init_seed();
  spec.set_parameters_file("weights.pb");
  EXPECT_EQ(message_of(build_policy(spec, "t.pbtxt", dir).status()),
            dir + "/weights.pb.tensors[0] (\"module.0.module.weight\"): has shape [1099511627776] but the layer's is "
                  "[2, 4] (hint: the layer sizes in the spec and the trained weights disagree)");
}

// Five 2^28-weight layers ran 13 s into an OOM: the total is bounded before anything is built.
TEST(Limits, TheTotalOfAllDeclaredElements) {
  std::string text = "name: \"t\" inputs { key: \"x\" shape: 16383 } module { sequential { ";
  for (int i = 0; i < 5; ++i) {
    text += absl::StrCat("modules { network { in_keys: \"x\" out_keys: \"x\" network { linear { in_features: 16383 "
                         "out_features: 16383 } } } overwrite_keys: \"x\" } ");
  }
  text += "} } init_seed: 1";
  auto spec = parse_text_or_fail(text);
  EXPECT_EQ(message_of(validate_spec(spec, "big.pbtxt")),
            "big.pbtxt: module.sequential.modules[4].network.network.linear: the spec (layers, parameters, self tests, "
            "inputs) has 1342111743 declared elements, more than the limit of 1073741824 (max_total_elements: raise it with LoadOptions.limits.max_total_elements "
            "or the tdp flag --max_total_elements)");
  LoadOptions options;
  options.limits.max_total_elements = int64_t{1} << 31;
  EXPECT_OK(validate_spec(spec, "big.pbtxt", options));
  options.limits.max_tensor_elements = 1000;
  EXPECT_THAT(message_of(validate_spec(spec, "big.pbtxt", options)),
              StartsWith("big.pbtxt: inputs[0].shape: the per-env shape [16383] has 16383 elements, more than the "
                         "limit of 1000 (max_tensor_elements"));
}

// num_samples draws that many samples on every call: 2^31 of them was a 17 GB allocation at the
// first call (found by the text fuzzer), now an error when the spec is read. Every tensor made
// after the draws carries them, so the modules that follow are checked too.
TEST(Limits, NumSamplesIsBoundedLikeATensor) {
  auto spec = valid();
  auto* actor = spec.mutable_module()->mutable_sequential()->mutable_modules(1)->mutable_probabilistic();
  actor->add_num_samples(int64_t{1} << 31);
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")),
            "t.pbtxt: module.sequential.modules[1].probabilistic.out_keys[0]: key \"action\", 2147483648 draws "
            "(num_samples) of per-env shape [], has 2147483648 elements, more than the limit of 268435456 "
            "(max_tensor_elements: raise it with LoadOptions.limits.max_tensor_elements or the tdp flag "
            "--max_tensor_elements)");
  // Several dims multiply, and the sample's own shape counts: 3 x 5 draws of a [2]-shaped Normal sample.
  actor->clear_num_samples();
  actor->add_num_samples(3);
  actor->add_num_samples(5);
  actor->set_distribution("normal");
  actor->clear_in_keys();
  actor->add_in_keys("logits");
  actor->add_in_keys("logits");
  LoadOptions options;
  options.limits.max_tensor_elements = 30;
  EXPECT_OK(validate_spec(spec, "t.pbtxt", options));
  options.limits.max_tensor_elements = 29;
  EXPECT_THAT(message_of(validate_spec(spec, "t.pbtxt", options)),
              HasSubstr("key \"action\", 15 draws (num_samples) of per-env shape [2], has 30 elements, more than the "
                        "limit of 29"));
  // A dim of size 0 hides nothing: the draws' log-sum-exp over 0 classes has all the other dims.
  auto empty_classes = parse_text_or_fail(R"pb(
    name: "t"
    inputs { key: "h" shape: [ 64, 8, 0 ] }
    module {
      sequential {
        modules {
          probabilistic {
            in_keys: "h"
            out_keys: "action"
            distribution: "one_hot_categorical"
            num_samples: 1048576
          }
        }
      }
    }
    init_seed: 0
  )pb");
  EXPECT_THAT(message_of(validate_spec(empty_classes, "t.pbtxt")),
              HasSubstr("key \"action\", 1048576 draws (num_samples) of per-env shape [64, 8, 0], has 536870912 "
                        "elements, more than the limit of 268435456"));
  // A network after the draws runs on all of them: its widest layer counts.
  auto* mlp = spec.mutable_module()->mutable_sequential()->add_modules()->mutable_network();
  mlp->add_in_keys("action");
  mlp->add_out_keys("value");
  mlp->mutable_network()->mutable_mlp()->set_in_features(2);
  mlp->mutable_network()->mutable_mlp()->add_hidden_sizes(6);
  mlp->mutable_network()->mutable_mlp()->set_out_features(1);
  options.limits.max_tensor_elements = 100;
  EXPECT_OK(validate_spec(spec, "t.pbtxt", options));
  mlp->mutable_network()->mutable_mlp()->add_hidden_sizes(7);
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt", options)),
            "t.pbtxt: module.sequential.modules[2].network.network.mlp: its widest layer, 15 draws (num_samples) of "
            "per-env shape [7], has 105 elements, more than the limit of 100 (max_tensor_elements: raise it with "
            "LoadOptions.limits.max_tensor_elements or the tdp flag --max_tensor_elements)");
}

// `spec` validates with max_tensor_elements at `limit`, and one below it fails with `message`.
void expect_max_tensor_elements_at(const tdpolicy::PolicySpec& spec, int64_t limit, const std::string& message) {
  LoadOptions options;
  options.limits.max_tensor_elements = limit;
  EXPECT_OK(validate_spec(spec, "t.pbtxt", options));
  options.limits.max_tensor_elements = limit - 1;
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt", options)), message);
}

// A distribution copies its parameters, with the earlier draws in front: 65536 draws in front of
// logits of per-env shape [3, 255] made the next categorical's log-sum-exp a 401 MB tensor (found
// by the text fuzzer, kept in regressions/spec_text_fuzzer/). Each parameter, and each leaf of a
// composite's sub-TensorDict, is bounded like a written tensor.
TEST(Limits, ADistributionsParametersAreBoundedWithTheDrawsInFront) {
  const std::string text = R"pb(
    name: "t"
    inputs {
      key: "x"
      shape: [ 3, 255 ]
    }
    module {
      sequential {
        modules {
          network {
            in_keys: "x"
            out_keys: "params/type/logits"
            network { cat {} }
          }
        }
        modules {
          probabilistic {
            in_keys: "params"
            composite { parts { key: "type" distribution: "categorical" } }
            num_samples: 64
          }
        }
        modules {
          probabilistic {
            in_keys: "params"
            composite { parts { key: "type" distribution: "categorical" } }
          }
          overwrite_keys: "type"
        }
      }
    }
    init_seed: 0
  )pb";
  expect_max_tensor_elements_at(parse_text_or_fail(text), 64 * 765,
                                "t.pbtxt: module.sequential.modules[2].probabilistic.in_keys[0]: the distribution's "
                                "parameter \"params/type/logits\", 64 draws (num_samples) of per-env shape [3, 255], "
                                "has 48960 elements, more than the limit of 48959 (max_tensor_elements: raise it with "
                                "LoadOptions.limits.max_tensor_elements or the tdp flag --max_tensor_elements)");
}

// MEAN of a tanh_normal has no closed form: it is estimated from 1000 draws (n_empirical_estimate),
// which are bounded like num_samples draws (found by the text fuzzer: a composite's tanh_normal
// part over 32,768 dims made [1000, 2, 32768] doubles).
TEST(Limits, TheDrawsOfAMeanEstimateAreBounded) {
  const std::string text = R"pb(
    name: "t"
    inputs { key: "x" shape: 64 }
    module {
      sequential {
        modules {
          network {
            in_keys: "x"
            out_keys: [ "params/a/loc", "params/a/scale" ]
            network { normal_param_extractor {} }
          }
        }
        modules {
          probabilistic {
            in_keys: "params"
            composite { parts { key: "a" distribution: "tanh_normal" } }
          }
        }
      }
    }
    init_seed: 0
  )pb";
  expect_max_tensor_elements_at(parse_text_or_fail(text), 32 * 1000,
                                "t.pbtxt: module.sequential.modules[1].probabilistic.composite.parts[0]: the "
                                "tanh_normal part's parameter \"params/a/loc\" (MEAN is estimated by sampling), 1000 "
                                "draws (n_empirical_estimate) of per-env shape [32], "
                                "has 32000 elements, more than the limit of 31999 (max_tensor_elements: raise it with "
                                "LoadOptions.limits.max_tensor_elements or the tdp flag --max_tensor_elements)");
}

// What a network writes is bounded like one tensor too: a cat of one large input 64 times or a
// one_hot of it has only legal parts but a per-env output no call could allocate.
TEST(Limits, EveryWrittenTensorIsBounded) {
  auto spec = parse_text_or_fail(R"pb(
    name: "t"
    inputs { key: "x" shape: 1000 }
    module {
      sequential {
        modules {
          network {
            in_keys: [ "x", "x", "x" ]
            out_keys: "joined"
            network { cat {} }
          }
        }
        modules {
          network {
            in_keys: "x"
            out_keys: "classes"
            network { one_hot { num_classes: 10 } }
          }
        }
      }
    }
  )pb");
  LoadOptions options;
  options.limits.max_tensor_elements = 10000;
  EXPECT_OK(validate_spec(spec, "t.pbtxt", options));
  options.limits.max_tensor_elements = 9999;
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt", options)),
            "t.pbtxt: module.sequential.modules[1].network.out_keys[0]: key \"classes\", of per-env shape [1000, 10], "
            "has 10000 elements, more than the limit of 9999 (max_tensor_elements: raise it with "
            "LoadOptions.limits.max_tensor_elements or the tdp flag --max_tensor_elements)");
  options.limits.max_tensor_elements = 2999;
  EXPECT_THAT(message_of(validate_spec(spec, "t.pbtxt", options)),
              StartsWith("t.pbtxt: module.sequential.modules[0].network.out_keys[0]: key \"joined\", of per-env shape "
                         "[3000], has 3000 elements, more than the limit of 2999"));
}

TEST(Limits, FilesStayInTheSpecsFolder) {
  const std::string hint =
      " (hint: name a file in the spec's folder, or allow outside files with LoadOptions.allow_outside_files or the "
      "tdp flag --allow_outside_files)";
  auto spec = valid();
  spec.clear_init_seed();
  spec.set_parameters_file("/dev/zero");
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")), "t.pbtxt: parameters_file: \"/dev/zero\" is an absolute path" + hint);
  LoadOptions outside;
  outside.allow_outside_files = true;
  EXPECT_EQ(message_of(build_policy(spec, "t.pbtxt", ".", outside).status()),
            "t.pbtxt: parameters_file: /dev/zero: the parameters file is a character device, not a regular file");
  spec.set_parameters_file("weights/../../secret.pb");
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")),
            "t.pbtxt: parameters_file: \"weights/../../secret.pb\" leaves the spec's folder (\"..\")" + hint);
  EXPECT_EQ(build_policy(spec, "t.pbtxt", ".", outside).status().code(), absl::StatusCode::kNotFound);

  const std::string dir = folder("parameters_dir");
  folder("parameters_dir/weights.pb");
  spec.set_parameters_file("weights.pb");
  EXPECT_EQ(message_of(build_policy(spec, "t.pbtxt", dir).status()),
            "t.pbtxt: parameters_file: " + dir + "/weights.pb: the parameters file is a directory, not a regular file");

  spec = valid();
  auto* net = spec.mutable_module()->mutable_sequential()->mutable_modules(0)->mutable_network();
  net->mutable_network()->mutable_torchscript()->set_file("../actor.pt");
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")),
            "t.pbtxt: module.sequential.modules[0].network.network.torchscript.file: \"../actor.pt\" leaves the spec's "
            "folder (\"..\")" + hint);
  // Allowed, the file is looked for (and is not there): a Status, not an exception.
  EXPECT_THAT(message_of(build_policy(spec, "t.pbtxt", ".", outside).status()), HasSubstr("../actor.pt"));
}

TEST(Limits, NonFiniteParametersAreAnErrorUnlessAllowed) {
  auto spec = valid();
  spec.clear_init_seed();
  at::Tensor weight = at::zeros({2, 4});
  weight[1][2] = std::numeric_limits<float>::quiet_NaN();
  weight[0][0] = std::numeric_limits<float>::infinity();
  auto* w = spec.mutable_parameters()->add_tensors();
  w->set_name("module.0.module.weight");
  *w->mutable_tensor() = to_tensor_proto(weight);
  auto* b = spec.mutable_parameters()->add_tensors();
  b->set_name("module.0.module.bias");
  *b->mutable_tensor() = to_tensor_proto(at::zeros({2}));
  const std::string message = "t.pbtxt: parameters.tensors[0] (\"module.0.module.weight\"): 2 of its 8 values are NaN or infinite";
  EXPECT_EQ(message_of(build_policy(spec, "t.pbtxt", ".").status()),
            message + " (hint: a diverged training run? allow them with LoadOptions.allow_non_finite_parameters or the "
                      "tdp flag --allow_non_finite_parameters)");
  LoadOptions allow;
  allow.allow_non_finite_parameters = true;
  test_util::LogCapture log;
  EXPECT_OK(build_policy(spec, "t.pbtxt", ".", allow));
  EXPECT_THAT(log.text(), HasSubstr(message + " (allowed by allow_non_finite_parameters)"));
}

TEST(Limits, ValuesOutOfTheirDomain) {
  auto spec = valid();
  auto* net = spec.mutable_module()->mutable_sequential()->mutable_modules(0)->mutable_network();
  net->mutable_network()->mutable_mapping()->set_name("biased_softplus_nan");
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")),
            "t.pbtxt: module.sequential.modules[0].network.network.mapping.name: unknown mapping "
            "\"biased_softplus_nan\": the bias and min_val must be finite numbers (hint: e.g. biased_softplus_1.0 or "
            "biased_softplus_1.0_0.01)");
  net->mutable_network()->mutable_mapping()->set_name("biased_softplus_1.0_inf");
  EXPECT_THAT(message_of(validate_spec(spec, "t.pbtxt")), HasSubstr("must be finite numbers"));

  auto gaussian = parse_text_or_fail(R"pb(
    name: "g"
    inputs { key: "observation" shape: 4 }
    output_keys: "action"
    module { sequential {
      modules { network { in_keys: "observation" out_keys: "params" network { linear { in_features: 4 out_features: 4 } } } }
      modules { network { in_keys: "params" out_keys: "loc" out_keys: "scale" network { normal_param_extractor { scale_lb: -1 } } } }
      modules { probabilistic { in_keys: "loc" in_keys: "scale" out_keys: "action" distribution: "tanh_normal"
                                distribution_kwargs { key: "low" value { double_value: 2 } }
                                distribution_kwargs { key: "high" value { double_value: -2 } } } }
    } }
    init_seed: 1
  )pb");
  EXPECT_EQ(message_of(validate_spec(gaussian, "g.pbtxt")),
            "g.pbtxt: module.sequential.modules[1].network.network.normal_param_extractor.scale_lb: the scale's lower "
            "bound must be a finite number > 0, got -1 (hint: leave it unset for 1e-4)");
  auto* extractor = gaussian.mutable_module()->mutable_sequential()->mutable_modules(1)->mutable_network()
                        ->mutable_network()->mutable_normal_param_extractor();
  extractor->set_scale_lb(0.01);
  EXPECT_EQ(message_of(validate_spec(gaussian, "g.pbtxt")),
            "g.pbtxt: module.sequential.modules[2].probabilistic.distribution_kwargs[\"low\"]: low (2) must be less "
            "than high (-2)");
  auto* head = gaussian.mutable_module()->mutable_sequential()->mutable_modules(2)->mutable_probabilistic();
  (*head->mutable_distribution_kwargs())["low"].set_double_value(-2);
  (*head->mutable_distribution_kwargs())["high"].set_double_value(2);
  EXPECT_OK(validate_spec(gaussian, "g.pbtxt"));
  (*head->mutable_distribution_kwargs())["hihg"].set_double_value(2);
  EXPECT_EQ(message_of(validate_spec(gaussian, "g.pbtxt")),
            "g.pbtxt: module.sequential.modules[2].probabilistic.distribution_kwargs[\"hihg\"]: distribution "
            "\"tanh_normal\" takes no kwarg \"hihg\" (hint: it takes event_dims, high, loc, low, safe_tanh, scale, "
            "tanh_loc, upscale, validate_args)");

  // A composite part's kwargs go to its distribution as kwargs only.
  auto composite = valid();
  auto* part = composite.mutable_module()->mutable_sequential()->mutable_modules(1)->mutable_probabilistic();
  part->clear_distribution();
  auto* p = part->mutable_composite()->add_parts();
  p->set_key("logits");
  p->set_distribution("categorical");
  (*p->mutable_kwargs())["temperature"].set_double_value(1);
  EXPECT_EQ(message_of(validate_spec(composite, "c.pbtxt")),
            "c.pbtxt: module.sequential.modules[1].probabilistic.composite.parts[0].kwargs[\"temperature\"]: "
            "distribution \"categorical\" takes no kwarg \"temperature\" (hint: it takes validate_args)");
  // The composite itself takes none (tensordict: a TypeError); they were silently ignored.
  p->clear_kwargs();
  EXPECT_OK(validate_spec(composite, "c.pbtxt"));
  (*part->mutable_distribution_kwargs())["temperature"].set_double_value(1);
  EXPECT_EQ(message_of(validate_spec(composite, "c.pbtxt")),
            "c.pbtxt: module.sequential.modules[1].probabilistic.distribution_kwargs: a composite takes no "
            "distribution_kwargs (got \"temperature\") (hint: give a part's kwargs in composite.parts[i].kwargs)");
}

// Nothing from LibTorch or protobuf escapes the loader: a TorchScript file that is not one.
TEST(Limits, TheCudaGraphBlock) {
  auto spec = valid();
  auto* graph = spec.mutable_cuda_graph();
  graph->set_enabled(true);
  EXPECT_OK(validate_spec(spec, "t.pbtxt")) << "no buckets and no warmup: the defaults";
  for (int64_t bucket : {1, 16, 16}) graph->add_batch_buckets(bucket);
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")),
            "t.pbtxt: cuda_graph.batch_buckets[2]: 16 does not follow 16; list the buckets in increasing order, each "
            "once");
  graph->set_batch_buckets(2, 64);
  graph->set_batch_buckets(0, -1);
  EXPECT_THAT(message_of(validate_spec(spec, "t.pbtxt")),
              HasSubstr("t.pbtxt: cuda_graph.batch_buckets[0]: batch size -1 is outside [1, 1048576]"));
  graph->set_batch_buckets(0, 1);
  graph->set_warmup(-2);
  EXPECT_THAT(message_of(validate_spec(spec, "t.pbtxt")),
              HasSubstr("t.pbtxt: cuda_graph.warmup: -2 eager calls before the capture; at least 1 is needed"));
  // Bounded above too: each bucket's capture runs when the actor is made.
  graph->set_warmup(int64_t{1} << 62);
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")),
            "t.pbtxt: cuda_graph.warmup: 4611686018427387904 eager calls before the capture; at most 100 "
            "(tensordict's default is 2)");
  graph->set_warmup(3);
  EXPECT_OK(validate_spec(spec, "t.pbtxt"));
  graph->clear_batch_buckets();
  for (int64_t bucket = 1; bucket <= 65; ++bucket) graph->add_batch_buckets(bucket);
  EXPECT_EQ(message_of(validate_spec(spec, "t.pbtxt")),
            "t.pbtxt: cuda_graph.batch_buckets: 65 buckets; at most 64, each captured when the actor is made");
  graph->mutable_batch_buckets()->RemoveLast();
  EXPECT_OK(validate_spec(spec, "t.pbtxt"));
}

TEST(Limits, NoExceptionEscapesTheLoader) {
  const std::string dir = folder("bad_torchscript");
  write_file(dir + "/actor.pt", "not a zip archive");
  auto spec = valid();
  auto* net = spec.mutable_module()->mutable_sequential()->mutable_modules(0)->mutable_network();
  net->mutable_network()->mutable_torchscript()->set_file("actor.pt");
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(spec, &text));
  write_file(dir + "/spec.pbtxt", text);
  absl::StatusOr<Policy> policy;
  EXPECT_NO_THROW(policy = load_policy(dir + "/spec.pbtxt"));
  EXPECT_THAT(message_of(policy.status()), StartsWith(dir + "/spec.pbtxt: "));
}

// The TorchScript file goes through the bounded reader too: a directory is named as one.
TEST(Limits, ATorchScriptFileMustBeARegularFile) {
  const std::string dir = folder("torchscript_dir");
  folder("torchscript_dir/actor.pt");
  auto spec = valid();
  auto* net = spec.mutable_module()->mutable_sequential()->mutable_modules(0)->mutable_network();
  net->mutable_network()->mutable_torchscript()->set_file("actor.pt");
  EXPECT_THAT(message_of(build_policy(spec, "t.pbtxt", dir).status()),
              HasSubstr(dir + "/actor.pt: the TorchScript file is a directory, not a regular file"));
}

}  // namespace
}  // namespace tdp::policy
