// A structure-aware mutator for the text spec fuzzer (libprotobuf-mutator is not in Debian):
// libFuzzer calls LLVMFuzzerCustomMutator for each new input. It parses the text as a
// tdpolicy.PolicySpec, applies one to three edits through protobuf reflection, and prints the
// result back as text, so mutations land in field values and module trees instead of mostly
// breaking the syntax. Edits: set a scalar to an edge value (0, -1, 2^40, NaN, ...), a string to
// a key, distribution, mapping or path worth trying ("a//b", "", "../x", "biased_softplus_nan"),
// flip a bool, set an enum to any number, switch a oneof (set a message field that is unset),
// clear a field, remove, duplicate or add a repeated element, and copy a sub-message into another
// place of the same type (one module tree into another). One call in eight, or when the input does
// not parse, falls back to libFuzzer's byte mutations (LLVMFuzzerMutate), which keep the parser
// itself fuzzed.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sdk/policy/limits.h"
#include "tdpolicy/spec.pb.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

class SilentErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

const std::vector<std::string>& interesting_strings() {
  static const std::vector<std::string> strings = {
      "", "a//b", "/", "a/", "/a", "observation", "action", "loc", "scale", "logits", "hidden", "params",
      "sample_log_prob", "action_log_prob", "goal/position", "next/observation", "out/", "\xff",
      "normal", "tanh_normal", "categorical", "one_hot_categorical", "delta", "truncated_normal", "bernoulli",
      "independent_normal", "mode", "median", "mean", "random", "deterministic", "nonsense",
      "relu", "tanh", "elu", "gelu", "identity", "softplus", "exp", "biased_softplus_1.0", "biased_softplus_nan",
      "biased_softplus_inf", "biased_softplus_-1", "biased_softplus_", "none", "low", "high", "min", "max",
      "upscale", "tanh_loc", "a", "b", "temperature", "forward", "../x", "/etc/passwd", "torchscript_actor.pt",
      "gaussian_actor.pbtxt", ".", ""};
  return strings;
}

int64_t interesting_int(std::mt19937_64& rng, int64_t current) {
  static const int64_t values[] = {0,  1,  -1, 2,  3,  4,  7,  8,  16, 255, 1024, 65536, int64_t{1} << 20,
                                   int64_t{1} << 28, int64_t{1} << 31, int64_t{1} << 40, std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min(), std::numeric_limits<int32_t>::max()};
  switch (rng() % 3) {
    case 0:
      // Wrapping, as uint64: INT64_MAX + 1 is INT64_MIN here, not undefined behaviour.
      return static_cast<int64_t>(static_cast<uint64_t>(current) + rng() % 5 - 2);
    default:
      return values[rng() % (sizeof(values) / sizeof(values[0]))];
  }
}

double interesting_double(std::mt19937_64& rng, double current) {
  static const double values[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-4, -1e-4, 1e300, -1e300, 1e-310,
                                  std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(), 3.0e38, 4.0e38};
  if (rng() % 3 == 0) return current * -2.0;
  return values[rng() % (sizeof(values) / sizeof(values[0]))];
}

// double -> float without undefined behaviour: out of range becomes an infinity.
float to_float(double value) {
  if (std::isfinite(value) && std::fabs(value) > std::numeric_limits<float>::max()) {
    return value > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(value);
}

// Every message in the tree (the root included), so an edit can land at any depth.
void collect(Message* message, std::vector<Message*>* out) {
  out->push_back(message);
  const Reflection* reflection = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        collect(reflection->MutableRepeatedMessage(message, field, i), out);
      }
    } else {
      collect(reflection->MutableMessage(message, field), out);
    }
  }
}

std::string mutate_string(std::mt19937_64& rng, std::string value) {
  if (rng() % 4 != 0 || value.empty()) return interesting_strings()[rng() % interesting_strings().size()];
  const size_t at = rng() % value.size();
  switch (rng() % 3) {
    case 0:
      value[at] = "/._-a0"[rng() % 6];
      break;
    case 1:
      value.erase(at, 1);
      break;
    default:
      value.insert(at, value.substr(0, at));
      break;
  }
  return value;
}

