// tdp: the command line for policy specs. Checks a spec (and its self tests), describes it,
// runs it on JSON inputs, or times it. Every command loads the spec through tdp::actor::Actor,
// and `run` and `bench` call the policy through Actor::act: the command line runs and times
// exactly what a simulator calls (its interaction type, seeded stream, aggregation mode and
// recurrent state handling).
//
//   tdp validate policies/cartpole_categorical.pbtxt
//   tdp describe policies/cartpole_categorical.pbtxt
//   echo '{"observation": [[0.1, 0.2, 0.3, 0.4]]}' | tdp run policies/cartpole_categorical.pbtxt --input=- --interaction=mode
//   tdp bench policies/cartpole_categorical.pbtxt --batch=256 --iterations=1000
//
// `run` writes only JSON on stdout; every diagnostic goes to stderr. Exit status: 0 success,
// 1 the spec, the input or the policy failed, 2 the command line is wrong.
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <absl/flags/commandlineflag.h>
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/reflection.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <c10/core/Device.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sdk/actor/actor.h"
#include "sdk/cli/json_tensordict.h"
#include "sdk/nn/key_graph.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/probabilistic/composite_lp_aggregate.h"
#include "sdk/probabilistic/interaction_type.h"
#include "sdk/policy/signature.h"
#include "sdk/policy/keys.h"
#include "sdk/policy/limits.h"
#include "sdk/policy/policy.h"
#include "sdk/policy/tensor_proto.h"
#include "sdk/tensordict/tensordict.h"
#include "tdpolicy/spec.pb.h"

// Optional values are strings so that "not given" differs from every value.
ABSL_FLAG(std::string, input, "", "run: JSON file of named input tensors; - reads stdin");
ABSL_FLAG(bool, self_tests, false, "run: first run the spec's self tests, as validate does (a failure ends the run)");
ABSL_FLAG(std::string, interaction, "",
          "run, bench: mode, median, mean, random or deterministic (default: each module's own)");
ABSL_FLAG(std::string, seed, "", "run, bench: seed of the actor's random stream (default 0, as an Actor's)");
ABSL_FLAG(std::string, lp_aggregate, "",
          "run, bench: true sums a composite distribution's log-probs into one entry, false keeps "
          "one per part (default: COMPOSITE_LP_AGGREGATE, else false)");
ABSL_FLAG(std::string, backend, "auto",
          "run, bench: auto (the fused CPU plan at small batches, else LibTorch), libtorch or fused "
          "(a policy that cannot be lowered is then an error naming the module)");
ABSL_FLAG(std::string, device, "cpu", "run, bench: the actor's device, cpu or cuda[:N] (a --config=cuda build)");
ABSL_FLAG(std::string, cuda_graph, "spec",
          "run, bench on a GPU: spec (the spec's cuda_graph block), on (default buckets), off");
ABSL_FLAG(bool, dot, false, "describe: print the key graph as Graphviz DOT instead");
ABSL_FLAG(int64_t, batch, 0, "bench: batch size of the random inputs");
ABSL_FLAG(int64_t, iterations, 1000, "bench: timed calls");
ABSL_FLAG(int64_t, warmup, 20, "bench: untimed calls before timing");
ABSL_FLAG(int32_t, threads, 0, "run, bench: intra-op threads (0: LibTorch's default)");
// The loader's limits and file rules (tdp::policy::LoadOptions), for every command.
ABSL_FLAG(int64_t, max_spec_bytes, tdp::policy::Limits().max_spec_bytes, "bytes of a spec file or a parameters file");
ABSL_FLAG(int64_t, max_input_bytes, tdp::policy::Limits().max_input_bytes, "run: bytes of the JSON input");
ABSL_FLAG(int64_t, max_nesting_depth, tdp::policy::Limits().max_nesting_depth, "message nesting of a spec");
ABSL_FLAG(int64_t, max_spec_objects, tdp::policy::Limits().max_spec_objects,
          "messages and strings in a spec or parameters file");
ABSL_FLAG(int64_t, max_tensor_elements, tdp::policy::Limits().max_tensor_elements,
          "elements of one tensor (a parameter, a layer's weights, a self-test tensor, an input's per-env shape)");
