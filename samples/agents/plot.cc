#include "samples/agents/plot.h"

#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

namespace tdp::agents {
namespace {

// ---------------------------------------------------------------------------------------------
// A 5x7 bitmap font for ASCII 32..126: five columns per glyph, bit 0 the top row.

constexpr int kGlyphWidth = 5;
constexpr int kGlyphHeight = 7;
constexpr int kGlyphAdvance = 6;  // one blank column between glyphs

constexpr uint8_t kFont[95][5] = {
    {0x00, 0x00, 0x00, 0x00, 0x00}, {0x00, 0x00, 0x5F, 0x00, 0x00}, {0x00, 0x07, 0x00, 0x07, 0x00},
    {0x14, 0x7F, 0x14, 0x7F, 0x14}, {0x24, 0x2A, 0x7F, 0x2A, 0x12}, {0x23, 0x13, 0x08, 0x64, 0x62},
    {0x36, 0x49, 0x55, 0x22, 0x50}, {0x00, 0x05, 0x03, 0x00, 0x00}, {0x00, 0x1C, 0x22, 0x41, 0x00},
    {0x00, 0x41, 0x22, 0x1C, 0x00}, {0x14, 0x08, 0x3E, 0x08, 0x14}, {0x08, 0x08, 0x3E, 0x08, 0x08},
    {0x00, 0x50, 0x30, 0x00, 0x00}, {0x08, 0x08, 0x08, 0x08, 0x08}, {0x00, 0x60, 0x60, 0x00, 0x00},
    {0x20, 0x10, 0x08, 0x04, 0x02},
    // 0-9
    {0x3E, 0x51, 0x49, 0x45, 0x3E}, {0x00, 0x42, 0x7F, 0x40, 0x00}, {0x42, 0x61, 0x51, 0x49, 0x46},
    {0x21, 0x41, 0x45, 0x4B, 0x31}, {0x18, 0x14, 0x12, 0x7F, 0x10}, {0x27, 0x45, 0x45, 0x45, 0x39},
    {0x3C, 0x4A, 0x49, 0x49, 0x30}, {0x01, 0x71, 0x09, 0x05, 0x03}, {0x36, 0x49, 0x49, 0x49, 0x36},
    {0x06, 0x49, 0x49, 0x29, 0x1E},
    // : ; < = > ? @
    {0x00, 0x36, 0x36, 0x00, 0x00}, {0x00, 0x56, 0x36, 0x00, 0x00}, {0x08, 0x14, 0x22, 0x41, 0x00},
    {0x14, 0x14, 0x14, 0x14, 0x14}, {0x00, 0x41, 0x22, 0x14, 0x08}, {0x02, 0x01, 0x51, 0x09, 0x06},
    {0x32, 0x49, 0x79, 0x41, 0x3E},
    // A-Z
    {0x7E, 0x11, 0x11, 0x11, 0x7E}, {0x7F, 0x49, 0x49, 0x49, 0x36}, {0x3E, 0x41, 0x41, 0x41, 0x22},
    {0x7F, 0x41, 0x41, 0x22, 0x1C}, {0x7F, 0x49, 0x49, 0x49, 0x41}, {0x7F, 0x09, 0x09, 0x09, 0x01},
    {0x3E, 0x41, 0x49, 0x49, 0x7A}, {0x7F, 0x08, 0x08, 0x08, 0x7F}, {0x00, 0x41, 0x7F, 0x41, 0x00},
    {0x20, 0x40, 0x41, 0x3F, 0x01}, {0x7F, 0x08, 0x14, 0x22, 0x41}, {0x7F, 0x40, 0x40, 0x40, 0x40},
    {0x7F, 0x02, 0x0C, 0x02, 0x7F}, {0x7F, 0x04, 0x08, 0x10, 0x7F}, {0x3E, 0x41, 0x41, 0x41, 0x3E},
    {0x7F, 0x09, 0x09, 0x09, 0x06}, {0x3E, 0x41, 0x51, 0x21, 0x5E}, {0x7F, 0x09, 0x19, 0x29, 0x46},
    {0x46, 0x49, 0x49, 0x49, 0x31}, {0x01, 0x01, 0x7F, 0x01, 0x01}, {0x3F, 0x40, 0x40, 0x40, 0x3F},
    {0x1F, 0x20, 0x40, 0x20, 0x1F}, {0x3F, 0x40, 0x38, 0x40, 0x3F}, {0x63, 0x14, 0x08, 0x14, 0x63},
    {0x07, 0x08, 0x70, 0x08, 0x07}, {0x61, 0x51, 0x49, 0x45, 0x43},
    // [ \ ] ^ _ `
    {0x00, 0x7F, 0x41, 0x41, 0x00}, {0x02, 0x04, 0x08, 0x10, 0x20}, {0x00, 0x41, 0x41, 0x7F, 0x00},
    {0x04, 0x02, 0x01, 0x02, 0x04}, {0x40, 0x40, 0x40, 0x40, 0x40}, {0x00, 0x01, 0x02, 0x04, 0x00},
    // a-z
    {0x20, 0x54, 0x54, 0x54, 0x78}, {0x7F, 0x48, 0x44, 0x44, 0x38}, {0x38, 0x44, 0x44, 0x44, 0x20},
    {0x38, 0x44, 0x44, 0x48, 0x7F}, {0x38, 0x54, 0x54, 0x54, 0x18}, {0x08, 0x7E, 0x09, 0x01, 0x02},
    {0x0C, 0x52, 0x52, 0x52, 0x3E}, {0x7F, 0x08, 0x04, 0x04, 0x78}, {0x00, 0x44, 0x7D, 0x40, 0x00},
    {0x20, 0x40, 0x44, 0x3D, 0x00}, {0x7F, 0x10, 0x28, 0x44, 0x00}, {0x00, 0x41, 0x7F, 0x40, 0x00},
    {0x7C, 0x04, 0x18, 0x04, 0x78}, {0x7C, 0x08, 0x04, 0x04, 0x78}, {0x38, 0x44, 0x44, 0x44, 0x38},
    {0x7C, 0x14, 0x14, 0x14, 0x08}, {0x08, 0x14, 0x14, 0x18, 0x7C}, {0x7C, 0x08, 0x04, 0x04, 0x08},
    {0x48, 0x54, 0x54, 0x54, 0x20}, {0x04, 0x3F, 0x44, 0x40, 0x20}, {0x3C, 0x40, 0x40, 0x20, 0x7C},
    {0x1C, 0x20, 0x40, 0x20, 0x1C}, {0x3C, 0x40, 0x30, 0x40, 0x3C}, {0x44, 0x28, 0x10, 0x28, 0x44},
    {0x0C, 0x50, 0x50, 0x50, 0x3C}, {0x44, 0x64, 0x54, 0x4C, 0x44},
    // { | } ~
    {0x00, 0x08, 0x36, 0x41, 0x00}, {0x00, 0x00, 0x7F, 0x00, 0x00}, {0x00, 0x41, 0x36, 0x08, 0x00},
    {0x08, 0x04, 0x08, 0x10, 0x08},
};

struct Rgb {
  uint8_t r, g, b;
};

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kBlack{0, 0, 0};
constexpr Rgb kGrid{225, 225, 225};
constexpr Rgb kText{40, 40, 40};
constexpr Rgb kLegendBorder{170, 170, 170};
// Matplotlib's "tab10": distinct, and distinguishable by most colour-blind readers.
constexpr std::array<Rgb, 10> kPalette = {{{31, 119, 180},
                                           {255, 127, 14},
                                           {44, 160, 44},
                                           {214, 39, 40},
                                           {148, 103, 189},
                                           {140, 86, 75},
                                           {227, 119, 194},
                                           {127, 127, 127},
                                           {188, 189, 34},
                                           {23, 190, 207}}};

struct Rect {
  int x0, y0, x1, y1;  // inclusive
  bool contains(int x, int y) const { return x >= x0 && x <= x1 && y >= y0 && y <= y1; }
};

class Canvas {
 public:
  Canvas(int width, int height) : width_(width), height_(height), rgb_(size_t(width) * height * 3, 255) {}

  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& rgb() const { return rgb_; }

  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_ || !clip_.contains(x, y)) return;
    uint8_t* p = &rgb_[(size_t(y) * width_ + x) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void fill(const Rect& r, Rgb c) {
    for (int y = r.y0; y <= r.y1; ++y)
      for (int x = r.x0; x <= r.x1; ++x) set(x, y, c);
  }
  void outline(const Rect& r, Rgb c) {
    for (int x = r.x0; x <= r.x1; ++x) set(x, r.y0, c), set(x, r.y1, c);
    for (int y = r.y0; y <= r.y1; ++y) set(r.x0, y, c), set(r.x1, y, c);
  }
  // Bresenham; `thick` stamps a 2x2 pen so curves stay visible against the grid.
  void line(int x0, int y0, int x1, int y1, Rgb c, bool thick) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    while (true) {
      set(x0, y0, c);
      if (thick) set(x0 + 1, y0, c), set(x0, y0 + 1, c), set(x0 + 1, y0 + 1, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  // Text with its top-left corner at (x, y), each font pixel a scale x scale square. `vertical`
  // turns it 90 degrees counter-clockwise (reading upward), with (x, y) the bottom-left corner.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1, bool vertical = false) {
    int pen = 0;
    for (char ch : s) {
      const int code = static_cast<unsigned char>(ch);
      const uint8_t* glyph = kFont[(code >= 32 && code <= 126 ? code : '?') - 32];
      for (int col = 0; col < kGlyphWidth; ++col) {
        for (int row = 0; row < kGlyphHeight; ++row) {
          if (!(glyph[col] >> row & 1)) continue;
          for (int i = 0; i < scale; ++i) {
            for (int j = 0; j < scale; ++j) {
              const int u = pen + col * scale + i, v = row * scale + j;
              if (vertical) {
                set(x + v, y - u, c);
              } else {
                set(x + u, y + v, c);
              }
            }
          }
        }
      }
      pen += kGlyphAdvance * scale;
    }
  }
  static int text_width(const std::string& s, int scale = 1) {
    return s.empty() ? 0 : (int(s.size()) * kGlyphAdvance - 1) * scale;
  }
  void set_clip(const Rect& r) { clip_ = r; }
  void clear_clip() { clip_ = Rect{0, 0, width_ - 1, height_ - 1}; }

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
  Rect clip_{0, 0, width_ - 1, height_ - 1};
};

// ---------------------------------------------------------------------------------------------
// Axis scaling: ticks at multiples of 1, 2 or 5 times a power of ten.

struct Axis {
  double lo, hi, step;
  int decimals;
};

Axis nice_axis(double lo, double hi, int target_ticks) {
  if (!(hi > lo)) {  // one value: centre it in a unit-wide (or 10%-wide) range
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target_ticks);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  Axis axis;
  axis.step = step;
  axis.lo = std::floor(lo / step + 1e-9) * step;
  axis.hi = std::ceil(hi / step - 1e-9) * step;
  axis.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  return axis;
}

std::string tick_label(double value, const Axis& axis) {
  if (std::abs(value) < axis.step * 1e-6) value = 0;  // no "-0"
  const double largest = std::max(std::abs(axis.lo), std::abs(axis.hi));
  if (largest >= 1e6 || axis.decimals > 5) return absl::StrFormat("%.3g", value);
  return absl::StrFormat("%.*f", axis.decimals, value);
}

// ---------------------------------------------------------------------------------------------
// PNG: signature, IHDR, one IDAT holding the zlib stream of the scanlines, IEND.

void put_u32_be(std::string& out, uint32_t v) {
  out.push_back(char(v >> 24)), out.push_back(char(v >> 16)), out.push_back(char(v >> 8)), out.push_back(char(v));
}

void put_chunk(std::string& out, const char type[4], const std::string& data) {
  put_u32_be(out, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  out += body;
  // PNG's chunk checksum is zlib's CRC-32 over the type and the data.
  put_u32_be(out, static_cast<uint32_t>(::crc32(0L, reinterpret_cast<const Bytef*>(body.data()), body.size())));
}

absl::StatusOr<std::string> encode_png(const Canvas& canvas) {
  const int w = canvas.width(), h = canvas.height();
  // Scanlines, each led by filter type 0 (none).
  std::vector<uint8_t> raw;
  raw.reserve(size_t(h) * (1 + size_t(w) * 3));
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);
    const uint8_t* row = &canvas.rgb()[size_t(y) * w * 3];
    raw.insert(raw.end(), row, row + size_t(w) * 3);
  }
  // zlib's deflate: a chart is mostly runs of one colour, so ~1 MB of scanlines becomes a few
  // tens of KB (the curves are committed next to the README).
  uLongf packed_size = compressBound(raw.size());
  std::string zlib(packed_size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(zlib.data()), &packed_size, raw.data(), raw.size(),
                Z_BEST_COMPRESSION) != Z_OK) {
    return absl::InternalError("zlib could not compress the image");
  }
  zlib.resize(packed_size);

  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put_u32_be(ihdr, w), put_u32_be(ihdr, h);
  ihdr += {char(8), char(2), char(0), char(0), char(0)};  // 8-bit RGB, deflate, no filter choice, no interlace
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", zlib);
  put_chunk(png, "IEND", "");
  return png;
}

// ---------------------------------------------------------------------------------------------

void draw_chart(Canvas& canvas, const std::vector<PlotSeries>& series, const PlotOptions& options,
                double x_min, double x_max, double y_min, double y_max) {
  const int w = canvas.width(), h = canvas.height();
  const Axis xa = nice_axis(x_min, x_max, std::max(2, (w - 120) / 90));
  const Axis ya = nice_axis(y_min, y_max, std::max(2, (h - 100) / 60));
  std::vector<double> y_ticks, x_ticks;
  for (int i = 0; xa.lo + i * xa.step <= xa.hi + xa.step * 1e-9; ++i) x_ticks.push_back(xa.lo + i * xa.step);
  for (int i = 0; ya.lo + i * ya.step <= ya.hi + ya.step * 1e-9; ++i) y_ticks.push_back(ya.lo + i * ya.step);
  int y_label_width = 0;
  for (double v : y_ticks) y_label_width = std::max(y_label_width, Canvas::text_width(tick_label(v, ya)));

  const int title_scale = 2;
  const int top = options.title.empty() ? 16 : 16 + kGlyphHeight * title_scale + 12;
  const int left = 12 + (options.y_label.empty() ? 0 : kGlyphHeight + 10) + y_label_width + 10;
  const int bottom = 10 + kGlyphHeight + 8 + (options.x_label.empty() ? 0 : kGlyphHeight + 10) + 8;
  const int right = 20 + Canvas::text_width(tick_label(x_ticks.back(), xa)) / 2;
  const Rect plot{left, top, w - 1 - right, h - 1 - bottom};

  auto px = [&](double x) { return plot.x0 + int(std::lround((x - xa.lo) / (xa.hi - xa.lo) * (plot.x1 - plot.x0))); };
  auto py = [&](double y) { return plot.y1 - int(std::lround((y - ya.lo) / (ya.hi - ya.lo) * (plot.y1 - plot.y0))); };

  // Grid, then ticks and their labels.
  for (double v : x_ticks) {
    const int x = px(v);
    canvas.line(x, plot.y0, x, plot.y1, kGrid, false);
    canvas.line(x, plot.y1, x, plot.y1 + 4, kBlack, false);
    const std::string label = tick_label(v, xa);
    canvas.text(x - Canvas::text_width(label) / 2, plot.y1 + 8, label, kText);
  }
  for (double v : y_ticks) {
    const int y = py(v);
    canvas.line(plot.x0, y, plot.x1, y, kGrid, false);
    canvas.line(plot.x0 - 4, y, plot.x0, y, kBlack, false);
    const std::string label = tick_label(v, ya);
    canvas.text(plot.x0 - 8 - Canvas::text_width(label), y - kGlyphHeight / 2, label, kText);
  }
  canvas.outline(plot, kBlack);

  if (!options.title.empty()) {
    const int tw = Canvas::text_width(options.title, title_scale);
    canvas.text((plot.x0 + plot.x1) / 2 - tw / 2, 14, options.title, kBlack, title_scale);
  }
  if (!options.x_label.empty()) {
    canvas.text((plot.x0 + plot.x1) / 2 - Canvas::text_width(options.x_label) / 2,
                plot.y1 + 8 + kGlyphHeight + 10, options.x_label, kBlack);
  }
  if (!options.y_label.empty()) {
    canvas.text(12, (plot.y0 + plot.y1) / 2 + Canvas::text_width(options.y_label) / 2, options.y_label, kBlack,
                1, /*vertical=*/true);
  }

  // Series, clipped to the plot's inside so the frame stays crisp.
  canvas.set_clip(Rect{plot.x0 + 1, plot.y0 + 1, plot.x1 - 1, plot.y1 - 1});
  for (size_t s = 0; s < series.size(); ++s) {
    const Rgb color = kPalette[s % kPalette.size()];
    const PlotSeries& line = series[s];
    bool have_previous = false;
    int prev_x = 0, prev_y = 0;
    for (size_t i = 0; i < line.x.size(); ++i) {
      if (!std::isfinite(line.x[i]) || !std::isfinite(line.y[i])) {
        have_previous = false;
        continue;
      }
      const int x = px(line.x[i]), y = py(line.y[i]);
      const bool next_finite =
          i + 1 < line.x.size() && std::isfinite(line.x[i + 1]) && std::isfinite(line.y[i + 1]);
      if (have_previous) {
        canvas.line(prev_x, prev_y, x, y, color, true);
      } else if (!next_finite) {  // an isolated point: a small square, or it would not show
        canvas.fill(Rect{x - 2, y - 2, x + 2, y + 2}, color);
      }
      have_previous = true, prev_x = x, prev_y = y;
    }
  }
  canvas.clear_clip();

  // Legend in the top-right corner of the plot.
  bool any_label = false;
  int label_width = 0;
  for (const PlotSeries& line : series) {
    any_label |= !line.label.empty();
    label_width = std::max(label_width, Canvas::text_width(line.label));
  }
  if (!any_label) return;
  constexpr int kRow = 14, kSwatch = 20, kPad = 6;
  const Rect box{plot.x1 - 10 - (kPad + kSwatch + 6 + label_width + kPad), plot.y0 + 10, plot.x1 - 10,
                 plot.y0 + 10 + kPad * 2 + kRow * int(series.size()) - (kRow - kGlyphHeight)};
  canvas.fill(box, kWhite);
  canvas.outline(box, kLegendBorder);
  for (size_t s = 0; s < series.size(); ++s) {
    const int y = box.y0 + kPad + int(s) * kRow;
    const int mid = y + kGlyphHeight / 2;
    canvas.line(box.x0 + kPad, mid, box.x0 + kPad + kSwatch, mid, kPalette[s % kPalette.size()], true);
    canvas.text(box.x0 + kPad + kSwatch + 6, y, series[s].label, kText);
  }
}

}  // namespace

