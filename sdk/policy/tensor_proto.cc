#include "sdk/policy/tensor_proto.h"

#include <ATen/ATen.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include <cstring>
#include <stdexcept>

namespace tdp::policy {
namespace {

// Parameter bytes are little-endian on disk; every platform LibTorch ships for is too.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tdpolicy reads and writes little-endian tensors");

struct DTypeName {
  tdpolicy::DType proto;
  c10::ScalarType scalar;
};
constexpr DTypeName kDTypes[] = {
    {tdpolicy::FLOAT32, c10::kFloat}, {tdpolicy::FLOAT64, c10::kDouble}, {tdpolicy::FLOAT16, c10::kHalf},
    {tdpolicy::BFLOAT16, c10::kBFloat16}, {tdpolicy::INT64, c10::kLong}, {tdpolicy::INT32, c10::kInt},
    {tdpolicy::INT16, c10::kShort}, {tdpolicy::INT8, c10::kChar}, {tdpolicy::UINT8, c10::kByte},
    {tdpolicy::BOOL, c10::kBool},
};

}  // namespace

std::optional<tdpolicy::DType> proto_dtype(at::ScalarType scalar) {
  for (const auto& entry : kDTypes) {
    if (entry.scalar == scalar) return entry.proto;
  }
  return std::nullopt;
}

tdpolicy::TensorProto to_tensor_proto(const at::Tensor& tensor) {
  tdpolicy::TensorProto proto;
  const std::optional<tdpolicy::DType> dtype = proto_dtype(tensor.scalar_type());
  if (dtype) proto.set_dtype(*dtype);
  if (!dtype) {
    throw std::invalid_argument(absl::StrCat("to_tensor_proto: dtype ", c10::toString(tensor.scalar_type()),
                                             " has no TensorProto encoding"));
  }
  for (int64_t size : tensor.sizes()) proto.add_shape(size);
  at::Tensor data = tensor.detach().to(at::kCPU).contiguous();
  proto.set_data(static_cast<const char*>(data.data_ptr()), data.numel() * data.element_size());
  return proto;
}

std::optional<at::ScalarType> scalar_type(tdpolicy::DType dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.proto == dtype) return entry.scalar;
  }
  return std::nullopt;
}

absl::StatusOr<at::Tensor> from_tensor_proto(const tdpolicy::TensorProto& proto) {
  const std::optional<at::ScalarType> dtype = scalar_type(proto.dtype());
  if (!dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", tdpolicy::DType_Name(proto.dtype()), " is not a tensor dtype"));
  }
  std::vector<int64_t> shape(proto.shape().begin(), proto.shape().end());
  // The byte count is checked against the data before anything is allocated, so the declared
  // shape can never allocate more than the bytes the proto already holds.
  constexpr uint64_t kTooLarge = uint64_t{1} << 60;  // elements; the bytes then fit in int64
  uint64_t numel = 1;
  for (int64_t size : shape) {
    if (size < 0) return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(shape, ", "), "] has a negative dim"));
  }
  for (int64_t size : shape) {
    if (size == 0) {
      numel = 0;
      break;
    }
    if (numel > kTooLarge / static_cast<uint64_t>(size)) numel = kTooLarge + 1;
    else numel *= static_cast<uint64_t>(size);
  }
  if (numel > kTooLarge) {
    return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(shape, ", "), "] is too large"));
  }
  const size_t expected = static_cast<size_t>(numel) * c10::elementSize(*dtype);
  if (proto.data().size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("data has ", proto.data().size(), " bytes but shape [",
                                                   absl::StrJoin(shape, ", "), "] of ",
                                                   tdpolicy::DType_Name(proto.dtype()), " needs ", expected));
  }
  at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(*dtype));
  if (expected > 0) std::memcpy(tensor.data_ptr(), proto.data().data(), expected);
  return tensor;
}

}  // namespace tdp::policy