ABSL_FLAG(int64_t, max_total_elements, tdp::policy::Limits().max_total_elements,
          "declared elements of a spec in all (layers, parameters, self tests, inputs)");
ABSL_FLAG(int64_t, max_json_depth, tdp::policy::Limits().max_json_depth, "run: nesting of the JSON input");
ABSL_FLAG(bool, allow_outside_files, false,
          "let parameters_file and torchscript.file name files outside the spec's folder");
ABSL_FLAG(bool, allow_non_finite_parameters, false, "load NaN or infinite parameter values, with a warning");

namespace {

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

constexpr const char* kUsageText =
    "usage: tdp <command> SPEC [flags]\n"
    "\n"
    "commands:\n"
    "  validate SPEC   load the spec (parse, validate, build, parameters) and run its self tests;\n"
    "                  prints OK: <name> <version>\n"
    "  describe SPEC [--dot]\n"
    "                  the module tree, the inputs (shape, dtype), the output keys, the key graph\n"
    "                  (which module reads and writes which key), the parameter count of each\n"
    "                  top-level module and the path (fused CPU plan or LibTorch) each module takes,\n"
    "                  and why; --dot prints the key graph as Graphviz DOT (modules the output\n"
    "                  keys do not need dashed)\n"
    "  run SPEC --input=FILE.json [--interaction=mode|median|mean|random|deterministic]\n"
    "           [--seed=N] [--lp_aggregate=true|false] [--backend=auto|libtorch|fused]\n"
    "           [--device=cpu|cuda[:N]] [--cuda_graph=spec|on|off] [--self_tests]\n"
    "                  runs the policy on a JSON object of named tensors (nested lists; nested\n"
    "                  keys as nested objects; --input=- reads stdin) and prints the resulting\n"
    "                  TensorDict as JSON on stdout; --self_tests runs validate's self tests first\n"
    "  bench SPEC --batch=B [--iterations=N] [--warmup=N] [--interaction=...] [--backend=...]\n"
    "           [--device=...] [--cuda_graph=...]\n"
    "                  times calls on random inputs of the declared shapes at batch B, on the\n"
    "                  actor's device (on a GPU, each call until its outputs are ready)\n"
    "\n"
    "flags: --threads=N sets LibTorch's intra-op threads (run, bench).\n"
    "limits (every command; see the README's Limits table): --max_spec_bytes --max_input_bytes\n"
    "  --max_nesting_depth --max_spec_objects --max_tensor_elements --max_total_elements --max_json_depth\n"
    "  --allow_outside_files --allow_non_finite_parameters\n"
    "SPEC is a tdpolicy.PolicySpec in text (.pbtxt), binary (.pb) or JSON (.json) form.\n"
    "Exit status: 0 success, 1 failure, 2 usage error.\n";

// A usage error: the message, then the usage text unless the message is all the user needs
// (a bad flag value).
int usage_error(const std::string& message, bool show_usage = true) {
  if (!message.empty()) std::cerr << "tdp: " << message << "\n";
  if (show_usage) std::cerr << (message.empty() ? "" : "\n") << kUsageText;
  return kUsage;
}

int failed(const absl::Status& status) {
  std::cerr << "tdp: " << status << "\n";
  return kFailed;
}

// absl exits with status 1 on an unknown flag or a value it cannot parse; the contract is 2 for
// every usage error, so flags are checked before absl sees them. Returns the error message.
std::optional<std::string> flag_error(int argc, char** argv) {
  static const char* const kAbslBuiltins[] = {"help",    "helpfull", "helpshort",     "helppackage", "version",
                                              "flagfile", "fromenv", "tryfromenv", "undefok",     "only_check_args"};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    const std::string name(arg.substr(0, equals));
    if (std::find(std::begin(kAbslBuiltins), std::end(kAbslBuiltins), name) != std::end(kAbslBuiltins)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) flag = absl::FindCommandLineFlag(name.substr(2));
    if (flag == nullptr) return absl::StrCat("unknown flag ", argv[i]);
    std::string error;
    if (equals != std::string_view::npos && !flag->ParseFrom(std::string(arg.substr(equals + 1)), &error)) {
      return absl::StrCat("--", name, ": ", error);
    }
  }
  return std::nullopt;
}

