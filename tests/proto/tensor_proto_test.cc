// The proto macro yields usable C++ messages: they serialize and parse back in every form.
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>

#include "tdpolicy/tensor.pb.h"

namespace {

TEST(TensorProtoTest, BinaryRoundTripKeepsEveryField) {
  tdpolicy::TensorProto tensor;
  tensor.set_dtype(tdpolicy::FLOAT32);
  tensor.add_shape(2);
  tensor.add_shape(3);
  tensor.set_data(std::string(24, '\x01'));

  tdpolicy::TensorProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(tensor.SerializeAsString()));
  EXPECT_EQ(parsed.dtype(), tdpolicy::FLOAT32);
  ASSERT_EQ(parsed.shape_size(), 2);
  EXPECT_EQ(parsed.shape(1), 3);
  EXPECT_EQ(parsed.data().size(), 24u);
}

TEST(TensorProtoTest, TextFormatParsesEnumNames) {
  tdpolicy::TensorProto tensor;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString("dtype: INT64 shape: [4]", &tensor));
  EXPECT_EQ(tensor.dtype(), tdpolicy::INT64);
  EXPECT_EQ(tensor.shape(0), 4);
  EXPECT_FALSE(google::protobuf::TextFormat::ParseFromString("dtype: NOT_A_TYPE", &tensor));
}

}  // namespace
