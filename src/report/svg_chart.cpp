#include "report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace nemotron::report {

namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

// As many significant digits as tell ticks `step` apart; exponent form for tiny or huge values.
std::string tick_label(double v, double step) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  const int digits = std::clamp(static_cast<int>(std::ceil(std::log10(a / step))) + 1, 1, 10);
  if (a < 1e6 && step >= 1 && std::round(v) == v) return fmt::format("{:.0f}", v);  // 2000, not 2e+03
  if (a >= 1e-3 && a < 1e6) return fmt::format("{:.{}g}", v, digits);
  std::string s = fmt::format("{:.{}e}", v, digits - 1);  // 1.0050e-04 -> 1.005e-04
  const size_t e = s.find('e');
  size_t end = e;
  while (end > 0 && s[end - 1] == '0') --end;
  if (end > 0 && s[end - 1] == '.') --end;
  return s.substr(0, end) + s.substr(e);
}

double tick_step(const std::vector<double>& ticks) { return ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0; }

// min/max per bucket: keeps a long series' extremes with a bounded number of points.
std::vector<std::pair<double, double>> thin(const std::vector<std::pair<double, double>>& p) {
  constexpr size_t kMax = 2000, kBuckets = 1000;
  if (p.size() <= kMax) return p;
  std::vector<std::pair<double, double>> out;
  for (size_t b = 0; b < kBuckets; ++b) {
    const size_t lo = p.size() * b / kBuckets, hi = p.size() * (b + 1) / kBuckets;
    if (lo >= hi) continue;
    size_t imin = lo, imax = lo;
    for (size_t i = lo; i < hi; ++i) {
      if (p[i].second < p[imin].second) imin = i;
      if (p[i].second > p[imax].second) imax = i;
    }
    out.push_back(p[std::min(imin, imax)]);
    if (imin != imax) out.push_back(p[std::max(imin, imax)]);
  }
  return out;
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return ticks;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10;
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series,
                           int width, int height) {
  std::vector<Series> finite;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const Series& s : series) {
    Series f{s.name, {}};
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) f.points.emplace_back(x, y);
    if (f.points.empty()) continue;
    for (const auto& [x, y] : f.points) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    finite.push_back(std::move(f));
  }
  if (finite.empty()) return "";
  if (x1 == x0) x0 -= 1, x1 += 1;
  if (y1 == y0) {
    const double pad = std::max(std::abs(y0) * 0.05, 1e-12);
    y0 -= pad, y1 += pad;
  } else {
    const double pad = (y1 - y0) * 0.05;
    y0 -= pad, y1 += pad;
  }
  const int left = 72, right = 12, top = 28, bottom = 40;
  const double pw = width - left - right, ph = height - top - bottom;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"{2}\">\n<title>{2}</title>\n<rect width=\"{0}\" height=\"{1}\" fill=\"#fff\"/>\n"
      "<text x=\"{3}\" y=\"18\" class=\"t\">{2}</text>\n",
      width, height, html_escape(title), left);
  const std::vector<double> yt = nice_ticks(y0, y1), xt = nice_ticks(x0, x1);
  for (double t : yt)
    svg += fmt::format(
        "<line x1=\"{0}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" class=\"g\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" class=\"yl\">{5}</text>\n",
        left, left + pw, py(t), left - 6, py(t) + 4, html_escape(tick_label(t, tick_step(yt))));
  for (double t : xt)
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2:.1f}\" class=\"g\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" class=\"xl\">{4}</text>\n",
        px(t), top, top + ph, top + ph + 16, html_escape(tick_label(t, tick_step(xt))));
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" class=\"frame\"/>\n", left, top, pw, ph);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"xt\">{}</text>\n", left + pw / 2, height - 6,
                     html_escape(x_label));
  for (size_t i = 0; i < finite.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    const auto pts = thin(finite[i].points);
    if (pts.size() > 1) {
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"", color);
      for (const auto& [x, y] : pts) svg += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      svg += "\"/>\n";
    }
    if (pts.size() <= 60)
      for (const auto& [x, y] : pts)
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", px(x), py(y), color);
    if (finite.size() > 1) {  // legend, top right, one row per series
      const double ly = top + 14 + 14.0 * static_cast<double>(i);
      svg += fmt::format(
          "<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" stroke-width=\"2\"/>"
          "<text x=\"{4:.1f}\" y=\"{5:.1f}\" class=\"lg\">{6}</text>\n",
          left + pw - 110, left + pw - 94, ly - 4, color, left + pw - 90, ly, html_escape(finite[i].name));
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace nemotron::report