// What --interaction, --lp_aggregate, --seed and --threads ask for, checked before anything loads.
struct RunFlags {
  std::optional<tdp::nn::InteractionType> interaction;
  std::optional<bool> lp_aggregate;
  std::optional<uint64_t> seed;
  int32_t threads = 0;
  tdp::actor::Backend backend = tdp::actor::Backend::kAuto;
  c10::Device device = c10::Device(c10::kCPU);
  // Empty: the spec's cuda_graph block decides.
  std::optional<tdp::actor::CudaGraphOptions> cuda_graph;

  static absl::StatusOr<RunFlags> parse() {
    RunFlags flags;
    const std::string interaction = absl::GetFlag(FLAGS_interaction);
    if (!interaction.empty()) {
      try {
        flags.interaction = tdp::nn::interaction_type_from_str(interaction);
      } catch (const std::invalid_argument& error) {
        return absl::InvalidArgumentError(absl::StrCat("--interaction: ", error.what()));
      }
    }
    const std::string lp = absl::GetFlag(FLAGS_lp_aggregate);
    if (!lp.empty()) {
      bool aggregate = false;
      if (!absl::SimpleAtob(lp, &aggregate)) {
        return absl::InvalidArgumentError(absl::StrCat("--lp_aggregate: expected true or false, got \"", lp, "\""));
      }
      flags.lp_aggregate = aggregate;
    }
    const std::string seed = absl::GetFlag(FLAGS_seed);
    if (!seed.empty()) {
      uint64_t value = 0;
      if (!absl::SimpleAtoi(seed, &value)) {
        return absl::InvalidArgumentError(absl::StrCat("--seed: expected a non-negative integer, got \"", seed, "\""));
      }
      flags.seed = value;
    }
    const std::string backend = absl::GetFlag(FLAGS_backend);
    if (backend == "libtorch") {
      flags.backend = tdp::actor::Backend::kLibTorch;
    } else if (backend == "fused") {
      flags.backend = tdp::actor::Backend::kFused;
    } else if (backend != "auto") {
      return absl::InvalidArgumentError(
          absl::StrCat("--backend: expected auto, libtorch or fused, got \"", backend, "\""));
    }
    const std::string device = absl::GetFlag(FLAGS_device);
    if (device != "cpu" && device != "cuda" && !absl::StartsWith(device, "cuda:")) {
      return absl::InvalidArgumentError(absl::StrCat("--device: expected cpu, cuda or cuda:N, got \"", device, "\""));
    }
    try {
      flags.device = c10::Device(device);
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(absl::StrCat("--device: expected cpu, cuda or cuda:N, got \"", device, "\""));
    }
    const std::string cuda_graph = absl::GetFlag(FLAGS_cuda_graph);
    if (cuda_graph == "on") {
      flags.cuda_graph = tdp::actor::CudaGraphOptions();
    } else if (cuda_graph == "off") {
      flags.cuda_graph = tdp::actor::CudaGraphOptions().enabled(false);
    } else if (cuda_graph != "spec") {
      return absl::InvalidArgumentError(absl::StrCat("--cuda_graph: expected spec, on or off, got \"", cuda_graph, "\""));
    }
    flags.threads = absl::GetFlag(FLAGS_threads);
    if (flags.threads < 0) return absl::InvalidArgumentError("--threads: expected 0 or more");
    // More intra-op threads than a few per hardware thread only oversubscribes the machine.
    const int32_t max_threads = 4 * static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    if (flags.threads > max_threads) {
      return absl::InvalidArgumentError(absl::StrCat("--threads: ", flags.threads, " is more than ", max_threads,
                                                     " (4 per hardware thread of this machine)"));
    }
    return flags;
  }
};

