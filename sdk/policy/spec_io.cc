// Reading and writing specs in their three forms.
#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver.h>
#include <google/protobuf/util/type_resolver_util.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "sdk/policy/policy.h"

namespace tdp::policy {
namespace {

// Map fields (distribution kwargs) in key order, so the same policy always saves the same bytes
// (text output sorts maps by itself).
bool serialize_deterministic(const tdpolicy::PolicySpec& spec, std::string* out) {
  google::protobuf::io::StringOutputStream stream(out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  return spec.SerializeToCodedStream(&coded) && !coded.HadError();
}

class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

std::optional<SpecFormat> format_for_extension(const std::string& path) {
  const std::string lower = absl::AsciiStrToLower(path);
  for (const char* ext : {".pbtxt", ".textproto", ".txtpb", ".txt"}) {
    if (absl::EndsWith(lower, ext)) return SpecFormat::kText;
  }
  if (absl::EndsWith(lower, ".json")) return SpecFormat::kJson;
  for (const char* ext : {".pb", ".binpb", ".bin"}) {
    if (absl::EndsWith(lower, ext)) return SpecFormat::kBinary;
  }
  return std::nullopt;
}

// Unknown extension: JSON starts with '{'; text is printable; the rest is binary.
SpecFormat format_for_content(absl::string_view head) {
  head = head.substr(0, 256);
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(head);
  if (!trimmed.empty() && trimmed.front() == '{') return SpecFormat::kJson;
  for (char c : head) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c)) && !absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return SpecFormat::kBinary;
    }
  }
  return SpecFormat::kText;
}

}  // namespace

SpecFormat format_for_path(const std::string& path) {
  if (auto format = format_for_extension(path)) return *format;
  std::ifstream in(path, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), head.size());
  head.resize(in.gcount());
  return format_for_content(head);
}

absl::StatusOr<tdpolicy::PolicySpec> parse_spec(const std::string& content, SpecFormat format,
                                               const std::string& source, const Limits& limits) {
  tdpolicy::PolicySpec spec;
  if (format == SpecFormat::kBinary) {
    if (auto status = parse_binary_within_limits(content, spec, limits, source, "the spec file"); !status.ok()) {
      return status;
    }
    return spec;
  }
  // protobuf's text parser recurses once per level with no limit of its own that stops it
  // before the stack does (~3,000 levels), so the depth is counted first, without parsing.
  // Each message and string a parser makes is its own allocation of 32 to 200 bytes, so a file of
  // empty entries takes tens of times its size: those are counted first, without parsing, too.
  const bool text = format == SpecFormat::kText;
  const TextScan scan = scan_text(content, /*angle_brackets=*/text, /*hash_comments=*/text, limits.max_nesting_depth);
  if (scan.depth > limits.max_nesting_depth) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ",
                                                   limit_exceeded("the spec's nesting", scan.depth, "levels (or more)",
                                                                  limits.max_nesting_depth, "max_nesting_depth")));
  }
  if (auto status = check_spec_objects(scan.objects, limits, source, "the spec file"); !status.ok()) return status;
  if (text) {
    google::protobuf::TextFormat::Parser parser;
    parser.SetRecursionLimit(parser_recursion_limit(limits));
    ErrorCollector errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(content, &spec)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": not a valid text PolicySpec: ", errors.first()));
    }
  } else {
    auto status = google::protobuf::util::JsonStringToMessage(content, &spec);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": not a valid JSON PolicySpec: ", std::string(status.message())));
    }
  }
  return spec;
}

absl::StatusOr<tdpolicy::PolicySpec> read_spec(const std::string& path, const Limits& limits) {
  auto content = read_bounded_file(path, limits.max_spec_bytes, "max_spec_bytes", "the spec file");
  if (!content.ok()) return content.status();
  const SpecFormat format = format_for_extension(path).value_or(format_for_content(*content));
  return parse_spec(*content, format, path, limits);
}

absl::Status write_spec(const tdpolicy::PolicySpec& spec, const std::string& path) {
  std::string content;
  switch (format_for_path(path)) {
    case SpecFormat::kText:
      if (!google::protobuf::TextFormat::PrintToString(spec, &content)) {
        return absl::InternalError(absl::StrCat(path, ": cannot print the spec as text"));
      }
      break;
    case SpecFormat::kJson: {
      // MessageToJsonString prints maps in the message's own (per-map) order; converting the
      // deterministic binary form keeps its key order instead.
      std::string binary;
      if (!serialize_deterministic(spec, &binary)) return absl::InternalError(absl::StrCat(path, ": cannot serialize"));
      static const std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
          google::protobuf::util::NewTypeResolverForDescriptorPool(
              "type.googleapis.com", google::protobuf::DescriptorPool::generated_pool()));
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      options.preserve_proto_field_names = true;
      auto status = google::protobuf::util::BinaryToJsonString(
          resolver.get(), "type.googleapis.com/" + spec.GetDescriptor()->full_name(), binary, &content, options);
      if (!status.ok()) return absl::InternalError(absl::StrCat(path, ": ", std::string(status.message())));
      break;
    }
    case SpecFormat::kBinary:
      if (!serialize_deterministic(spec, &content)) return absl::InternalError(absl::StrCat(path, ": cannot serialize"));
      break;
  }
  // Write to a temporary name and rename, so a failed write never leaves half a spec behind.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write the file"));
    out << content;
    if (!out.good()) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot replace the file"));
  }
  return absl::OkStatus();
}

}  // namespace tdp::policy
