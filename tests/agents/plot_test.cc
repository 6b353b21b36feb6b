// write_line_plot_png writes a PNG that cairo reads back at the requested size; each series shows
// in its colour where its points map inside the frame, and breaks at non-finite points; the
// title, axis labels and legend put ink where they belong; and bad input or a failed write is an
// error naming the file that leaves no file (and no half-written one) behind.
#include "samples/agents/plot.h"

#include <cairo.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/files.h"
#include "tests/testing/status_matchers.h"

namespace tdp::agents {
namespace {

using ::testing::HasSubstr;

using test_util::read_file;
using test_util::temp_path;

constexpr uint32_t kWhite = 0xFFFFFF;
constexpr uint32_t kBlack = 0x000000;
constexpr uint32_t kBlue = 0x1F77B4;    // the first series (31, 119, 180)
constexpr uint32_t kOrange = 0xFF7F0E;  // the second (255, 127, 14)

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A PNG as cairo reads it back: 0xRRGGBB per pixel.
struct Image {
  int width = 0, height = 0;
  std::vector<uint32_t> pixels;

  uint32_t at(int x, int y) const { return pixels[size_t(y) * width + x]; }
  static int r(uint32_t p) { return p >> 16 & 0xFF; }
  static int g(uint32_t p) { return p >> 8 & 0xFF; }
  static int b(uint32_t p) { return p & 0xFF; }
  // Text is drawn in a dark grey and anti-aliased against white: every shade of it is a grey.
  static bool text_ink(uint32_t p) { return r(p) == g(p) && g(p) == b(p) && r(p) < 128; }
  // Any pixel of a colour, whatever anti-aliasing mixed into it.
  static bool reddish(uint32_t p) { return r(p) > b(p) + 30; }

  int count(int x0, int y0, int x1, int y1, bool (*pred)(uint32_t)) const {
    int n = 0;
    for (int y = std::max(0, y0); y <= std::min(height - 1, y1); ++y)
      for (int x = std::max(0, x0); x <= std::min(width - 1, x1); ++x) n += pred(at(x, y));
    return n;
  }
  // Whether a pixel within `radius` of (x, y) has exactly `color`.
  bool has_near(double x, double y, uint32_t color, int radius = 2) const {
    const int cx = int(std::lround(x)), cy = int(std::lround(y));
    for (int j = cy - radius; j <= cy + radius; ++j)
      for (int i = cx - radius; i <= cx + radius; ++i)
        if (i >= 0 && j >= 0 && i < width && j < height && at(i, j) == color) return true;
    return false;
  }
};

Image read_png(const std::string& path) {
  Image image;
  cairo_surface_t* surface = cairo_image_surface_create_from_png(path.c_str());
  EXPECT_EQ(cairo_surface_status(surface), CAIRO_STATUS_SUCCESS)
      << path << ": " << cairo_status_to_string(cairo_surface_status(surface));
  if (cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS) {
    // An opaque RGB PNG comes back as RGB24; one with an alpha channel would be ARGB32.
    EXPECT_EQ(cairo_image_surface_get_format(surface), CAIRO_FORMAT_RGB24);
    image.width = cairo_image_surface_get_width(surface);
    image.height = cairo_image_surface_get_height(surface);
    const int stride = cairo_image_surface_get_stride(surface);
    const unsigned char* data = cairo_image_surface_get_data(surface);
    for (int y = 0; y < image.height; ++y) {
      const auto* row = reinterpret_cast<const uint32_t*>(data + size_t(y) * stride);
      for (int x = 0; x < image.width; ++x) image.pixels.push_back(row[x] & 0xFFFFFF);
    }
  }
  cairo_surface_destroy(surface);
  return image;
}

// The plot's frame: the only lines of pure black running across more than `fraction` of the
// image (most of it, but a small chart's margins take a larger share).
struct Frame {
  int left = -1, top = -1, right = -1, bottom = -1;

