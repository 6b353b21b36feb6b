// write_line_plot_png writes a valid PNG (signature, IHDR size, chunk CRCs, a zlib stream that
// inflates to exactly height scanlines of RGB, far smaller than them), the
// series show in their colours on a white chart, and bad input is an error naming the file.
#include "samples/agents/plot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

namespace tdp::agents {
namespace {

using ::testing::HasSubstr;

using test_util::read_file;
using test_util::temp_path;

uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 | uint32_t(uint8_t(s[at + 2])) << 8 |
         uint32_t(uint8_t(s[at + 3]));
}

// Bitwise, independent of the writer's table-driven one.
uint32_t reference_crc32(const std::string& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

struct Png {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> raw;  // the scanlines, filter bytes included
  std::vector<std::string> chunk_types;

  // The pixel at (x, y), assuming filter 0 on every line (what the writer uses).
  std::array<uint8_t, 3> pixel(int x, int y) const {
    const size_t at = size_t(y) * (1 + width * 3) + 1 + size_t(x) * 3;
    return {raw[at], raw[at + 1], raw[at + 2]};
  }
};

// Parses the PNG, checking every chunk's CRC, and inflates the image data.
Png parse_png(const std::string& file) {
  Png png;
  EXPECT_EQ(file.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat;
  size_t at = 8;
  while (at + 12 <= file.size()) {
    const uint32_t length = be32(file, at);
    const std::string type = file.substr(at + 4, 4);
    const std::string data = file.substr(at + 8, length);
    EXPECT_EQ(be32(file, at + 8 + length), reference_crc32(type + data)) << "CRC of " << type;
    png.chunk_types.push_back(type);
    if (type == "IHDR") {
      png.width = be32(data, 0);
      png.height = be32(data, 4);
      EXPECT_EQ(data.substr(8), std::string("\x08\x02\x00\x00\x00", 5));  // 8-bit RGB
    }
    if (type == "IDAT") idat += data;
    at += 12 + length;
  }
  EXPECT_EQ(at, file.size());
  // A zlib stream (header check bits, deflate) that inflates to exactly the scanlines; zlib
  // verifies the Adler-32 itself.
  EXPECT_EQ((uint8_t(idat[0]) * 256 + uint8_t(idat[1])) % 31, 0) << "zlib header check bits";
  EXPECT_EQ(uint8_t(idat[0]) & 0x0F, 8) << "deflate";
  const size_t expected = size_t(png.height) * (1 + size_t(png.width) * 3);
  png.raw.resize(expected + 1);  // one spare byte: a longer stream would fill it
  uLongf inflated = png.raw.size();
  EXPECT_EQ(uncompress(png.raw.data(), &inflated, reinterpret_cast<const Bytef*>(idat.data()), idat.size()), Z_OK);
  EXPECT_EQ(inflated, expected);
  png.raw.resize(inflated);
  return png;
}

int count_pixels(const Png& png, std::array<uint8_t, 3> color) {
  int n = 0;
  for (uint32_t y = 0; y < png.height; ++y)
    for (uint32_t x = 0; x < png.width; ++x) n += png.pixel(x, y) == color;
  return n;
}

constexpr std::array<uint8_t, 3> kBlue = {31, 119, 180};    // the first series
constexpr std::array<uint8_t, 3> kOrange = {255, 127, 14};  // the second

std::vector<PlotSeries> two_curves() {
  PlotSeries a{"mean return", {}, {}}, b{"min return", {}, {}};
  for (int i = 0; i <= 50; ++i) {
    a.x.push_back(i), a.y.push_back(10 + 4.8 * i - 0.03 * i * i);
    b.x.push_back(i), b.y.push_back(i % 7 == 3 ? std::numeric_limits<double>::quiet_NaN() : 8 + 2.5 * i);
  }
  return {a, b};
}

TEST(WriteLinePlotPng, WritesAValidPngOfTheRequestedSize) {
  PlotOptions options;
  options.title = "PPO on CartPole";
  options.x_label = "iteration";
  options.y_label = "return";
  options.width = 640;
  options.height = 400;
  const std::string path = temp_path("valid.png");
  const absl::Status status = write_line_plot_png(path, two_curves(), options);
  ASSERT_OK(status);
  const Png png = parse_png(read_file(path));
  EXPECT_EQ(png.width, 640u);
  EXPECT_EQ(png.height, 400u);
  EXPECT_EQ(png.chunk_types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  // 400 scanlines of a filter byte and 640 RGB pixels, compressed well below their raw size.
  EXPECT_EQ(png.raw.size(), 400u * (1 + 640 * 3));
  EXPECT_LT(read_file(path).size(), png.raw.size() / 10);
  for (uint32_t y = 0; y < png.height; ++y) EXPECT_EQ(png.raw[y * (1 + 640 * 3)], 0) << "filter of line " << y;
  // A white chart with both series drawn in their own colours, and no temporary file left.
  EXPECT_EQ(png.pixel(0, 0), (std::array<uint8_t, 3>{255, 255, 255}));
  EXPECT_GT(count_pixels(png, kBlue), 500);
  EXPECT_GT(count_pixels(png, kOrange), 300);
  EXPECT_GT(count_pixels(png, {0, 0, 0}), 1000);  // axes and text
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);

  // Where an example chart is wanted (bazel keeps TEST_UNDECLARED_OUTPUTS_DIR), leave one.
  if (const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    EXPECT_OK(write_line_plot_png(std::string(outputs) + "/example_chart.png", two_curves(), options));
  }
}

TEST(WriteLinePlotPng, DefaultSizeAndASinglePointStillDraw) {
  const std::string path = temp_path("point.png");
  ASSERT_OK(write_line_plot_png(path, {{"one", {3}, {7}}}, PlotOptions()));
  const Png png = parse_png(read_file(path));
  EXPECT_EQ(png.width, 800u);
  EXPECT_EQ(png.height, 480u);
  EXPECT_GT(count_pixels(png, kBlue), 20);
}

TEST(WriteLinePlotPng, RejectsBadInputNamingTheFileAndSeries) {
  const std::string path = temp_path("bad.png");
  absl::Status status = write_line_plot_png(path, {}, PlotOptions());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), path + ": no series to plot");

  status = write_line_plot_png(path, {{"ok", {1, 2}, {1, 2}}, {"short", {1, 2, 3}, {1, 2}}}, PlotOptions());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), path + ": series 1 \"short\" has 3 x values but 2 y values");

  const double nan = std::numeric_limits<double>::quiet_NaN();
  status = write_line_plot_png(path, {{"nan", {1, nan}, {nan, 2}}}, PlotOptions());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), path + ": no series has a point with finite x and y");

  PlotOptions tiny;
  tiny.width = 10;
  EXPECT_EQ(write_line_plot_png(path, {{"a", {1}, {1}}}, tiny).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "nothing written on error";

  status = write_line_plot_png("/nonexistent-dir/chart.png", {{"a", {1}, {1}}}, PlotOptions());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("/nonexistent-dir/chart.png.tmp: cannot open for writing"));
}

}  // namespace
}  // namespace tdp::agents
