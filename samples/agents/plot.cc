#include "samples/agents/plot.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <cairo.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

namespace tdp::agents {
namespace {

struct Rgb {
  uint8_t r, g, b;
};

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kFrame{0, 0, 0};
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

constexpr double kPi = 3.14159265358979323846;

void set_color(cairo_t* cr, Rgb c) { cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

struct SurfaceDeleter {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct ContextDeleter {
  void operator()(cairo_t* cr) const { cairo_destroy(cr); }
};
using Surface = std::unique_ptr<cairo_surface_t, SurfaceDeleter>;
using Context = std::unique_ptr<cairo_t, ContextDeleter>;

// cairo's text functions put the context into an error state on malformed UTF-8 and then draw
// nothing more, so text is checked up front where the error can say which string is at fault.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = byte(i);
    size_t n;
    uint32_t code;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, code = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size() || (byte(i + k) & 0xC0) != 0x80) return false;
      code = code << 6 | (byte(i + k) & 0x3F);
    }
    constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Axis scaling: ticks at multiples of 1, 2 or 5 times a power of ten.

struct Axis {
  double lo, hi, step;
  int decimals;
  std::vector<double> ticks;
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
  if (!(axis.hi > axis.lo)) axis.hi = axis.lo + step;  // values too close for their precision
  axis.decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  // Bounded: a range far below the values' precision would otherwise add ticks that round to one.
  for (int i = 0; i <= 4 * std::max(1, target_ticks) && axis.lo + i * step <= axis.hi + step * 1e-9; ++i) {
    axis.ticks.push_back(axis.lo + i * step);
  }
  return axis;
}

std::string tick_label(double value, const Axis& axis) {
  if (std::abs(value) < axis.step * 1e-6) value = 0;  // no "-0"
  const double largest = std::max(std::abs(axis.lo), std::abs(axis.hi));
  if (largest >= 1e6 || axis.decimals > 5) return absl::StrFormat("%.3g", value);
  return absl::StrFormat("%.*f", axis.decimals, value);
}

// ---------------------------------------------------------------------------------------------
// Text through cairo's toy API: one face, sizes in pixels.

struct Font {
  double size;
  bool bold = false;
};

void use_font(cairo_t* cr, Font font) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         font.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, font.size);
}

double text_width(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  return extents.x_advance;
}

// `text`, or as much of it as fits in `max_width` followed by an ellipsis (cut between code
// points), or nothing if not even the ellipsis fits: long labels on a small chart stay inside it
// instead of running off the image or across the plot.
std::string fit_text(cairo_t* cr, const std::string& text, double max_width) {
  if (text.empty() || text_width(cr, text) <= max_width) return text;
  const std::string ellipsis = "\xE2\x80\xA6";  // U+2026
  std::vector<size_t> cuts;  // the byte offsets where a code point starts
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) cuts.push_back(i);
  }
  // The longest prefix that fits: a binary search, widths growing with the prefix.
  if (text_width(cr, ellipsis) > max_width) return "";
  // Invariant: the text up to byte cuts[lo] fits with the ellipsis, up to cuts[hi] (all of it when
  // hi == cuts.size()) does not.
  size_t lo = 0, hi = cuts.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (text_width(cr, text.substr(0, cuts[mid]) + ellipsis) <= max_width) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return text.substr(0, cuts[lo]) + ellipsis;
}

// The line height of the current font: what a row of text needs, whatever its letters.
double line_height(cairo_t* cr) {
  cairo_font_extents_t extents;
  cairo_font_extents(cr, &extents);
  return extents.ascent + extents.descent;
}

// `text` with its line box centred vertically on `cy`; `align` places `x` at its left (0), middle
// (0.5) or right (1) end.
void draw_text(cairo_t* cr, const std::string& text, double x, double cy, double align) {
  cairo_font_extents_t extents;
  cairo_font_extents(cr, &extents);
  cairo_move_to(cr, x - align * text_width(cr, text), cy + (extents.ascent - extents.descent) / 2);
  cairo_show_text(cr, text.c_str());
}