// The limit flags, checked before anything loads.
absl::StatusOr<tdp::policy::LoadOptions> load_flags() {
  tdp::policy::LoadOptions options;
  tdp::policy::Limits& limits = options.limits;
  limits.max_spec_bytes = absl::GetFlag(FLAGS_max_spec_bytes);
  limits.max_input_bytes = absl::GetFlag(FLAGS_max_input_bytes);
  limits.max_nesting_depth = absl::GetFlag(FLAGS_max_nesting_depth);
  limits.max_spec_objects = absl::GetFlag(FLAGS_max_spec_objects);
  limits.max_tensor_elements = absl::GetFlag(FLAGS_max_tensor_elements);
  limits.max_total_elements = absl::GetFlag(FLAGS_max_total_elements);
  limits.max_json_depth = absl::GetFlag(FLAGS_max_json_depth);
  for (const auto& [name, value] :
       {std::pair{"max_spec_bytes", limits.max_spec_bytes}, std::pair{"max_input_bytes", limits.max_input_bytes},
        std::pair{"max_nesting_depth", limits.max_nesting_depth},
        std::pair{"max_spec_objects", limits.max_spec_objects},
        std::pair{"max_tensor_elements", limits.max_tensor_elements},
        std::pair{"max_total_elements", limits.max_total_elements},
        std::pair{"max_json_depth", limits.max_json_depth}}) {
    if (value <= 0) return absl::InvalidArgumentError(absl::StrCat("--", name, ": expected 1 or more, got ", value));
  }
  if (limits.max_json_depth > tdp::cli::kMaxJsonDepth) {
    return absl::InvalidArgumentError(absl::StrCat("--max_json_depth: ", limits.max_json_depth, " is more than ",
                                                   tdp::cli::kMaxJsonDepth, ", the deepest protobuf's JSON parser reads"));
  }
  options.allow_outside_files = absl::GetFlag(FLAGS_allow_outside_files);
  options.allow_non_finite_parameters = absl::GetFlag(FLAGS_allow_non_finite_parameters);
  return options;
}

// The actor `run` and `bench` call: what the flags ask for, as ActorOptions. The spec's self
// tests are `validate`'s job (they hold per-part log-probs, whatever --lp_aggregate says).
absl::StatusOr<std::unique_ptr<tdp::actor::Actor>> load_actor(const std::string& path, const RunFlags& flags,
                                                               const tdp::policy::LoadOptions& load,
                                                               bool return_all_entries) {
  return tdp::actor::Actor::load(path,
                                 tdp::actor::ActorOptions()
                                     .interaction_type(flags.interaction)
                                     .seed(flags.seed.value_or(0))
                                     .composite_lp_aggregate(flags.lp_aggregate)
                                     .run_self_tests(false)
                                     .return_all_entries(return_all_entries)
                                     .backend(flags.backend)
                                     .device(flags.device)
                                     .cuda_graph(flags.cuda_graph),
                                 load);
}

std::string shape_str(const std::vector<int64_t>& shape) { return tdp::shape_to_string(shape); }

// As a spec names it (FLOAT32), else as LibTorch does.
std::string dtype_name(at::ScalarType dtype) {
  const std::optional<tdpolicy::DType> named = tdp::policy::proto_dtype(dtype);
  return named ? tdpolicy::DType_Name(*named) : std::string(c10::toString(dtype));
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return digits;
}

int64_t parameter_count(const tdp::nn::TensorDictModuleBase& module) {
  int64_t count = 0;
  for (const at::Tensor& parameter : module.parameters(/*recurse=*/true)) count += parameter.numel();
  return count;
}

// The modules a reader sees at the top of the tree: a sequence's own modules, under the names
// the spec gives them (else the sequence's: their positions), or the root module alone.
std::vector<std::pair<std::string, std::shared_ptr<tdp::nn::TensorDictModuleBase>>> top_level_modules(
    const std::shared_ptr<tdp::nn::TensorDictModuleBase>& root, const tdpolicy::Module& spec) {
  // ProbabilisticTensorDictSequential is a TensorDictSequential too.
  const auto* sequence = dynamic_cast<const tdp::nn::TensorDictSequentialImpl*>(root.get());
  if (sequence == nullptr) return {{spec.name().empty() ? "module" : spec.name(), root}};
  const auto& children = spec.has_sequential() ? spec.sequential().modules() : spec.probabilistic_sequential().modules();
  std::vector<std::pair<std::string, std::shared_ptr<tdp::nn::TensorDictModuleBase>>> named;
  for (size_t i = 0; i < sequence->size(); ++i) {
    const bool spec_names_it = children.size() == static_cast<int>(sequence->size()) &&
                               !children.Get(static_cast<int>(i)).name().empty();
    named.emplace_back(spec_names_it ? children.Get(static_cast<int>(i)).name() : sequence->names()[i],
                       sequence->modules()[i]);
  }
  return named;
}

