#include "sdk/cli/json_tensordict.h"
#include "tdpolicy/tensor.pb.h"

#include <ATen/Functions.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace tdp::cli {
namespace {

using google::protobuf::Value;

std::string index_str(const std::vector<int64_t>& index) {
  std::string out;
  for (int64_t i : index) absl::StrAppend(&out, "[", i, "]");
  return out;
}

// The shortest decimal that reads back as `value`, as Python's repr picks it: 0.1, not
// 0.10000000000000001; 300, not 3e+02 (positional up to 16 integer digits).
template <typename T>
std::string shortest(T value, int max_digits, T (*read)(const char*, char**)) {
  int digits = 1;
  std::string text;
  for (; digits < max_digits; ++digits) {
    text = absl::StrFormat("%.*g", digits, value);
    if (read(text.c_str(), nullptr) == value) break;
  }
  if (digits == max_digits) text = absl::StrFormat("%.*g", digits, value);
  if (value != 0 && std::isfinite(value)) {
    const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(static_cast<double>(value)))));
    if (exponent >= digits && exponent < 16) text = absl::StrFormat("%.*g", exponent + 1, value);
  }
  return text;
}
std::string shortest(double value) { return shortest<double>(value, 17, &std::strtod); }
std::string shortest(float value) { return shortest<float>(value, 9, &std::strtof); }

// What a JSON value is, for messages: "a list of 3", "the string \"abc\"", "null", ...
std::string describe_value(const Value& value) {
  switch (value.kind_case()) {
    case Value::kNullValue: return "null";
    case Value::kNumberValue: return absl::StrCat("the number ", shortest(value.number_value()));
    case Value::kStringValue: return absl::StrCat("the string \"", value.string_value(), "\"");
    case Value::kBoolValue: return value.bool_value() ? "true" : "false";
    case Value::kStructValue: return "an object";
    case Value::kListValue: return absl::StrCat("a list of ", value.list_value().values_size());
    default: return "nothing";
  }
}

struct DTypeInfo {
  tdpolicy::DType proto;
  c10::ScalarType scalar;
  bool floating;
  // The integer range; unused for floating and bool dtypes.
  double min;
  double max;
};

constexpr double kTwo63 = 9223372036854775808.0;
constexpr DTypeInfo kDTypes[] = {
    {tdpolicy::FLOAT32, c10::kFloat, true, 0, 0},
    {tdpolicy::FLOAT64, c10::kDouble, true, 0, 0},
    {tdpolicy::FLOAT16, c10::kHalf, true, 0, 0},
    {tdpolicy::BFLOAT16, c10::kBFloat16, true, 0, 0},
    {tdpolicy::INT64, c10::kLong, false, -kTwo63, kTwo63 - 1024},  // the largest double below 2^63
    {tdpolicy::INT32, c10::kInt, false, -2147483648.0, 2147483647.0},
    {tdpolicy::INT16, c10::kShort, false, -32768.0, 32767.0},
    {tdpolicy::INT8, c10::kChar, false, -128.0, 127.0},
    {tdpolicy::UINT8, c10::kByte, false, 0.0, 255.0},
    {tdpolicy::BOOL, c10::kBool, false, 0.0, 1.0},
};

const DTypeInfo* dtype_info(c10::ScalarType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.scalar == dtype) return &info;
  }
  return nullptr;
}

// One declared input being read: its name for messages, dtype, and the values found so far.
class TensorReader {
 public:
  TensorReader(std::string key, const DTypeInfo& dtype) : key_(std::move(key)), dtype_(dtype) {}

  absl::StatusOr<at::Tensor> read(const Value& root) {
    // The shape is what the first element at each depth shows; every other element must agree.
    const Value* probe = &root;
    while (probe->kind_case() == Value::kListValue) {
      const auto& list = probe->list_value();
      shape_.push_back(list.values_size());
      if (list.values_size() == 0) break;
      probe = &list.values(0);
    }
    std::vector<int64_t> index;
    absl::Status status = visit(root, index);
    if (!status.ok()) return status;
    at::Tensor as_double = at::empty(shape_, at::TensorOptions().dtype(at::kDouble));
    if (!values_.empty()) std::memcpy(as_double.data_ptr<double>(), values_.data(), values_.size() * sizeof(double));
    at::Tensor tensor = as_double.to(dtype_.scalar);
    if (dtype_.floating && dtype_.scalar != c10::kDouble) {
      // A finite number that becomes inf in a narrower float is out of its range.
      at::Tensor overflow = at::isinf(tensor).logical_and(at::isfinite(as_double)).flatten();
      if (overflow.any().item<bool>()) {
        const int64_t flat = overflow.nonzero()[0][0].item<int64_t>();
        return error(unravel(flat), absl::StrCat(shortest(values_[flat]), " is out of range for ",
                                                 tdpolicy::DType_Name(dtype_.proto)));
      }
    }
    return tensor;
  }