void set_scalar(std::mt19937_64& rng, Message* message, const FieldDescriptor* field, int index) {
  const Reflection* r = message->GetReflection();
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const int64_t v = interesting_int(rng, rep ? r->GetRepeatedInt32(*message, field, index) : r->GetInt32(*message, field));
      const int32_t c = static_cast<int32_t>(v);
      rep ? r->SetRepeatedInt32(message, field, index, c) : r->SetInt32(message, field, c);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v = interesting_int(rng, rep ? r->GetRepeatedInt64(*message, field, index) : r->GetInt64(*message, field));
      rep ? r->SetRepeatedInt64(message, field, index, v) : r->SetInt64(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const uint32_t v = static_cast<uint32_t>(interesting_int(rng, 0));
      rep ? r->SetRepeatedUInt32(message, field, index, v) : r->SetUInt32(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const uint64_t v = static_cast<uint64_t>(interesting_int(rng, 0));
      rep ? r->SetRepeatedUInt64(message, field, index, v) : r->SetUInt64(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double v = interesting_double(rng, rep ? r->GetRepeatedDouble(*message, field, index) : r->GetDouble(*message, field));
      rep ? r->SetRepeatedDouble(message, field, index, v) : r->SetDouble(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const float v = to_float(interesting_double(rng, rep ? r->GetRepeatedFloat(*message, field, index) : r->GetFloat(*message, field)));
      rep ? r->SetRepeatedFloat(message, field, index, v) : r->SetFloat(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const bool v = !(rep ? r->GetRepeatedBool(*message, field, index) : r->GetBool(*message, field));
      rep ? r->SetRepeatedBool(message, field, index, v) : r->SetBool(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      // Any number: proto3 enums are open, so unknown values reach the loader too.
      const int count = field->enum_type()->value_count();
      const int v = rng() % 4 == 0 ? static_cast<int>(interesting_int(rng, 0))
                                   : field->enum_type()->value(static_cast<int>(rng() % count))->number();
      rep ? r->SetRepeatedEnumValue(message, field, index, v) : r->SetEnumValue(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v = mutate_string(rng, rep ? r->GetRepeatedString(*message, field, index) : r->GetString(*message, field));
      if (field->type() == FieldDescriptor::TYPE_BYTES && rng() % 2 == 0) {
        // Tensor data: a few bytes more or less than the shape needs, or a float's NaN.
        v = r->GetString(*message, field);
        if (rng() % 2 == 0 && !v.empty()) {
          v.resize(v.size() - 1);
        } else {
          v.append("\x00\x00\xc0\x7f", 4);
        }
      }
      rep ? r->SetRepeatedString(message, field, index, v) : r->SetString(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
}

// A copy of one of `messages` of type `type` (each taken with chance 1/`one_in`), or null.
std::unique_ptr<Message> pick_donor(std::mt19937_64& rng, const std::vector<Message*>& messages,
                                    const google::protobuf::Descriptor* type, int one_in) {
  for (Message* other : messages) {
    if (other->GetDescriptor() == type && rng() % one_in == 0) {
      std::unique_ptr<Message> copy(other->New());
      copy->CopyFrom(*other);
      return copy;
    }
  }
  return nullptr;
}

// One edit somewhere in the tree.
void mutate_once(std::mt19937_64& rng, tdpolicy::PolicySpec* spec) {
  std::vector<Message*> messages;
  collect(spec, &messages);
  Message* message = messages[rng() % messages.size()];
  const Reflection* r = message->GetReflection();
  const auto* descriptor = message->GetDescriptor();
  if (descriptor->field_count() == 0) return;
  const FieldDescriptor* field = descriptor->field(static_cast<int>(rng() % descriptor->field_count()));
  if (field->is_repeated()) {
    const int size = r->FieldSize(*message, field);
    const int op = size == 0 ? 0 : static_cast<int>(rng() % 4);
    if (op == 0) {  // add an element
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        // A copy of a same-typed message from elsewhere, when there is one (copied first: the
        // donor may hold the field that grows).
        std::unique_ptr<Message> donor = pick_donor(rng, messages, field->message_type(), 2);
        Message* added = r->AddMessage(message, field);
        if (donor) added->CopyFrom(*donor);
      } else {
        switch (field->cpp_type()) {
          case FieldDescriptor::CPPTYPE_INT64: r->AddInt64(message, field, interesting_int(rng, 1)); break;
          case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(message, field, static_cast<int32_t>(interesting_int(rng, 1))); break;
          case FieldDescriptor::CPPTYPE_DOUBLE: r->AddDouble(message, field, interesting_double(rng, 1)); break;
          case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(message, field, to_float(interesting_double(rng, 1))); break;
          case FieldDescriptor::CPPTYPE_BOOL: r->AddBool(message, field, rng() % 2 == 0); break;
          case FieldDescriptor::CPPTYPE_STRING: r->AddString(message, field, mutate_string(rng, "")); break;
          case FieldDescriptor::CPPTYPE_ENUM: r->AddEnumValue(message, field, static_cast<int>(rng() % 8)); break;
          default: break;
        }
      }
    } else if (op == 1) {  // remove one (the last, after swapping the chosen one there)
      r->SwapElements(message, field, static_cast<int>(rng() % size), size - 1);
      r->RemoveLast(message, field);
    } else if (op == 2) {  // swap two
      r->SwapElements(message, field, static_cast<int>(rng() % size), static_cast<int>(rng() % size));
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {  // mutate inside an element
      // (the collect() walk already reaches inside elements; here: replace one with a same-typed copy)
      std::unique_ptr<Message> donor = pick_donor(rng, messages, field->message_type(), 3);
      Message* element = r->MutableRepeatedMessage(message, field, static_cast<int>(rng() % size));
      if (donor) element->CopyFrom(*donor);
    } else {
      set_scalar(rng, message, field, static_cast<int>(rng() % size));
    }
    return;
  }
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    if (r->HasField(*message, field) && rng() % 3 == 0) {
      r->ClearField(message, field);
    } else {
      // Setting an unset member of a oneof switches the module's kind; copying a same-typed
      // message from elsewhere moves whole subtrees around.
      // The donor is copied before MutableMessage, which deletes the oneof's other member (and
      // with it messages collected above).
      std::unique_ptr<Message> donor = pick_donor(rng, messages, field->message_type(), 3);
      Message* target = r->MutableMessage(message, field);
      if (donor) target->CopyFrom(*donor);
    }
    return;
  }
  if (rng() % 8 == 0) {
    r->ClearField(message, field);
  } else {
    set_scalar(rng, message, field, 0);
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (rng() % 8 == 0) return LLVMFuzzerMutate(data, size, max_size);
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The same depth limit as the loader, so the parser here never recurses past it either.
  if (tdp::policy::scan_text(text, true, true, 100).depth > 100) return LLVMFuzzerMutate(data, size, max_size);
  tdpolicy::PolicySpec spec;
  google::protobuf::TextFormat::Parser parser;
  parser.SetRecursionLimit(100);
  SilentErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &spec)) return LLVMFuzzerMutate(data, size, max_size);
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < edits; ++i) mutate_once(rng, &spec);
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  if (!printer.PrintToString(spec, &out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