// The spec loaded and its self tests run. Self tests hold per-part log-probs (composite_lp_aggregate
// false), and a probabilistic module fixes its log-prob keys by the mode in force when it is built:
// build under that mode too, whatever COMPOSITE_LP_AGGREGATE says.
absl::StatusOr<std::unique_ptr<tdp::actor::Actor>> load_self_tested(const std::string& path,
                                                                    const tdp::policy::LoadOptions& load) {
  return tdp::actor::Actor::load(path, tdp::actor::ActorOptions().composite_lp_aggregate(false).run_self_tests(true),
                                 load);
}

int validate(const std::string& path, const tdp::policy::LoadOptions& load) {
  auto actor = load_self_tested(path, load);
  if (!actor.ok()) return failed(actor.status());
  std::cout << "OK: " << (*actor)->spec().name() << " " << (*actor)->spec().version() << "\n";
  return kOk;
}

int describe(const std::string& path, const tdp::policy::LoadOptions& load) {
  auto actor = tdp::actor::Actor::load(path, tdp::actor::ActorOptions().run_self_tests(false), load);
  if (!actor.ok()) return failed(actor.status());
  const tdpolicy::PolicySpec& spec = (*actor)->spec();
  const std::shared_ptr<tdp::nn::TensorDictModuleBase>& module = (*actor)->module();
  const tdp::nn::KeyGraph graph(module);
  if (absl::GetFlag(FLAGS_dot)) {
    std::cout << graph.to_dot((*actor)->signature().output_keys());
    return std::cout.good() ? kOk : kFailed;
  }
  std::cout << spec.name() << " " << spec.version() << "\n";
  if (!spec.description().empty()) std::cout << spec.description() << "\n";
  const tdp::policy::Signature& signature = (*actor)->signature();
  auto print = [](const tdp::policy::TensorSignature& entry) {
    std::cout << "  " << entry.name << "  " << shape_str(entry.shape) << "  " << dtype_name(entry.dtype)
              << (entry.state ? "  (recurrent state)" : "") << "\n";
  };
  std::cout << "\ninputs:\n";
  for (const auto& input : signature.inputs) print(input);
  std::cout << "\noutputs:\n";
  for (const auto& output : signature.outputs) print(output);
  std::cout << "\nmodule:\n" << module->to_string() << "\n";
  std::cout << "\nkey graph (reads -> writes):\n";
  std::istringstream lines(graph.to_text());
  for (std::string line; std::getline(lines, line);) std::cout << "  " << line << "\n";
  std::cout << "\nparameters:\n";
  for (const auto& [name, child] : top_level_modules(module, spec.module())) {
    std::cout << "  " << name << " (" << child->type_name() << "): " << with_commas(parameter_count(*child)) << "\n";
  }
  std::cout << "  total: " << with_commas(parameter_count(*module)) << "\n";
  std::cout << "\nbackend (auto: the fused CPU plan up to batch " << (*actor)->options().fused_max_batch()
            << ", LibTorch above):\n";
  for (const std::string& line : (*actor)->describe().modules) std::cout << "  " << line << "\n";
  return kOk;
}