// ---------------------------------------------------------------------------------------------

struct Rect {
  double x0, y0, x1, y1;
  bool contains(double x, double y) const { return x >= x0 && x <= x1 && y >= y0 && y <= y1; }
};

using Point = std::array<double, 2>;
// A series as runs of consecutive finite points, in pixels.
using Run = std::vector<Point>;

// How much of the segment from a to b lies inside `box` (Liang-Barsky clipping).
double length_inside(const Rect& box, Point a, Point b) {
  const double dx = b[0] - a[0], dy = b[1] - a[1];
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {a[0] - box.x0, box.x1 - a[0], a[1] - box.y0, box.y1 - a[1]};
  double t0 = 0, t1 = 1;
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return 0;  // parallel to this edge and outside it
      continue;
    }
    const double t = q[i] / p[i];
    if (p[i] < 0) {
      t0 = std::max(t0, t);
    } else {
      t1 = std::min(t1, t);
    }
  }
  return t1 > t0 ? (t1 - t0) * std::hypot(dx, dy) : 0;
}

void draw_chart(cairo_t* cr, int w, int h, const std::vector<PlotSeries>& series, const PlotOptions& options,
                double x_min, double x_max, double y_min, double y_max) {
  // Sized for 640x400; smaller charts shrink the text less than the image so that it stays
  // readable, larger ones grow it with the image.
  const double s = std::clamp(std::min(w / 640.0, h / 400.0), 0.75, 4.0);
  const Font tick_font{11 * s}, label_font{12.5 * s}, title_font{15 * s, true}, legend_font{11.5 * s};
  const double pad = 10 * s, tick_length = 5 * s, gap = 4 * s;
  // Whole pixels, odd widths on pixel centres: the frame, the grid and the ticks stay crisp.
  const double frame_width = std::max(1.0, std::round(s));
  const double edge = std::fmod(frame_width, 2) == 1 ? 0.5 : 0;
  auto snap = [&](double v) { return std::floor(v) + edge; };
  const double line_width = 2 * s;

  use_font(cr, title_font);
  const double title_height = options.title.empty() ? 0 : line_height(cr) + 6 * s;
  use_font(cr, label_font);
  const double label_height = line_height(cr);
  use_font(cr, tick_font);
  const double tick_height = line_height(cr);

  // Top and bottom first: they fix the plot's height and so the y ticks, whose labels' width fixes
  // the left margin, which (with the x ticks' labels) fixes the plot's width.
  const double top = pad + title_height + tick_height / 2;
  const double bottom =
      pad + (options.x_label.empty() ? 0 : label_height + gap) + tick_height + gap + tick_length;
  const double plot_height = std::max(10.0, h - top - bottom);
  const Axis ya = nice_axis(y_min, y_max, std::clamp(int(plot_height / (3.5 * tick_height)), 2, 10));
  double y_labels_width = 0;
  for (double v : ya.ticks) y_labels_width = std::max(y_labels_width, text_width(cr, tick_label(v, ya)));
  const double left = pad + (options.y_label.empty() ? 0 : label_height + 2 * gap) + y_labels_width + gap + tick_length;
  // The most x ticks whose labels keep a gap between them (the last label hangs past the plot's
  // right edge by half its width, so room is kept for one).
  Axis xa;
  double last_x_label_width = 0;
  for (int target = 10; target >= 2; --target) {
    xa = nice_axis(x_min, x_max, target);
    double widest = 0;
    for (double v : xa.ticks) widest = std::max(widest, text_width(cr, tick_label(v, xa)));
    last_x_label_width = text_width(cr, tick_label(xa.ticks.back(), xa));
    const double plot_width = w - left - pad - last_x_label_width / 2;
    if ((widest + 3 * gap) * double(xa.ticks.size() - 1) <= plot_width) break;
  }
  const double right = pad + std::max(last_x_label_width / 2, 2 * s);

  // The plot area, frame lines included: columns x0 and x1, rows y0 and y1.
  const double x0 = std::round(left), y0 = std::round(top);
  const double x1 = std::max(x0 + 10, std::round(w - right) - 1), y1 = std::max(y0 + 10, std::round(h - bottom) - 1);
  // Data to pixels: the first and last ticks land on the middle of the frame's lines.
  const double half = frame_width / 2;
  auto px = [&](double x) { return x0 + half + (x - xa.lo) / (xa.hi - xa.lo) * (x1 + 1 - frame_width - x0); };
  auto py = [&](double y) { return y1 + 1 - half - (y - ya.lo) / (ya.hi - ya.lo) * (y1 + 1 - frame_width - y0); };

  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  cairo_set_line_width(cr, frame_width);
  set_color(cr, kGrid);
  for (double v : xa.ticks) cairo_move_to(cr, snap(px(v)), y0), cairo_line_to(cr, snap(px(v)), y1 + 1);
  for (double v : ya.ticks) cairo_move_to(cr, x0, snap(py(v))), cairo_line_to(cr, x1 + 1, snap(py(v)));
  cairo_stroke(cr);

  // Ticks, and the frame: `frame_width` pixels wide from columns x0 and x1 and rows y0 and y1
  // inward.
  set_color(cr, kFrame);
  cairo_set_line_width(cr, frame_width);
  for (double v : xa.ticks) {
    cairo_move_to(cr, snap(px(v)), y1 + 1), cairo_line_to(cr, snap(px(v)), y1 + 1 + std::round(tick_length));
  }
  for (double v : ya.ticks) {
    cairo_move_to(cr, x0, snap(py(v))), cairo_line_to(cr, x0 - std::round(tick_length), snap(py(v)));
  }
  cairo_rectangle(cr, x0 + half, y0 + half, x1 + 1 - x0 - frame_width, y1 + 1 - y0 - frame_width);
  cairo_stroke(cr);

  // Series over the frame, clipped to its outer edge: a curve along an axis limit (CartPole's
  // solved return of 500 is the top tick) shows whole instead of half hidden under the frame.
  std::vector<std::vector<Run>> runs(series.size());
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& line = series[i];
    bool in_run = false;
    for (size_t k = 0; k < line.x.size(); ++k) {
      if (!std::isfinite(line.x[k]) || !std::isfinite(line.y[k])) {
        in_run = false;
        continue;
      }
      if (!in_run) runs[i].emplace_back();
      runs[i].back().push_back({px(line.x[k]), py(line.y[k])});
      in_run = true;
    }
  }
  cairo_save(cr);
  cairo_rectangle(cr, x0, y0, x1 + 1 - x0, y1 + 1 - y0);
  cairo_clip(cr);
  cairo_set_line_width(cr, line_width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  for (size_t i = 0; i < series.size(); ++i) {
    set_color(cr, kPalette[i % kPalette.size()]);
    for (const Run& run : runs[i]) {
      if (run.size() == 1) continue;
      cairo_move_to(cr, run[0][0], run[0][1]);
      for (size_t k = 1; k < run.size(); ++k) cairo_line_to(cr, run[k][0], run[k][1]);
    }
    cairo_stroke(cr);
    for (const Run& run : runs[i]) {  // an isolated point: a dot, or it would not show
      if (run.size() != 1) continue;
      cairo_new_sub_path(cr);
      cairo_arc(cr, run[0][0], run[0][1], 1.5 * line_width, 0, 2 * kPi);
    }
    cairo_fill(cr);
  }
  cairo_restore(cr);

  // Tick labels, title and axis labels.
  set_color(cr, kText);
  use_font(cr, tick_font);
  for (double v : xa.ticks) {
    draw_text(cr, tick_label(v, xa), px(v), y1 + 1 + tick_length + gap + tick_height / 2, 0.5);
  }
  for (double v : ya.ticks) draw_text(cr, tick_label(v, ya), x0 - tick_length - gap, py(v), 1);
  const double plot_middle_x = (x0 + x1 + 1) / 2, plot_middle_y = (y0 + y1 + 1) / 2;
  // Centred on the plot, within the image's padding.
  const double title_room = 2 * std::min(plot_middle_x - pad, w - pad - plot_middle_x);
  if (!options.title.empty()) {
    use_font(cr, title_font);
    draw_text(cr, fit_text(cr, options.title, title_room), plot_middle_x, pad + (title_height - 6 * s) / 2, 0.5);
  }
  use_font(cr, label_font);
  if (!options.x_label.empty()) {
    draw_text(cr, fit_text(cr, options.x_label, title_room), plot_middle_x, h - pad - label_height / 2, 0.5);
  }
  if (!options.y_label.empty()) {
    const double room = 2 * std::min(plot_middle_y - pad, h - pad - plot_middle_y);
    const std::string y_label = fit_text(cr, options.y_label, room);
    cairo_save(cr);
    cairo_translate(cr, pad + label_height / 2, plot_middle_y);
    cairo_rotate(cr, -kPi / 2);  // reads upward
    draw_text(cr, y_label, 0, 0, 0.5);
    cairo_restore(cr);
  }

  // Legend: the labelled series, in the corner where the least length of line runs under it (a dot
  // counts as its width). Labels too long for the
  // plot are shortened; rows too many for its height leave the legend out rather than cover it.
  std::vector<size_t> listed;
  for (size_t i = 0; i < series.size(); ++i) {
    if (!series[i].label.empty()) listed.push_back(i);
  }
  if (listed.empty()) return;
  use_font(cr, legend_font);
  const double row = 1.5 * legend_font.size, inset = 6 * s, swatch = 24 * s, margin = 8 * s;
  const double label_room = x1 - x0 - 2 * margin - (2 * inset + swatch + gap * 1.5) - 2;
  std::vector<std::string> labels;
  double widest = 0;
  for (size_t i : listed) {
    labels.push_back(fit_text(cr, series[i].label, label_room));
    widest = std::max(widest, text_width(cr, labels.back()));
  }
  const double box_width = std::round(inset + swatch + gap * 1.5 + widest + inset);
  const double box_height = std::round(2 * inset + row * listed.size() - (row - line_height(cr)));
  if (box_height > y1 - y0 - 2 * margin - 2) return;
  const double lx0 = x0 + 1 + margin, lx1 = x1 - margin - box_width;
  const double ly0 = y0 + 1 + margin, ly1 = y1 - margin - box_height;
  // Upper right first, as matplotlib's "best" does; ties keep the earlier corner.
  const std::array<Point, 4> corners = {{{lx1, ly0}, {lx0, ly0}, {lx1, ly1}, {lx0, ly1}}};
  size_t best = 0;
  double least = std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < corners.size(); ++c) {
    const Rect box{corners[c][0], corners[c][1], corners[c][0] + box_width, corners[c][1] + box_height};
    double covered = 0;
    for (const std::vector<Run>& series_runs : runs) {
      for (const Run& run : series_runs) {
        if (run.size() == 1 && box.contains(run[0][0], run[0][1])) covered += 3 * line_width;
        for (size_t k = 1; k < run.size(); ++k) covered += length_inside(box, run[k - 1], run[k]);
      }
    }
    if (covered < least) best = c, least = covered;
  }
  const double bx = corners[best][0], by = corners[best][1];
  cairo_rectangle(cr, bx + 0.5, by + 0.5, box_width, box_height);
  set_color(cr, kWhite);
  cairo_fill_preserve(cr);
  set_color(cr, kLegendBorder);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  for (size_t r = 0; r < listed.size(); ++r) {
    const double cy = by + inset + row * r + line_height(cr) / 2;
    set_color(cr, kPalette[listed[r] % kPalette.size()]);
    cairo_set_line_width(cr, line_width);
    cairo_move_to(cr, bx + inset, cy), cairo_line_to(cr, bx + inset + swatch, cy);
    cairo_stroke(cr);
    set_color(cr, kText);
    draw_text(cr, labels[r], bx + inset + swatch + gap * 1.5, cy, 0);
  }
}