 private:
  absl::Status error(const std::vector<int64_t>& index, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("input \"", key_, "\"", index_str(index), ": ", what));
  }

  std::vector<int64_t> unravel(int64_t flat) const {
    std::vector<int64_t> index(shape_.size());
    for (size_t d = shape_.size(); d-- > 0;) {
      index[d] = flat % shape_[d];
      flat /= shape_[d];
    }
    return index;
  }

  // Linear in the number of values: the index is one vector extended and shrunk in place, and
  // the reference index ([0][0]...) is only built for an error message.
  absl::Status visit(const Value& value, std::vector<int64_t>& index) {
    const size_t depth = index.size();
    const auto reference = [depth] { return std::vector<int64_t>(depth, 0); };
    if (depth < shape_.size()) {
      if (value.kind_case() != Value::kListValue) {
        return error(index, absl::StrCat("ragged nested list: expected a list of ", shape_[depth], " (as at ",
                                         index_str(reference()), "), got ", describe_value(value)));
      }
      const auto& list = value.list_value();
      if (list.values_size() != shape_[depth]) {
        return error(index, absl::StrCat("ragged nested list: has ", list.values_size(), " elements where ",
                                         depth == 0 ? "the shape says" : index_str(reference()) + " has", " ",
                                         shape_[depth]));
      }
      for (int i = 0; i < list.values_size(); ++i) {
        index.push_back(i);
        absl::Status status = visit(list.values(i), index);
        index.pop_back();
        if (!status.ok()) return status;
      }
      return absl::OkStatus();
    }
    if (value.kind_case() == Value::kListValue) {
      return error(index, absl::StrCat("ragged nested list: expected a number (as at ", index_str(reference()),
                                       "), got ", describe_value(value)));
    }
    absl::StatusOr<double> number = leaf(value);
    if (!number.ok()) return error(index, std::string(number.status().message()));
    values_.push_back(*number);
    return absl::OkStatus();
  }

  absl::StatusOr<double> leaf(const Value& value) const {
    const std::string dtype = tdpolicy::DType_Name(dtype_.proto);
    if (dtype_.scalar == c10::kBool) {
      if (value.kind_case() == Value::kBoolValue) return value.bool_value() ? 1.0 : 0.0;
      if (value.kind_case() == Value::kNumberValue &&
          (value.number_value() == 0.0 || value.number_value() == 1.0)) {
        return value.number_value();
      }
      return absl::InvalidArgumentError(
          absl::StrCat("expected true, false, 0 or 1 (BOOL), got ", describe_value(value)));
    }
    if (dtype_.floating) {
      if (value.kind_case() == Value::kNumberValue) return value.number_value();
      if (value.kind_case() == Value::kStringValue) {
        const std::string& text = value.string_value();
        if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
        if (text == "Infinity") return std::numeric_limits<double>::infinity();
        if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
      }
      return absl::InvalidArgumentError(absl::StrCat("expected a number (", dtype,
                                                     "; or \"NaN\", \"Infinity\", \"-Infinity\"), got ",
                                                     describe_value(value)));
    }
    if (value.kind_case() != Value::kNumberValue) {
      return absl::InvalidArgumentError(absl::StrCat("expected an integer (", dtype, "), got ", describe_value(value)));
    }
    const double number = value.number_value();
    if (std::floor(number) != number) {
      return absl::InvalidArgumentError(absl::StrCat("expected an integer (", dtype, "), got ", describe_value(value)));
    }
    if (number < dtype_.min || number > dtype_.max) {
      return absl::InvalidArgumentError(absl::StrCat(shortest(number), " is out of range for ", dtype));
    }
    return number;
  }

  std::string key_;
  const DTypeInfo& dtype_;
  std::vector<int64_t> shape_;
  std::vector<double> values_;
};

struct Declared {
  std::string key;  // as the spec writes it: "next/reward"
  std::vector<std::string> path;
  std::vector<int64_t> shape;
  const DTypeInfo* dtype;
  bool optional;  // a recurrent state or an is_init the caller may leave out
};

