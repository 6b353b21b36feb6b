// write_line_plot_png: draws line series (learning curves, episode returns) into a PNG chart
// with a frame, a light grid, 1-2-5 ticks and their labels, a title, axis labels and a legend.
// Drawn with cairo: anti-aliased lines, text in the system's sans font (DejaVu Sans on Debian,
// through fontconfig), and cairo's own PNG writer.
//
//   tdp::agents::PlotSeries returns{"mean return", {0, 1, 2}, {9.4, 31.0, 180.2}};
//   tdp::agents::PlotOptions options;
//   options.title = "PPO on CartPole";
//   options.x_label = "iteration"; options.y_label = "return";
//   absl::Status written = tdp::agents::write_line_plot_png("returns.png", {returns}, options);
//
// The axes span the finite points rounded out to whole ticks. Points where x or y is not finite
// are skipped, breaking the line there; a point with no finite neighbour is drawn as a dot. Series
// take matplotlib's "tab10" colours in order. The legend lists the series that have a label, in
// the corner of the plot that their lines cross least (left out if its rows do not fit the
// plot's height). Text and lines are sized for 640x400 and scale with the image, from 3/4 up to
// 4 times; text too long for the chart is shortened with an ellipsis. The file appears whole or
// not at all: it is written to `path` + ".tmp" and renamed into place, and the temporary file is
// removed if anything fails.
#pragma once

#include <absl/status/status.h>

#include <string>
#include <vector>

namespace tdp::agents {

struct PlotSeries {
  std::string label;  // UTF-8; empty: left out of the legend
  std::vector<double> x, y;
};

struct PlotOptions {
  std::string title, x_label, y_label;  // UTF-8; empty: not drawn, and no room kept for them
  int width = 800;
  int height = 480;
};

// InvalidArgument for no series, a series whose x and y differ in length, no finite point at
// all (every series empty or NaN), finite values too far apart to scale (their difference
// overflows), text that is not valid UTF-8, or a size below 160x120 (or above 8192x8192); the
// error names the file and, where one is at fault, the series. A file that cannot be created or
// written gives the OS's reason with the file name.
absl::Status write_line_plot_png(const std::string& path, const std::vector<PlotSeries>& series,
                                 const PlotOptions& options);

}  // namespace tdp::agents
