// Conversions between at::Tensor and tdpolicy.TensorProto (dtype, shape, little-endian bytes):
// how specs and parameter files carry weights. Round trips are bit-exact.
//
//   tdpolicy::TensorProto proto = tdp::policy::to_tensor_proto(weight);
//   absl::StatusOr<at::Tensor> back = tdp::policy::from_tensor_proto(proto);
//   // back->equal(weight), same dtype, same bits (NaN payloads included)
#pragma once

#include <ATen/core/Tensor.h>
#include <absl/status/statusor.h>

#include <optional>

#include "tdpolicy/tensor.pb.h"

namespace tdp::policy {

// Copies to a contiguous CPU tensor first. Throws std::invalid_argument for a dtype the format
// has no name for (complex, quantized).
tdpolicy::TensorProto to_tensor_proto(const at::Tensor& tensor);
// An error names what is wrong: an unspecified dtype, a negative dim, or a byte count that
// does not match the shape.
absl::StatusOr<at::Tensor> from_tensor_proto(const tdpolicy::TensorProto& proto);
// The tensor dtype a DType names (an InputSpec's DTYPE_UNSPECIFIED means FLOAT32 and is the
// caller's to map); nothing for DTYPE_UNSPECIFIED or an unknown value.
std::optional<at::ScalarType> scalar_type(tdpolicy::DType dtype);
// The DType naming a tensor dtype; nothing for one the format has no name for.
std::optional<tdpolicy::DType> proto_dtype(at::ScalarType scalar);

}  // namespace tdp::policy