std::string declared_list(const std::vector<Declared>& declared) {
  std::vector<std::string> names;
  for (const Declared& input : declared) names.push_back(absl::StrCat("\"", input.key, "\""));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// Reports the first leaf (or empty object) of `object` that no declared input names.
absl::Status check_unknown(const google::protobuf::Struct& object, std::vector<std::string>& prefix,
                           const std::set<std::vector<std::string>>& leaves,
                           const std::set<std::vector<std::string>>& parents,
                           const std::vector<Declared>& declared) {
  for (const auto& [name, value] : object.fields()) {
    prefix.push_back(name);
    absl::Status status = absl::OkStatus();
    if (leaves.count(prefix) == 0) {
      if (parents.count(prefix) != 0 && value.kind_case() == Value::kStructValue) {
        status = check_unknown(value.struct_value(), prefix, leaves, parents, declared);
      } else {
        std::string hint;
        if (name.find('/') != std::string::npos) {
          hint = " (a nested key is written as nested objects: {\"next\": {\"reward\": ...}} for \"next/reward\")";
        }
        status = absl::InvalidArgumentError(absl::StrCat("unknown input \"", absl::StrJoin(prefix, "/"),
                                                         "\"; the spec declares ", declared_list(declared), hint));
      }
    }
    prefix.pop_back();
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// ---- printing -------------------------------------------------------------------------------

void append_json_string(std::string& out, const std::string& text) {
  out.push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

template <typename Format>
void append_nested(std::string& out, const std::vector<int64_t>& shape, size_t depth, int64_t& flat,
                   const Format& format) {
  if (depth == shape.size()) {
    format(out, flat++);
    return;
  }
  out.push_back('[');
  for (int64_t i = 0; i < shape[depth]; ++i) {
    if (i > 0) out += ", ";
    append_nested(out, shape, depth + 1, flat, format);
  }
  out.push_back(']');
}

// protobuf's JSON parser reads "-0" as the integer 0; "-0.0" keeps the sign.
constexpr const char* kNegativeZero = "-0.0";

// JSON has no NaN or infinity; protobuf's JSON mapping writes them as these strings.
void append_non_finite(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "\"NaN\"";
  } else {
    out += value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  }
}

// One float or double: -0 keeps its sign, finite values their shortest round-tripping digits.
template <typename T>
void append_float(std::string& out, T value) {
  if (value == 0 && std::signbit(value)) {
    out += kNegativeZero;
  } else if (std::isfinite(value)) {
    out += shortest(value);
  } else {
    append_non_finite(out, value);
  }
}

absl::Status append_tensor(std::string& out, const std::string& key, const at::Tensor& tensor) {
  const std::vector<int64_t> shape(tensor.sizes().begin(), tensor.sizes().end());
  int64_t flat = 0;
  const c10::ScalarType type = tensor.scalar_type();
  if (type == c10::kDouble) {
    const at::Tensor data = tensor.detach().to(at::kCPU).contiguous();
    const double* values = data.data_ptr<double>();
    append_nested(out, shape, 0, flat, [&](std::string& o, int64_t i) { append_float(o, values[i]); });
  } else if (type == c10::kFloat || type == c10::kHalf || type == c10::kBFloat16) {
    // Half and bfloat16 widen to float exactly; a float's digits read back to the same half.
    const at::Tensor data = tensor.detach().to(at::kCPU).to(at::kFloat).contiguous();
    const float* values = data.data_ptr<float>();
    append_nested(out, shape, 0, flat, [&](std::string& o, int64_t i) { append_float(o, values[i]); });
  } else if (type == c10::kBool) {
    const at::Tensor data = tensor.detach().to(at::kCPU).contiguous();
    const bool* values = data.data_ptr<bool>();
    append_nested(out, shape, 0, flat, [&](std::string& o, int64_t i) { o += values[i] ? "true" : "false"; });
  } else if (c10::isIntegralType(type, /*includeBool=*/false)) {
    const at::Tensor data = tensor.detach().to(at::kCPU).to(at::kLong).contiguous();
    const int64_t* values = data.data_ptr<int64_t>();
    append_nested(out, shape, 0, flat, [&](std::string& o, int64_t i) { absl::StrAppend(&o, values[i]); });
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("entry \"", key, "\": dtype ", c10::toString(type), " has no JSON form"));
  }
  return absl::OkStatus();
}

absl::Status append_tensordict(std::string& out, const TensorDict& td, const std::string& prefix, int indent) {
  const std::vector<NestedKey> keys = td.keys();
  if (keys.empty()) {
    out += "{}";
    return absl::OkStatus();
  }
  const std::string pad(indent + 2, ' ');
  out += "{\n";
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& name = keys[i].leaf();
    const std::string path = prefix.empty() ? name : absl::StrCat(prefix, "/", name);
    out += pad;
    append_json_string(out, name);
    out += ": ";
    const Entry entry = td.get_entry(keys[i]);
    absl::Status status = entry.is_tensordict() ? append_tensordict(out, entry.tensordict(), path, indent + 2)
                                                : append_tensor(out, path, entry.tensor());
    if (!status.ok()) return status;
    out += i + 1 < keys.size() ? ",\n" : "\n";
  }
  out += std::string(indent, ' ');
  out += "}";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorDict> tensordict_from_json(const std::string& json,
                                                const std::vector<policy::TensorSignature>& inputs,
                                                bool state_optional, const policy::Limits& limits) {
  std::vector<Declared> declared;
  std::set<std::vector<std::string>> leaves;
  std::set<std::vector<std::string>> parents;
  for (const policy::TensorSignature& input : inputs) {
    Declared entry{input.name, input.key.path(), input.shape, dtype_info(input.dtype), (state_optional && input.state) || input.optional};
    if (entry.dtype == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("declared input \"", input.name, "\" has dtype ",
                                                     c10::toString(input.dtype), ", which JSON input cannot hold"));
    }
    for (size_t n = 1; n < entry.path.size(); ++n) {
      parents.insert(std::vector<std::string>(entry.path.begin(), entry.path.begin() + n));
    }
    leaves.insert(entry.path);
    declared.push_back(std::move(entry));
  }

  // protobuf's JSON parser gives up past ~48 nested lists with a message about its own
  // transcoder, and deep nesting costs it time: the depth is counted first, without parsing.
  // It reads at most kMaxJsonDepth levels whatever the limit says.
  const int64_t max_depth = std::min(limits.max_json_depth, kMaxJsonDepth);
  const int64_t depth = policy::scan_text(json, /*angle_brackets=*/false, /*hash_comments=*/false, max_depth).depth;
  if (depth > max_depth) {
    return absl::InvalidArgumentError(
        policy::limit_exceeded("the input's JSON nesting", depth, "levels (or more)", max_depth, "max_json_depth"));
  }
  Value root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &root);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the input is not valid JSON: ", std::string(parsed.message())));
  }
  if (root.kind_case() != Value::kStructValue) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the input must be a JSON object of named tensors ({\"observation\": [[...], ...]}), got ",
        describe_value(root)));
  }

  std::vector<std::pair<const Declared*, at::Tensor>> tensors;
  std::optional<std::vector<int64_t>> batch;
  const Declared* batch_source = nullptr;
  for (const Declared& input : declared) {
    const bool optional = input.optional;
    const Value* value = &root;
    for (size_t level = 0; level < input.path.size(); ++level) {
      if (value->kind_case() != Value::kStructValue) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input \"", absl::StrJoin(input.path.begin(), input.path.begin() + level, "/"),
            "\" must be an object holding \"", input.path[level], "\" (for the declared input \"", input.key,
            "\"), got ", describe_value(*value)));
      }
      const auto& fields = value->struct_value().fields();
      auto found = fields.find(input.path[level]);
      if (found == fields.end() && optional) {
        value = nullptr;
        break;
      }
      if (found == fields.end()) {
        return absl::InvalidArgumentError(absl::StrCat("missing input \"", input.key, "\" (declared shape ",
                                                       shape_to_string(input.shape), ", ",
                                                       tdpolicy::DType_Name(input.dtype->proto), ")"));
      }
      value = &found->second;
    }
    if (value == nullptr) continue;  // an optional input left out
    if (value->kind_case() == Value::kStructValue) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", input.key,
                                                     "\": expected a nested list of numbers, got an object"));
    }
    absl::StatusOr<at::Tensor> tensor = TensorReader(input.key, *input.dtype).read(*value);
    if (!tensor.ok()) return tensor.status();
    const std::vector<int64_t> shape(tensor->sizes().begin(), tensor->sizes().end());
    const size_t batch_dims = shape.size() >= input.shape.size() ? shape.size() - input.shape.size() : 0;
    if (shape.size() < input.shape.size() ||
        !std::equal(input.shape.begin(), input.shape.end(), shape.begin() + batch_dims)) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", input.key, "\": shape ", shape_to_string(shape),
                                                     " does not end with the declared per-env shape ",
                                                     shape_to_string(input.shape)));
    }
    std::vector<int64_t> this_batch(shape.begin(), shape.begin() + batch_dims);
    if (!batch) {
      batch = this_batch;
      batch_source = &input;
    } else if (*batch != this_batch) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", input.key, "\" has batch dims ", shape_to_string(this_batch), " (shape ", shape_to_string(shape),
          ") but input \"", batch_source->key, "\" has ", shape_to_string(*batch), "; all inputs share the batch dims"));
    }
    tensors.emplace_back(&input, *std::move(tensor));
  }

  std::vector<std::string> prefix;
  absl::Status unknown = check_unknown(root.struct_value(), prefix, leaves, parents, declared);
  if (!unknown.ok()) return unknown;

  TensorDict td(batch.value_or(std::vector<int64_t>{}));
  for (const auto& [input, tensor] : tensors) td.set(NestedKey(input->path), tensor);
  return td;
}

absl::StatusOr<std::string> tensordict_to_json(const TensorDict& td) {
  std::string out;
  absl::Status status = append_tensordict(out, td, "", 0);
  if (!status.ok()) return status;
  out.push_back('\n');
  return out;
}

}  // namespace tdp::cli
