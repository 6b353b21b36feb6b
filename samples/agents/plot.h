// write_line_plot_png: draws line series (learning curves, episode returns) into a PNG chart
// with axes, 1-2-5 ticks, a title, axis labels and a legend. Rasterized here (with a built-in
// 5x7 font) and compressed with zlib: no image library or plotting tool needed.
//
//   tdp::agents::PlotSeries returns{"mean return", {0, 1, 2}, {9.4, 31.0, 180.2}};
//   tdp::agents::PlotOptions options;
//   options.title = "PPO on CartPole";
//   options.x_label = "iteration"; options.y_label = "return";
//   absl::Status written = tdp::agents::write_line_plot_png("returns.png", {returns}, options);
//
// Points where x or y is not finite are skipped, breaking the line there. The file appears
// whole or not at all: it is written next to `path` and renamed into place.
#pragma once

#include <absl/status/status.h>

#include <string>
#include <vector>

namespace tdp::agents {

struct PlotSeries {
  std::string label;
  std::vector<double> x, y;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  int width = 800;
  int height = 480;
};

// InvalidArgument for no series, a series whose x and y differ in length, no finite point at
// all, or a size below 160x120 (or above 8192x8192); the error names the file and the series.
// An unwritable path gives the OS's reason with the file name.
absl::Status write_line_plot_png(const std::string& path, const std::vector<PlotSeries>& series,
                                 const PlotOptions& options);

}  // namespace tdp::agents