  // Where data (x, y) lands, for axes spanning [x_lo, x_hi] x [y_lo, y_hi] from frame line to
  // frame line.
  std::pair<double, double> map(double x, double y, double x_lo, double x_hi, double y_lo, double y_hi) const {
    return {left + (x - x_lo) / (x_hi - x_lo) * (right - left), bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top)};
  }
};

Frame find_frame(const Image& image, double fraction = 0.5) {
  Frame frame;
  for (int y = 0; y < image.height; ++y) {
    int black = 0;
    for (int x = 0; x < image.width; ++x) black += image.at(x, y) == kBlack;
    if (black > image.width * fraction) {
      if (frame.top < 0) frame.top = y;
      frame.bottom = y;
    }
  }
  for (int x = 0; x < image.width; ++x) {
    int black = 0;
    for (int y = 0; y < image.height; ++y) black += image.at(x, y) == kBlack;
    if (black > image.height * fraction) {
      if (frame.left < 0) frame.left = x;
      frame.right = x;
    }
  }
  EXPECT_GE(frame.left, 0) << "no frame found";
  EXPECT_GT(frame.right - frame.left, image.width * fraction);
  EXPECT_GT(frame.bottom - frame.top, image.height * fraction);
  return frame;
}

// Runs of consecutive rows (or columns) in [from, to] holding any pixel other than white within
// the given span of columns (rows): the bands of text and tick marks in a margin.
struct Band {
  int first, last;
  double middle;  // the mean position of the band's ink along the other axis
};

std::vector<Band> bands(const Image& image, bool rows, int from, int to, int span_from, int span_to) {
  std::vector<Band> found;
  bool in_band = false;
  double sum = 0;
  int n = 0;
  for (int i = from; i <= to; ++i) {
    int ink = 0;
    double ink_sum = 0;
    for (int j = span_from; j <= span_to; ++j) {
      const bool not_white = (rows ? image.at(j, i) : image.at(i, j)) != kWhite;
      ink += not_white, ink_sum += not_white ? j : 0;
    }
    if (ink == 0) {
      in_band = false;
      continue;
    }
    if (!in_band) found.push_back({i, i, 0}), sum = 0, n = 0, in_band = true;
    found.back().last = i, sum += ink_sum, n += ink;
    found.back().middle = sum / n;
  }
  return found;
}

// Two series over x in [0, 10], y in [0, 100], so the axes are exactly those ranges: a rising line
// (blue) and a level one at 50 (orange) with no value at x = 8.
std::vector<PlotSeries> two_lines() {
  PlotSeries rising{"mean return", {}, {}}, level{"min return", {}, {}};
  for (int i = 0; i <= 20; ++i) rising.x.push_back(i / 2.0), rising.y.push_back(5.0 * i);
  for (int i = 0; i <= 10; ++i) {
    level.x.push_back(i);
    level.y.push_back(i == 8 ? std::numeric_limits<double>::quiet_NaN() : 50);
  }
  return {rising, level};
}

PlotOptions labelled(int width, int height) {
  PlotOptions options;
  options.title = "PPO on CartPole";
  options.x_label = "iteration";
  options.y_label = "return";
  options.width = width;
  options.height = height;
  return options;
}

TEST(WriteLinePlotPng, WritesAPngCairoReadsBackAtTheRequestedSize) {
  const std::string path = temp_path("valid.png");
  ASSERT_OK(write_line_plot_png(path, two_lines(), labelled(640, 400)));
  // The file itself: PNG's signature, then IHDR with the size, 8 bits per channel, RGB.
  const std::string file = read_file(path);
  ASSERT_GT(file.size(), 33u);
  EXPECT_EQ(file.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(file.substr(12, 4), "IHDR");
  EXPECT_EQ(file.substr(16, 8), std::string("\0\0\x02\x80\0\0\x01\x90", 8));  // 640 x 400
  EXPECT_EQ(file.substr(24, 2), std::string("\x08\x02", 2));
  // Compressed: a chart is mostly white, so far below its 768,000 bytes of RGB.
  EXPECT_LT(file.size(), 640u * 400 * 3 / 10);

  const Image image = read_png(path);
  EXPECT_EQ(image.width, 640);
  EXPECT_EQ(image.height, 400);
  EXPECT_EQ(image.at(0, 0), kWhite);
  EXPECT_EQ(image.at(639, 399), kWhite);
  EXPECT_FALSE(exists(path + ".tmp"));

  // A second write replaces the file whole.
  ASSERT_OK(write_line_plot_png(path, two_lines(), PlotOptions()));
  const Image replaced = read_png(path);
  EXPECT_EQ(replaced.width, 800);
  EXPECT_EQ(replaced.height, 480);

  // Where an example chart is wanted (bazel keeps TEST_UNDECLARED_OUTPUTS_DIR), leave one.
  if (const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    EXPECT_OK(write_line_plot_png(std::string(outputs) + "/example_chart.png", two_lines(), labelled(800, 480)));
  }
}

TEST(WriteLinePlotPng, SeriesShowInTheirColoursWhereTheirPointsMap) {
  for (auto [width, height] : {std::pair{640, 400}, {800, 480}, {1600, 960}}) {
    SCOPED_TRACE(std::to_string(width) + "x" + std::to_string(height));
    const std::string path = temp_path("colours.png");
    ASSERT_OK(write_line_plot_png(path, two_lines(), labelled(width, height)));
    const Image image = read_png(path);
    const Frame frame = find_frame(image);
    auto at = [&](double x, double y) { return frame.map(x, y, 0, 10, 0, 100); };
    // On the rising line: blue at its points and between them (and not orange).
    for (double x : {1.0, 2.25, 3.0, 6.5, 7.0, 9.0}) {
      const auto [px, py] = at(x, 10 * x);
      EXPECT_TRUE(image.has_near(px, py, kBlue)) << "x=" << x << " at (" << px << ", " << py << ")";
      EXPECT_FALSE(image.has_near(px, py, kOrange)) << "x=" << x;
    }
    // On the level line, away from where the rising one crosses it at x = 5.
    for (double x : {0.5, 2.0, 3.5, 6.5, 7.0, 9.5}) {
      const auto [px, py] = at(x, 50);
      EXPECT_TRUE(image.has_near(px, py, kOrange)) << "x=" << x << " at (" << px << ", " << py << ")";
    }
    // The missing point breaks the level line: nothing orange between x = 7.5 and 8.5.
    const auto [gap_x0, gap_y] = at(7.5, 50);
    const auto [gap_x1, unused] = at(8.5, 50);
    EXPECT_EQ(image.count(int(gap_x0), int(gap_y) - 5, int(gap_x1), int(gap_y) + 5, Image::reddish), 0);
    // Nothing drawn where no series goes (the grid and the legend aside): lower right.
    const auto [empty_x, empty_y] = at(9, 20);
    EXPECT_FALSE(image.has_near(empty_x, empty_y, kBlue, 6));
    EXPECT_FALSE(image.has_near(empty_x, empty_y, kOrange, 6));
    // Anti-aliased: a sloped line's edges blend its colour into the background.
    const auto [slope_x, slope_y] = at(3, 30);
    int blended = 0;
    for (int dy = -6; dy <= 6; ++dy) {
      const uint32_t p = image.at(int(slope_x), int(slope_y) + dy);
      blended += p != kBlue && p != kWhite && Image::b(p) > Image::r(p);
    }
    EXPECT_GE(blended, 2);
  }
}

TEST(WriteLinePlotPng, ASinglePointIsADotInTheMiddle) {
  const std::string path = temp_path("point.png");
  ASSERT_OK(write_line_plot_png(path, {{"one", {3}, {7}}}, PlotOptions()));
  const Image image = read_png(path);
  EXPECT_EQ(image.width, 800);
  EXPECT_EQ(image.height, 480);
  const Frame frame = find_frame(image);
  EXPECT_TRUE(image.has_near((frame.left + frame.right) / 2.0, (frame.top + frame.bottom) / 2.0, kBlue, 1));
}

TEST(WriteLinePlotPng, TitleAxisLabelsAndLegendInkTheirPlaces) {
  const std::string with_path = temp_path("with_labels.png"), without_path = temp_path("without_labels.png");
  ASSERT_OK(write_line_plot_png(with_path, two_lines(), labelled(800, 480)));
  std::vector<PlotSeries> unlabelled = two_lines();
  for (PlotSeries& s : unlabelled) s.label.clear();
  PlotOptions bare;
  ASSERT_OK(write_line_plot_png(without_path, unlabelled, bare));
  const Image with = read_png(with_path), without = read_png(without_path);
  const Frame fw = find_frame(with), fo = find_frame(without);

  // Title: above the frame, centred over it.
  const std::vector<Band> title = bands(with, /*rows=*/true, 0, fw.top - 1, fw.left + 1, fw.right - 1);
  ASSERT_EQ(title.size(), 1u);
  EXPECT_NEAR(title[0].middle, (fw.left + fw.right) / 2.0, 10);
  EXPECT_GE(title[0].last - title[0].first, 8) << "a title taller than the tick labels";
  EXPECT_TRUE(bands(without, true, 0, fo.top - 1, fo.left + 1, fo.right - 1).empty());

  // x label: under the frame come the tick marks, the tick labels, then the label, centred.
  const std::vector<Band> below = bands(with, true, fw.bottom + 1, with.height - 1, fw.left, fw.right);
  ASSERT_EQ(below.size(), 3u);
  EXPECT_NEAR(below[2].middle, (fw.left + fw.right) / 2.0, 10);
  EXPECT_EQ(bands(without, true, fo.bottom + 1, without.height - 1, fo.left, fo.right).size(), 2u);

  // y label: left of the tick labels and tick marks, centred on the frame's height.
  const std::vector<Band> beside = bands(with, /*rows=*/false, 0, fw.left - 1, fw.top, fw.bottom);
  ASSERT_EQ(beside.size(), 3u);
  EXPECT_NEAR(beside[0].middle, (fw.top + fw.bottom) / 2.0, 10);
  EXPECT_EQ(bands(without, false, 0, fo.left - 1, fo.top, fo.bottom).size(), 2u);

  // Legend: text inside the frame only where the series have labels, each row led by its swatch.
  EXPECT_EQ(without.count(fo.left + 2, fo.top + 2, fo.right - 2, fo.bottom - 2, Image::text_ink), 0);
  EXPECT_GT(with.count(fw.left + 2, fw.top + 2, fw.right - 2, fw.bottom - 2, Image::text_ink), 100);
  int x0 = with.width, y0 = with.height, x1 = -1, y1 = -1;  // the legend text's bounds
  for (int y = fw.top + 2; y <= fw.bottom - 2; ++y) {
    for (int x = fw.left + 2; x <= fw.right - 2; ++x) {
      if (!Image::text_ink(with.at(x, y))) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  // The rising line crosses the upper right, the level one neither upper corner: upper left.
  EXPECT_LT(x1, (fw.left + fw.right) / 2);
  EXPECT_LT(y1, (fw.top + fw.bottom) / 2);
  const int swatch_x = (fw.left + x0) / 2;
  EXPECT_TRUE(with.count(swatch_x, y0, swatch_x, (y0 + y1) / 2, [](uint32_t p) { return p == kBlue; }) > 0);
  EXPECT_TRUE(with.count(swatch_x, (y0 + y1) / 2, swatch_x, y1, [](uint32_t p) { return p == kOrange; }) > 0);
}

TEST(WriteLinePlotPng, LegendAvoidsTheLines) {
  // Falling: the upper right is free this time.
  const std::string path = temp_path("falling.png");
  ASSERT_OK(write_line_plot_png(path, {{"loss", {0, 10}, {100, 0}}}, PlotOptions()));
  const Image image = read_png(path);
  const Frame frame = find_frame(image);
  int ink_left = 0, ink_right = 0;
  for (int y = frame.top + 2; y <= (frame.top + frame.bottom) / 2; ++y) {
    for (int x = frame.left + 2; x <= frame.right - 2; ++x) {
      if (Image::text_ink(image.at(x, y))) (x < (frame.left + frame.right) / 2 ? ink_left : ink_right) += 1;
    }
  }
  EXPECT_EQ(ink_left, 0);
  EXPECT_GT(ink_right, 20);
}

TEST(WriteLinePlotPng, TheSmallestChartKeepsLongTextInside) {
  // Far too long for 160 pixels: the title and labels are shortened, not run off the image, and
  // the legend stays inside the frame.
  const std::string path = temp_path("smallest.png");
  std::vector<PlotSeries> lines = two_lines();
  lines[0].label = "mean training-episode return over the last twenty episodes";
  PlotOptions options = labelled(160, 120);
  options.title = "PPO on CartPole with the default flags (seed 0)";
  options.x_label = "environment steps across all sixteen environments";
  options.y_label = "episode return";
  ASSERT_OK(write_line_plot_png(path, lines, options));
  const Image image = read_png(path);
  ASSERT_EQ(image.width, 160);
  ASSERT_EQ(image.height, 120);
  auto not_white = [](uint32_t p) { return p != kWhite; };
  EXPECT_EQ(image.count(0, 0, 159, 1, not_white), 0) << "top edge";
  EXPECT_EQ(image.count(0, 118, 159, 119, not_white), 0) << "bottom edge";
  EXPECT_EQ(image.count(0, 0, 1, 119, not_white), 0) << "left edge";
  EXPECT_EQ(image.count(158, 0, 159, 119, not_white), 0) << "right edge";
  const Frame frame = find_frame(image, 0.3);
  EXPECT_GT(image.count(frame.left + 2, frame.top + 2, frame.right - 2, frame.bottom - 2, Image::text_ink), 20)
      << "the legend";
  EXPECT_EQ(image.count(frame.right + 1, frame.top, 159, frame.bottom, Image::text_ink), 0) << "right of the frame";
}

TEST(WriteLinePlotPng, RejectsBadInputNamingTheFileAndWritesNothing) {
  const std::string path = temp_path("bad.png");
  absl::Status status = write_line_plot_png(path, {}, PlotOptions());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), path + ": no series to plot");

  status = write_line_plot_png(path, {{"ok", {1, 2}, {1, 2}}, {"short", {1, 2, 3}, {1, 2}}}, PlotOptions());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), path + ": series 1 \"short\" has 3 x values but 2 y values");

