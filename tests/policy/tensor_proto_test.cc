// to_tensor_proto / from_tensor_proto: bit-exact round trips for every dtype (NaN payloads,
// signed zeros and infinities included), empty and scalar tensors, non-contiguous inputs, and
// the errors for bytes that do not fit the shape.
#include "sdk/policy/tensor_proto.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/testing/status_matchers.h"

namespace tdp::policy {
namespace {

// Bytes equality: at::equal treats NaN != NaN and -0 == 0, which is not what "bit-exact" means.
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  at::Tensor x = a.contiguous();
  at::Tensor y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

at::Tensor round_trip(const at::Tensor& t) {
  auto back = from_tensor_proto(to_tensor_proto(t));
  EXPECT_OK(back);
  return back.ok() ? *back : at::Tensor();
}

// Random bit patterns: every byte value appears, so NaN payloads, denormals and the like do.
at::Tensor random_bits(c10::ScalarType dtype, std::vector<int64_t> shape) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  const int64_t bytes = t.numel() * t.element_size();
  at::Tensor raw = at::randint(0, 256, {bytes}, at::TensorOptions().dtype(at::kByte));
  if (dtype == at::kBool) raw = raw.remainder(2);  // a bool is 0 or 1
  std::memcpy(t.data_ptr(), raw.data_ptr(), bytes);
  return t;
}

TEST(TensorProto, EveryDtypeRoundTripsBitExactly) {
  at::manual_seed(1);
  const std::vector<std::pair<c10::ScalarType, tdpolicy::DType>> dtypes = {
      {at::kFloat, tdpolicy::FLOAT32}, {at::kDouble, tdpolicy::FLOAT64}, {at::kHalf, tdpolicy::FLOAT16},
      {at::kBFloat16, tdpolicy::BFLOAT16}, {at::kLong, tdpolicy::INT64}, {at::kInt, tdpolicy::INT32},
      {at::kShort, tdpolicy::INT16}, {at::kChar, tdpolicy::INT8}, {at::kByte, tdpolicy::UINT8},
      {at::kBool, tdpolicy::BOOL}};
  for (const auto& [dtype, proto_dtype] : dtypes) {
    SCOPED_TRACE(c10::toString(dtype));
    at::Tensor t = random_bits(dtype, {3, 5, 2});
    tdpolicy::TensorProto proto = to_tensor_proto(t);
    EXPECT_EQ(proto.dtype(), proto_dtype);
    EXPECT_EQ(std::vector<int64_t>(proto.shape().begin(), proto.shape().end()), (std::vector<int64_t>{3, 5, 2}));
    EXPECT_EQ(proto.data().size(), static_cast<size_t>(30 * t.element_size()));
    EXPECT_TRUE(same_bits(round_trip(t), t));
  }
}

TEST(TensorProto, NanPayloadsSignedZerosAndInfinitiesSurvive) {
  const std::vector<uint32_t> patterns = {0x7fc00000u, 0x7fc00001u, 0xffc12345u, 0x7f800001u,  // NaNs
                                          0x80000000u, 0x00000000u, 0x7f800000u, 0xff800000u,  // +-0, +-inf
                                          0x00000001u, 0x007fffffu};                           // denormals
  at::Tensor t = at::empty({static_cast<int64_t>(patterns.size())}, at::kFloat);
  std::memcpy(t.data_ptr(), patterns.data(), patterns.size() * 4);
  at::Tensor back = round_trip(t);
  ASSERT_TRUE(back.defined());
  std::vector<uint32_t> bits(patterns.size());
  std::memcpy(bits.data(), back.data_ptr(), bits.size() * 4);
  EXPECT_EQ(bits, patterns);

  const uint64_t payload = 0x7ff0000000000abcull;  // a signalling NaN with a payload
  at::Tensor d = at::empty({1}, at::kDouble);
  std::memcpy(d.data_ptr(), &payload, 8);
  EXPECT_TRUE(same_bits(round_trip(d), d));
}

TEST(TensorProto, ScalarAndEmptyTensorsKeepTheirShapes) {
  at::Tensor scalar = at::scalar_tensor(2.5, at::kFloat);
  tdpolicy::TensorProto proto = to_tensor_proto(scalar);
  EXPECT_EQ(proto.shape_size(), 0);
  at::Tensor back = round_trip(scalar);
  EXPECT_EQ(back.dim(), 0);
  EXPECT_EQ(back.item<float>(), 2.5f);

  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, {3, 0}, {0, 4, 2}}) {
    at::Tensor empty = at::empty(shape, at::kLong);
    tdpolicy::TensorProto p = to_tensor_proto(empty);
    EXPECT_TRUE(p.data().empty());
    at::Tensor b = round_trip(empty);
    EXPECT_EQ(b.sizes().vec(), shape);
    EXPECT_EQ(b.scalar_type(), at::kLong);
  }
}

TEST(TensorProto, NonContiguousInputsAreWrittenRowMajor) {
  at::Tensor base = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor transposed = base.t();  // [4, 3], strides (1, 4)
  at::Tensor back = round_trip(transposed);
  EXPECT_TRUE(back.equal(transposed));
  EXPECT_TRUE(back.is_contiguous());
  // Little-endian bytes, row-major: element [0][1] of the transposed view is base[1][0] = 4.
  float second;
  std::memcpy(&second, to_tensor_proto(transposed).data().data() + 4, 4);
  EXPECT_EQ(second, 4.0f);
}

TEST(TensorProto, BadProtosAreErrorsThatSayWhy) {
  tdpolicy::TensorProto proto;
  proto.add_shape(2);
  proto.set_data(std::string(8, '\0'));
  EXPECT_EQ(from_tensor_proto(proto).status().message(), "dtype DTYPE_UNSPECIFIED is not a tensor dtype");

  proto.set_dtype(tdpolicy::FLOAT32);
  proto.set_data(std::string(7, '\0'));
  EXPECT_EQ(from_tensor_proto(proto).status().message(), "data has 7 bytes but shape [2] of FLOAT32 needs 8");

  proto.set_shape(0, -3);
  EXPECT_EQ(from_tensor_proto(proto).status().message(), "shape [-3] has a negative dim");

  proto.clear_shape();
  for (int i = 0; i < 4; ++i) proto.add_shape(int64_t{1} << 20);
  EXPECT_EQ(from_tensor_proto(proto).status().message(),
            "shape [1048576, 1048576, 1048576, 1048576] is too large");

  proto.set_dtype(static_cast<tdpolicy::DType>(99));
  EXPECT_FALSE(from_tensor_proto(proto).ok());
}

TEST(TensorProto, ComplexTensorsHaveNoEncoding) {
  EXPECT_THROW(to_tensor_proto(at::zeros({2}, at::kComplexFloat)), std::invalid_argument);
}

}  // namespace
}  // namespace tdp::policy