absl::Status write_line_plot_png(const std::string& path, const std::vector<PlotSeries>& series,
                                 const PlotOptions& options) {
  if (series.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no series to plot"));
  if (options.width < 160 || options.height < 120 || options.width > 8192 || options.height > 8192) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": width x height must lie within 160x120 .. 8192x8192, got ",
                                                   options.width, "x", options.height));
  }
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min, y_max = -x_min;
  for (size_t s = 0; s < series.size(); ++s) {
    const PlotSeries& line = series[s];
    if (line.x.size() != line.y.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": series ", s, " \"", line.label, "\" has ",
                                                     line.x.size(), " x values but ", line.y.size(), " y values"));
    }
    for (size_t i = 0; i < line.x.size(); ++i) {
      if (!std::isfinite(line.x[i]) || !std::isfinite(line.y[i])) continue;
      x_min = std::min(x_min, line.x[i]), x_max = std::max(x_max, line.x[i]);
      y_min = std::min(y_min, line.y[i]), y_max = std::max(y_max, line.y[i]);
    }
  }
  if (!(x_min <= x_max)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no series has a point with finite x and y"));
  }

  Canvas canvas(options.width, options.height);
  draw_chart(canvas, series, options, x_min, x_max, y_min, y_max);
  const absl::StatusOr<std::string> png = encode_png(canvas);
  if (!png.ok()) return absl::Status(png.status().code(), absl::StrCat(path, ": ", png.status().message()));

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot open for writing"));
    out.write(png->data(), static_cast<std::streamsize>(png->size()));
    out.close();
    if (!out) {
      const int error = errno;
      std::remove(tmp.c_str());
      return absl::ErrnoToStatus(error, absl::StrCat(tmp, ": write failed"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot rename ", tmp, " into place"));
  }
  return absl::OkStatus();
}

}  // namespace tdp::agents