int run(const std::string& path, const tdp::policy::LoadOptions& load) {
  const std::string input = absl::GetFlag(FLAGS_input);
  if (input.empty()) return usage_error("run needs --input=FILE.json (or --input=- for stdin)");
  auto flags = RunFlags::parse();
  if (!flags.ok()) return usage_error(std::string(flags.status().message()), /*show_usage=*/false);
  // In the same process as the run, which spares a caller that wants both (tdpolicy.check) a
  // second start of LibTorch.
  if (absl::GetFlag(FLAGS_self_tests)) {
    if (auto tested = load_self_tested(path, load); !tested.ok()) return failed(tested.status());
  }
  auto actor = load_actor(path, *flags, load, /*return_all_entries=*/true);
  if (!actor.ok()) return failed(actor.status());
  auto json = tdp::policy::read_bounded_file(input, load.limits.max_input_bytes, "max_input_bytes",
                                               input == "-" ? "the input" : "the input file");
  if (!json.ok()) return failed(json.status());
  // The recurrent state may be left out: the actor starts it from zeros, as at a simulator's
  // first step.
  auto td = tdp::cli::tensordict_from_json(*json, (*actor)->signature().inputs, /*state_optional=*/true, load.limits);
  if (!td.ok()) {
    return failed(absl::InvalidArgumentError(
        absl::StrCat(input == "-" ? "stdin" : input, ": ", td.status().message())));
  }
  if (flags->threads > 0) at::set_num_threads(flags->threads);
  tdp::TensorDict out;
  try {
    out = (*actor)->act(*td);
  } catch (const std::exception& error) {
    return failed(absl::InternalError(absl::StrCat("the policy failed: ", error.what())));
  }
  auto printed = tdp::cli::tensordict_to_json(out.to(c10::Device(c10::kCPU)));
  if (!printed.ok()) return failed(printed.status());
  std::cout << *printed << std::flush;
  return std::cout.good() ? kOk : kFailed;
}

// Random inputs of the declared shapes: normal floats, integers in {0, 1}, random bools. The
// recurrent state is left to the actor, which carries it from call to call as in a simulator.
tdp::TensorDict random_inputs(const tdp::actor::Actor& actor, int64_t batch) {
  tdp::TensorDict td({batch});
  for (const tdp::policy::TensorSignature& input : actor.signature().inputs) {
    if (input.state) continue;
    std::vector<int64_t> shape{batch};
    shape.insert(shape.end(), input.shape.begin(), input.shape.end());
    const std::optional<at::ScalarType> dtype = input.dtype;
    at::Tensor value;
    if (*dtype == at::kFloat || *dtype == at::kDouble) {
      value = at::randn(shape, *dtype);
    } else if (at::isFloatingType(*dtype)) {
      value = at::randn(shape).to(*dtype);
    } else if (*dtype == at::kBool) {
      value = at::rand(shape) < 0.5;
    } else {
      value = at::randint(0, 2, shape, *dtype);
    }
    td.set(input.key, value);
  }
  return td;
}