// cairo's PNG writer hands the encoded bytes here; the first OS error is kept for the message.
struct FileSink {
  int fd;
  int error = 0;
};

cairo_status_t write_to_file(void* closure, const unsigned char* data, unsigned int length) {
  auto* sink = static_cast<FileSink*>(closure);
  while (length > 0) {
    const ssize_t written = ::write(sink->fd, data, length);
    if (written < 0) {
      if (errno == EINTR) continue;
      sink->error = errno;
      return CAIRO_STATUS_WRITE_ERROR;
    }
    data += written, length -= static_cast<unsigned int>(written);
  }
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

absl::Status write_line_plot_png(const std::string& path, const std::vector<PlotSeries>& series,
                                 const PlotOptions& options) {
  if (series.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no series to plot"));
  if (options.width < 160 || options.height < 120 || options.width > 8192 || options.height > 8192) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": width x height must lie within 160x120 .. 8192x8192, got ",
                                                   options.width, "x", options.height));
  }
  const std::pair<const char*, const std::string*> texts[] = {
      {"the title", &options.title}, {"the x label", &options.x_label}, {"the y label", &options.y_label}};
  for (const auto& [what, text] : texts) {
    if (!valid_utf8(*text)) return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, " is not valid UTF-8"));
  }
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min, y_max = -x_min;
  for (size_t s = 0; s < series.size(); ++s) {
    const PlotSeries& line = series[s];
    if (line.x.size() != line.y.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": series ", s, " \"", line.label, "\" has ",
                                                     line.x.size(), " x values but ", line.y.size(), " y values"));
    }
    if (!valid_utf8(line.label)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": the label of series ", s, " is not valid UTF-8"));
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
  // The axes divide the range and round it out to whole ticks (up to doubling it): a range that
  // overflows there would put every point at NaN.
  if (!std::isfinite(x_max - x_min) || !std::isfinite(y_max - y_min) || !std::isfinite(2 * x_max) ||
      !std::isfinite(2 * x_min) || !std::isfinite(2 * y_max) || !std::isfinite(2 * y_min)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": values too large to plot (x from ", x_min, " to ", x_max, ", y from ", y_min, " to ",
                     y_max, ")"));
  }

  // RGB24: an opaque chart, which cairo's writer stores as an 8-bit RGB PNG (no alpha channel).
  Surface surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, options.width, options.height));
  Context cr(cairo_create(surface.get()));
  set_color(cr.get(), kWhite);
  cairo_paint(cr.get());
  draw_chart(cr.get(), options.width, options.height, series, options, x_min, x_max, y_min, y_max);
  if (cairo_status_t status = cairo_status(cr.get()); status != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat(path, ": cairo could not draw the chart: ", cairo_status_to_string(status)));
  }
  cairo_surface_flush(surface.get());

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot open for writing"));
  FileSink sink{fd};
  const cairo_status_t written = cairo_surface_write_to_png_stream(surface.get(), write_to_file, &sink);
  // close() reports what a file system defers (NFS, quotas), so it counts as part of the write.
  const int close_error = ::close(fd) == 0 ? 0 : errno;
  if (written != CAIRO_STATUS_SUCCESS || close_error != 0) {
    ::unlink(tmp.c_str());
    if (sink.error != 0 || close_error != 0) {
      return absl::ErrnoToStatus(sink.error != 0 ? sink.error : close_error, absl::StrCat(tmp, ": write failed"));
    }
    return absl::InternalError(absl::StrCat(tmp, ": cairo could not write the PNG: ", cairo_status_to_string(written)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": cannot rename ", tmp, " into place"));
  }
  return absl::OkStatus();
}

}  // namespace tdp::agents