  // Series with no points, or only NaN and infinite ones, leave nothing to scale the axes by.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const std::vector<PlotSeries>& nothing : std::vector<std::vector<PlotSeries>>{
           {{"empty", {}, {}}}, {{"nan", {1, nan}, {nan, 2}}}, {{"empty", {}, {}}, {"inf", {inf, 1}, {1, -inf}}}}) {
    status = write_line_plot_png(path, nothing, PlotOptions());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), path + ": no series has a point with finite x and y");
  }

  status = write_line_plot_png(path, {{"huge", {-1e308, 1e308}, {0, 1}}}, PlotOptions());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(path + ": values too large to plot"));

  PlotOptions options;
  options.y_label = "return \xff";
  status = write_line_plot_png(path, {{"a", {1}, {1}}}, options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), path + ": the y label is not valid UTF-8");
  status = write_line_plot_png(path, {{"a", {1}, {1}}, {"\xc3(", {1}, {2}}}, PlotOptions());
  EXPECT_EQ(status.message(), path + ": the label of series 1 is not valid UTF-8");
  EXPECT_OK(write_line_plot_png(temp_path("utf8.png"), {{"r\xc3\xa9sultat \xe2\x86\x92", {1}, {1}}}, PlotOptions()));

  PlotOptions tiny;
  tiny.width = 159;
  status = write_line_plot_png(path, {{"a", {1}, {1}}}, tiny);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), path + ": width x height must lie within 160x120 .. 8192x8192, got 159x480");

  EXPECT_FALSE(exists(path)) << "nothing written on error";
  EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(WriteLinePlotPng, AFileThatCannotBeWrittenIsAnErrorAndLeavesNoFile) {
  absl::Status status = write_line_plot_png("/nonexistent-dir/chart.png", two_lines(), PlotOptions());
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("/nonexistent-dir/chart.png.tmp: cannot open for writing: No such file or directory"));

  // A folder in the way: the PNG is written beside it, cannot replace it, and is removed.
  const std::string folder = temp_path("a_folder.png");
  ASSERT_EQ(mkdir(folder.c_str(), 0755), 0);
  status = write_line_plot_png(folder, two_lines(), PlotOptions());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(folder + ": cannot rename " + folder + ".tmp into place"));
  EXPECT_FALSE(exists(folder + ".tmp"));

  // The disk filling up halfway (here: a 2 KB file size limit): the write fails, the half-written
  // file is removed, and the chart already there is kept.
  const std::string path = temp_path("kept.png");
  ASSERT_OK(write_line_plot_png(path, {{"before", {0, 1}, {0, 1}}}, PlotOptions()));
  const std::string before = read_file(path);
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit limited = saved;
  limited.rlim_cur = 2048;
  void (*previous)(int) = signal(SIGXFSZ, SIG_IGN);  // EFBIG from write() instead of a signal
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  status = write_line_plot_png(path, two_lines(), labelled(800, 480));
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, previous);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);  // EFBIG
  EXPECT_THAT(std::string(status.message()), HasSubstr(path + ".tmp: write failed: File too large"));
  EXPECT_FALSE(exists(path + ".tmp"));
  EXPECT_EQ(read_file(path), before);
}

}  // namespace
}  // namespace tdp::agents