int bench(const std::string& path, const tdp::policy::LoadOptions& load) {
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t iterations = absl::GetFlag(FLAGS_iterations);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup);
  if (batch <= 0) return usage_error("bench needs --batch=B with B > 0");
  // Every timed call keeps its duration (8 bytes), so the count is bounded before anything is
  // allocated: 10 million calls are 80 MB and, at 1 µs each, 10 s; run several benches for more.
  constexpr int64_t kMaxCalls = 10'000'000;
  if (iterations <= 0) return usage_error("--iterations: expected 1 or more", /*show_usage=*/false);
  if (warmup < 0) return usage_error("--warmup: expected 0 or more", /*show_usage=*/false);
  if (iterations > kMaxCalls || warmup > kMaxCalls) {
    return usage_error(absl::StrCat(iterations > kMaxCalls ? "--iterations: " : "--warmup: ",
                                    iterations > kMaxCalls ? iterations : warmup,
                                    " is more than the limit of 10,000,000 calls (run several benches)"),
                       /*show_usage=*/false);
  }
  auto flags = RunFlags::parse();
  if (!flags.ok()) return usage_error(std::string(flags.status().message()), /*show_usage=*/false);
  auto actor = load_actor(path, *flags, load, /*return_all_entries=*/false);
  if (!actor.ok()) return failed(actor.status());
  if (flags->threads > 0) at::set_num_threads(flags->threads);
  // The random inputs are made here at batch B: each is bounded as a declared tensor is, before
  // anything is allocated.
  for (const tdp::policy::TensorSignature& input : (*actor)->signature().inputs) {
    double elements = static_cast<double>(batch);
    for (int64_t size : input.shape) elements *= static_cast<double>(size);
    if (elements > static_cast<double>(load.limits.max_tensor_elements)) {
      return usage_error(absl::StrCat("--batch: ", tdp::policy::limit_exceeded(
                                                       absl::StrCat("the input \"", input.name, "\" at batch ", batch),
                                                       tdp::policy::saturated_count(elements), "elements",
                                                       load.limits.max_tensor_elements, "max_tensor_elements")),
                         /*show_usage=*/false);
    }
  }

  std::vector<double> micros;
  micros.reserve(iterations);
  double total_seconds = 0;
  try {
    const tdp::TensorDict inputs = random_inputs(**actor, batch).to(flags->device);
    for (int64_t i = 0; i < warmup + iterations; ++i) {
      // The simulator's call: act() leaves `inputs` as they are.
      const auto start = std::chrono::steady_clock::now();
      tdp::TensorDict out = (*actor)->act(inputs);
      if (flags->device.is_cuda()) torch::cuda::synchronize(flags->device.index() < 0 ? -1 : flags->device.index());
      const auto stop = std::chrono::steady_clock::now();
      if (i >= warmup) {
        const double seconds = std::chrono::duration<double>(stop - start).count();
        total_seconds += seconds;
        micros.push_back(seconds * 1e6);
      }
    }
  } catch (const std::exception& error) {
    return failed(absl::InternalError(absl::StrCat("the policy failed: ", error.what())));
  }
  std::vector<double> sorted = micros;
  std::sort(sorted.begin(), sorted.end());
  const auto percentile = [&](double p) {
    const size_t index = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
    return sorted[index];
  };
  const double mean = total_seconds * 1e6 / iterations;
  const double calls_per_second = iterations / total_seconds;
  std::cout << absl::StrFormat("%s %s: batch %d, %d calls after %d warmup, %d threads, %s%s\n", (*actor)->spec().name(),
                               (*actor)->spec().version(), batch, iterations, warmup, at::get_num_threads(),
                               flags->device.str(), (*actor)->describe().cuda_graph ? " (CUDA graphs)" : "");
  std::cout << absl::StrFormat("latency per call: mean %.1f us, p50 %.1f us, p99 %.1f us\n", mean, percentile(0.5),
                               percentile(0.99));
  std::cout << absl::StrFormat("throughput: %.1f calls/s, %.0f env steps/s\n", calls_per_second,
                               calls_per_second * batch);
  return kOk;
}

}  // namespace

int run_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "help" || arg == "--help" || arg == "-h" || arg == "-help") {
      std::cout << kUsageText;
      return kOk;
    }
  }
  if (auto error = flag_error(argc, argv)) return usage_error(*error);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) return usage_error("");
  const std::string command = positional[1];
  if (command != "validate" && command != "describe" && command != "run" && command != "bench") {
    return usage_error(absl::StrCat("unknown command \"", command, "\""));
  }
  if (positional.size() != 3) {
    return usage_error(positional.size() < 3 ? absl::StrCat(command, " needs a SPEC file")
                                             : absl::StrCat(command, " takes one SPEC file, got ",
                                                            positional.size() - 2, " arguments"));
  }
  const std::string spec = positional[2];
  auto load = load_flags();
  if (!load.ok()) return usage_error(std::string(load.status().message()), /*show_usage=*/false);
  try {
    if (command == "validate") return validate(spec, *load);
    if (command == "describe") return describe(spec, *load);
    if (command == "run") return run(spec, *load);
    return bench(spec, *load);
  } catch (const std::bad_alloc&) {
    return failed(absl::ResourceExhaustedError(absl::StrCat(spec, ": out of memory")));
  } catch (const std::exception& error) {
    return failed(absl::InternalError(absl::StrCat(spec, ": ", error.what())));
  }
}

int main(int argc, char** argv) {
  const int status = run_command(argc, argv);
  // Everything the command wrote is out once its streams are flushed (its files were closed when
  // it returned). Leaving without static destructors skips LibTorch's, which deregister each of
  // its thousands of operators: about a quarter of a short `tdp run`. Sanitized builds leave
  // normally, so that LeakSanitizer's check and ThreadSanitizer's exit status still apply.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return status;
#else
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
#endif
}
