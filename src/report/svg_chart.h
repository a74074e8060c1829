// Pieces of a self-contained HTML page: escaping of every string put into it, and line charts as
// inline SVG (axes with round-number ticks, one polyline per series, a legend), so the page needs
// no script, font or file from anywhere else.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nemotron::report {

// Text or attribute value -> HTML: & < > " ' become entities.
std::string html_escape(std::string_view s);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending; non-finite y are skipped
};

// Ticks at round numbers (1, 2 or 5 x 10^k apart) covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// An SVG line chart (width x height px) of the series against x; a series of one point, or of few
// points, is drawn with dots. Series longer than 2000 points are drawn as the min and max of 1000
// buckets, so a long run keeps its spikes and the page stays small. Empty when no series has a
// finite point.
std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series,
                           int width = 460, int height = 260);

}  // namespace nemotron::report
