// Reading and writing specs in their three forms.
#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

#include "sdk/spec/policy.h"

namespace tdp::spec {
namespace {

class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

SpecFormat format_for_path(const std::string& path) {
  const std::string lower = absl::AsciiStrToLower(path);
  for (const char* ext : {".pbtxt", ".textproto", ".txtpb", ".txt"}) {
    if (absl::EndsWith(lower, ext)) return SpecFormat::kText;
  }
  if (absl::EndsWith(lower, ".json")) return SpecFormat::kJson;
  for (const char* ext : {".pb", ".binpb", ".bin"}) {
    if (absl::EndsWith(lower, ext)) return SpecFormat::kBinary;
  }
  // Unknown extension: JSON starts with '{'; text is printable; the rest is binary.
  std::ifstream in(path, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), head.size());
  head.resize(in.gcount());
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(head);
  if (!trimmed.empty() && trimmed.front() == '{') return SpecFormat::kJson;
  for (char c : head) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c)) && !absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return SpecFormat::kBinary;
    }
  }
  return SpecFormat::kText;
}

absl::StatusOr<tdpolicy::PolicySpec> parse_spec(const std::string& content, SpecFormat format,
                                               const std::string& source) {
  tdpolicy::PolicySpec spec;
  switch (format) {
    case SpecFormat::kText: {
      google::protobuf::TextFormat::Parser parser;
      ErrorCollector errors;
      parser.RecordErrorsTo(&errors);
      if (!parser.ParseFromString(content, &spec)) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": not a valid text PolicySpec: ", errors.first()));
      }
      break;
    }
    case SpecFormat::kJson: {
      auto status = google::protobuf::util::JsonStringToMessage(content, &spec);
      if (!status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": not a valid JSON PolicySpec: ", std::string(status.message())));
      }
      break;
    }
    case SpecFormat::kBinary:
      if (!spec.ParseFromString(content)) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": not a valid binary PolicySpec"));
      }
      break;
  }
  return spec;
}

absl::StatusOr<tdpolicy::PolicySpec> read_spec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the spec file"));
  std::ostringstream content;
  content << in.rdbuf();
  return parse_spec(content.str(), format_for_path(path), path);
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
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      options.preserve_proto_field_names = true;
      auto status = google::protobuf::util::MessageToJsonString(spec, &content, options);
      if (!status.ok()) return absl::InternalError(absl::StrCat(path, ": ", std::string(status.message())));
      break;
    }
    case SpecFormat::kBinary:
      if (!spec.SerializeToString(&content)) return absl::InternalError(absl::StrCat(path, ": cannot serialize"));
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

}  // namespace tdp::spec
