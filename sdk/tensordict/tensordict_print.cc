// TensorDict printing: to_string and operator<< in the form of Python's repr.
#include <absl/strings/str_cat.h>

#include <sstream>

#include "sdk/tensordict/tensordict.h"
#include "sdk/tensordict/tensordict_internal.h"

namespace tdp {

namespace {

// Python's names for dtypes, so printed TensorDicts read like tensordict's.
std::string dtype_str(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "torch.float32";
    case c10::kDouble: return "torch.float64";
    case c10::kHalf: return "torch.float16";
    case c10::kBFloat16: return "torch.bfloat16";
    case c10::kLong: return "torch.int64";
    case c10::kInt: return "torch.int32";
    case c10::kShort: return "torch.int16";
    case c10::kChar: return "torch.int8";
    case c10::kByte: return "torch.uint8";
    case c10::kBool: return "torch.bool";
    case c10::kComplexFloat: return "torch.complex64";
    case c10::kComplexDouble: return "torch.complex128";
    default: return absl::StrCat("torch.", c10::toString(dtype));
  }
}

}  // namespace

void TensorDictImpl::print(std::ostream& out, const std::string& indent) const {
  const std::string inner = indent + "    ";
  out << "TensorDict(\n" << inner << "fields={";
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [name, entry] = entries[i];
    out << "\n" << inner << "    " << name << ": ";
    if (entry.is_tensor()) {
      const at::Tensor& t = entry.tensor();
      out << "Tensor(shape=torch.Size(" << shape_to_string(t.sizes()) << "), device=" << t.device()
          << ", dtype=" << dtype_str(t.scalar_type()) << ")";
    } else {
      sub(entry)->print(out, inner + "    ");
    }
    out << (i + 1 < entries.size() ? "," : "");
  }
  out << "},\n" << inner << "batch_size=torch.Size(" << shape_to_string(batch_size) << "),\n"
      << inner << "device=";
  if (device) {
    out << *device;
  } else {
    out << "None";
  }
  out << ")";
}

std::string TensorDict::to_string() const {
  std::ostringstream out;
  impl_->print(out, "");
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const TensorDict& td) { return out << td.to_string(); }

}  // namespace tdp
