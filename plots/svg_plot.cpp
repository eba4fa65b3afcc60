#include "plots/svg_plot.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "common/error.hpp"

namespace foresight::validate {

namespace {

// Geometry of one chart, in px from the chart's top-left corner.
constexpr double kChartWidth = 520;
constexpr double kHeaderHeight = 34;  // the document's title above the charts
constexpr double kPlotLeft = 72;
constexpr double kPlotRight = 500;
constexpr double kPlotTop = 44;
constexpr double kPlotBottom = 324;
constexpr double kLegendTop = 386;
constexpr double kLegendRow = 18;
constexpr double kChartBottomPad = 12;

// Okabe & Ito, "Color Universal Design" (2008): distinguishable with every common colour-vision
// deficiency; their yellow is left out (unreadable on white), grey added.
constexpr std::string_view kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                         "#E69F00", "#56B4E9", "#000000", "#999999"};
constexpr std::size_t kPaletteSize = std::size(kPalette);
constexpr int kMarkerShapes = 4;  // circle, square, triangle, diamond
constexpr std::string_view kReferenceColour = "#555555";
// Reference lines differ by dash pattern (their colour is shared).
constexpr std::string_view kDashes[] = {"6 4", "2 3", "9 3 2 3"};

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 allows no other control characters, not even as references.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

/// Coordinates with two decimals: fixed, so the output is the same on every platform.
std::string px(double v) { return fmt::format("{:.2f}", v); }

struct Tick {
  double at;          ///< in axis units (log10 of the value on log axes)
  std::string label;  ///< empty for minor ticks
};

/// One axis: the range it spans (in log10 units when logarithmic) and its ticks.
struct Scale {
  bool log = false;
  double lo = 0.0;
  double hi = 1.0;
  std::vector<Tick> ticks;  ///< major, labelled
  std::vector<double> minor;

  double unit(double v) const { return log ? std::log10(v) : v; }
  /// 0 at lo, 1 at hi.
  double fraction(double v) const { return (unit(v) - lo) / (hi - lo); }
};

/// "2.50e+09" -> "2.5e9": no trailing zeros in the mantissa, no '+' or leading zeros after 'e'.
std::string compact_exponent(const std::string& text) {
  const auto e = text.find('e');
  std::string mantissa = text.substr(0, e);
  if (mantissa.find('.') != std::string::npos) {
    mantissa.erase(mantissa.find_last_not_of('0') + 1);
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  return fmt::format("{}e{}", mantissa, std::stoi(text.substr(e + 1)));
}

/// Ticks at 1, 2 or 5 times a power of ten, about five of them, the range widened to whole ticks.
Scale linear_scale(double min, double max) {
  // Differences below double precision's reach count as none.
  if (max - min <= 1e-12 * std::max(std::abs(min), std::abs(max))) {
    const double pad = min == 0.0 ? 1.0 : std::abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  const double raw = (max - min) / 5.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1.0 : norm < 3.5 ? 2.0 : norm < 7.5 ? 5.0 : 10.0) * magnitude;
  const auto first = static_cast<std::int64_t>(std::floor(min / step + 1e-9));
  const auto last = static_cast<std::int64_t>(std::ceil(max / step - 1e-9));
  Scale s;
  s.lo = static_cast<double>(first) * step;
  s.hi = static_cast<double>(last) * step;
  const double largest = std::max(std::abs(s.lo), std::abs(s.hi));
  const bool scientific = largest >= 1e6 || step < 1e-4;
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  const int digits = static_cast<int>(std::floor(std::log10(largest) + 1e-9) -
                                      std::floor(std::log10(step) + 1e-9)) +
                     1;
  for (std::int64_t k = first; k <= last; ++k) {
    const double v = static_cast<double>(k) * step;
    std::string label = fmt::format("{:.{}f}", v, decimals);
    if (scientific) {
      label = k == 0 ? "0" : compact_exponent(fmt::format("{:.{}e}", v, std::max(digits, 1) - 1));
    }
    s.ticks.push_back({v, std::move(label)});
  }
  return s;
}

/// "1", "10", "0.01" (plain) or "1e9", "1e-6" (exponent) for the decade 10^d.
std::string decade_label(int d, bool plain) {
  if (!plain) return fmt::format("1e{}", d);
  if (d >= 0) return fmt::format("1{}", std::string(static_cast<std::size_t>(d), '0'));
  return fmt::format("0.{}1", std::string(static_cast<std::size_t>(-d - 1), '0'));
}

/// Whole decades, each a major tick (labelled, at most about eight labels), minor ticks at 2..9
/// times each decade when there are at most eight decades.
Scale log_scale(double min, double max) {
  int first = static_cast<int>(std::floor(std::log10(min) + 1e-12));
  int last = static_cast<int>(std::ceil(std::log10(max) - 1e-12));
  if (first == last) {
    --first;
    ++last;
  }
  Scale s;
  s.log = true;
  s.lo = first;
  s.hi = last;
  const int every = (last - first + 7) / 8;
  // One style per axis: plain numbers while they stay short (0.0001 .. 100000).
  const bool plain = first >= -4 && last <= 5;
  for (int d = first; d <= last; ++d) {
    s.ticks.push_back(
        {static_cast<double>(d), (d - first) % every == 0 ? decade_label(d, plain) : ""});
    if (last - first <= 8 && d < last) {
      for (int m = 2; m <= 9; ++m) s.minor.push_back(d + std::log10(static_cast<double>(m)));
    }
  }
  return s;
}

/// Major ticks exactly at `ticks`, the axis spanning them and [min, max] padded by 4 % (of its
/// span in axis units) on either side.
Scale explicit_scale(const std::vector<double>& ticks, bool log, double min, double max) {
  Scale s;
  s.log = log;
  for (double t : ticks) {
    min = std::min(min, t);
    max = std::max(max, t);
  }
  const double lo = s.unit(min);
  const double hi = s.unit(max);
  const double pad = hi > lo ? 0.04 * (hi - lo) : (log ? 0.1 : std::max(std::abs(lo) * 0.1, 1.0));
  s.lo = lo - pad;
  s.hi = hi + pad;
  for (double t : ticks) s.ticks.push_back({s.unit(t), fmt::format("{:.6g}", t)});
  return s;
}

struct Range {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  void add(double v) {
    min = std::min(min, v);
    max = std::max(max, v);
  }
};

void check_value(const Chart& chart, const Series& series, std::size_t k, char axis_name,
                 const Axis& axis, double v) {
  if (!std::isfinite(v)) {
    throw sim::ConfigError(
        fmt::format("chart '{}', series '{}': point {} has {} = {} (expected a finite number)",
                    chart.title, series.label, k, axis_name, v));
  }
  if (axis.log && v <= 0.0) {
    throw sim::ConfigError(fmt::format(
        "chart '{}', series '{}': point {} has {} = {}, which a logarithmic {} axis cannot show "
        "(expected > 0)",
        chart.title, series.label, k, axis_name, v, axis_name));
  }
}

/// The scale of `axis` over the data range `r`: explicit ticks, decades or round ticks.
Scale scale(const Chart& chart, char axis_name, const Axis& axis, const Range& r) {
  for (double t : axis.ticks) {
    if (!std::isfinite(t) || (axis.log && t <= 0.0)) {
      throw sim::ConfigError(fmt::format("chart '{}': {} tick {} (expected a finite number{})",
                                         chart.title, axis_name, t, axis.log ? " > 0" : ""));
    }
  }
  if (!axis.ticks.empty()) return explicit_scale(axis.ticks, axis.log, r.min, r.max);
  return axis.log ? log_scale(r.min, r.max) : linear_scale(r.min, r.max);
}

/// A marker of shape `shape` centred at (x, y).
std::string marker(int shape, double x, double y, std::string_view colour) {
  switch (shape) {
    case 1:
      return fmt::format(
          "<rect class=\"marker\" x=\"{}\" y=\"{}\" width=\"7\" height=\"7\" fill=\"{}\"/>",
          px(x - 3.5), px(y - 3.5), colour);
    case 2:
      return fmt::format("<path class=\"marker\" d=\"M{},{}L{},{}L{},{}Z\" fill=\"{}\"/>", px(x),
                         px(y - 4.5), px(x + 4.5), px(y + 3.5), px(x - 4.5), px(y + 3.5), colour);
    case 3:
      return fmt::format("<path class=\"marker\" d=\"M{},{}L{},{}L{},{}L{},{}Z\" fill=\"{}\"/>",
                         px(x), px(y - 4.5), px(x + 4.5), px(y), px(x), px(y + 4.5), px(x - 4.5),
                         px(y), colour);
    default:
      return fmt::format("<circle class=\"marker\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"/>",
                         px(x), px(y), colour);
  }
}

std::string factor_text(double f) { return fmt::format("{:g}", f); }

/// Draws one chart with its top-left corner at (ox, oy) into `out`.
class ChartWriter {
 public:
  ChartWriter(std::string& out, const Chart& chart, double ox, double oy)
      : out_(out), chart_(chart), ox_(ox), oy_(oy) {}

  void write() {
    Range xr, yr;
    for (const Series& s : chart_.series) {
      if (s.points.empty()) {
        throw sim::ConfigError(fmt::format(
            "chart '{}', series '{}': no points (expected at least one)", chart_.title, s.label));
      }
      for (std::size_t k = 0; k < s.points.size(); ++k) {
        check_value(chart_, s, k, 'x', chart_.x, s.points[k].first);
        check_value(chart_, s, k, 'y', chart_.y, s.points[k].second);
        xr.add(s.points[k].first);
        yr.add(s.points[k].second);
      }
    }
    data_x_ = xr;
    for (const ReferenceLine& r : chart_.references) {
      if (!std::isfinite(r.factor) || (chart_.y.log && r.factor <= 0.0)) {
        throw sim::ConfigError(fmt::format(
            "chart '{}', reference line '{}': factor {} (expected a finite number{})", chart_.title,
            r.label, r.factor, chart_.y.log ? " > 0 on a logarithmic y axis" : ""));
      }
      yr.add(r.factor * xr.min);
      yr.add(r.factor * xr.max);
    }
    for (const auto& [name, r] : {std::pair{'x', xr}, std::pair{'y', yr}}) {
      if (!std::isfinite(r.max - r.min)) {
        throw sim::ConfigError(fmt::format("chart '{}': {} spans {} .. {}, too wide to draw",
                                           chart_.title, name, r.min, r.max));
      }
    }
    xs_ = scale(chart_, 'x', chart_.x, xr);
    ys_ = scale(chart_, 'y', chart_.y, yr);

    text(kChartWidth / 2, 24, chart_.title, "middle",
         " class=\"chart-title\" font-size=\"14\" font-weight=\"bold\"");
    axes();
    references();
    for (std::size_t i = 0; i < chart_.series.size(); ++i) series(i);
    legend();
  }

  /// Height of the chart in px: the plot and a legend row per series and reference line.
  double height() const {
    return kLegendTop +
           kLegendRow * static_cast<double>(chart_.series.size() + chart_.references.size()) +
           kChartBottomPad;
  }

 private:
  double sx(double v) const { return ox_ + kPlotLeft + xs_.fraction(v) * (kPlotRight - kPlotLeft); }
  double sy(double v) const {
    return oy_ + kPlotBottom - ys_.fraction(v) * (kPlotBottom - kPlotTop);
  }
  /// Screen positions of axis units (log10 on log axes).
  double ux(double u) const {
    return ox_ + kPlotLeft + (u - xs_.lo) / (xs_.hi - xs_.lo) * (kPlotRight - kPlotLeft);
  }
  double uy(double u) const {
    return oy_ + kPlotBottom - (u - ys_.lo) / (ys_.hi - ys_.lo) * (kPlotBottom - kPlotTop);
  }

  void text(double x, double y, std::string_view s, std::string_view anchor,
            std::string_view extra = "") {
    out_ += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>\n", px(ox_ + x),
                        px(oy_ + y), anchor, extra, xml_escape(s));
  }

  void line(double x1, double y1, double x2, double y2) {
    out_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", px(x1), px(y1), px(x2),
                        px(y2));
  }

  void axes() {
    const double left = ox_ + kPlotLeft, right = ox_ + kPlotRight;
    const double top = oy_ + kPlotTop, bottom = oy_ + kPlotBottom;
    out_ += "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
    for (const Tick& t : xs_.ticks) line(ux(t.at), top, ux(t.at), bottom);
    for (const Tick& t : ys_.ticks) line(left, uy(t.at), right, uy(t.at));
    out_ += "</g>\n<g class=\"ticks\" stroke=\"#333333\" stroke-width=\"1\">\n";
    for (const Tick& t : xs_.ticks) line(ux(t.at), bottom, ux(t.at), bottom + 5);
    for (const double m : xs_.minor) line(ux(m), bottom, ux(m), bottom + 3);
    for (const Tick& t : ys_.ticks) line(left - 5, uy(t.at), left, uy(t.at));
    for (const double m : ys_.minor) line(left - 3, uy(m), left, uy(m));
    out_ += "</g>\n";
    out_ += fmt::format(
        "<rect class=\"plot-area\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
        "stroke=\"#333333\"/>\n",
        px(left), px(top), px(right - left), px(bottom - top));
    for (const Tick& t : xs_.ticks) {
      if (!t.label.empty())
        text(ux(t.at) - ox_, kPlotBottom + 18, t.label, "middle", " class=\"x-tick\"");
    }
    for (const Tick& t : ys_.ticks) {
      if (!t.label.empty())
        text(kPlotLeft - 8, uy(t.at) - oy_ + 4, t.label, "end", " class=\"y-tick\"");
    }
    text((kPlotLeft + kPlotRight) / 2, kPlotBottom + 42, chart_.x.label, "middle",
         " class=\"x-label\"");
    const double cy = (kPlotTop + kPlotBottom) / 2;
    out_ += fmt::format(
        "<text class=\"y-label\" x=\"0\" y=\"0\" text-anchor=\"middle\" "
        "transform=\"translate({},{}) rotate(-90)\">{}</text>\n",
        px(ox_ + 16), px(oy_ + cy), xml_escape(chart_.y.label));
  }

  void references() {
    // A straight line when both axes have the same kind, else sampled along x.
    const int segments = chart_.x.log == chart_.y.log ? 1 : 64;
    const double u0 = xs_.unit(data_x_.min), u1 = xs_.unit(data_x_.max);
    for (std::size_t i = 0; i < chart_.references.size(); ++i) {
      const ReferenceLine& r = chart_.references[i];
      std::string points;
      for (int k = 0; k <= segments; ++k) {
        const double u = u0 + (u1 - u0) * k / segments;
        const double x = chart_.x.log ? std::pow(10.0, u) : u;
        if (!points.empty()) points += ' ';
        points += px(ux(u)) + "," + px(sy(r.factor * x));
      }
      out_ += fmt::format(
          "<polyline class=\"reference\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"1.2\" stroke-dasharray=\"{}\"/>\n",
          points, kReferenceColour, dashes(i));
    }
  }

  static std::string_view dashes(std::size_t i) { return kDashes[i % std::size(kDashes)]; }
  static std::string_view colour(std::size_t i) { return kPalette[i % kPaletteSize]; }
  /// Colours repeat after the palette; the shape then changes, so no two of 32 series look alike.
  static int shape(std::size_t i) {
    return static_cast<int>((i + i / kPaletteSize) % kMarkerShapes);
  }

  void series(std::size_t i) {
    const Series& s = chart_.series[i];
    out_ += fmt::format("<g class=\"series\" data-series=\"{}\">\n", i);
    if (!s.markers_only && s.points.size() >= 2) {
      std::string points;
      for (const auto& [x, y] : s.points) {
        if (!points.empty()) points += ' ';
        points += px(sx(x)) + "," + px(sy(y));
      }
      out_ += fmt::format(
          "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"2\"/>\n",
          points, colour(i));
    }
    for (const auto& [x, y] : s.points) out_ += marker(shape(i), sx(x), sy(y), colour(i)) + "\n";
    out_ += "</g>\n";
  }

  void legend() {
    out_ += "<g class=\"legend\">\n";
    double y = kLegendTop;
    const double x0 = ox_ + kPlotLeft, x1 = x0 + 28;
    for (std::size_t i = 0; i < chart_.series.size(); ++i, y += kLegendRow) {
      const Series& s = chart_.series[i];
      if (!s.markers_only) {
        out_ += fmt::format(
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
            px(x0), px(oy_ + y), px(x1), px(oy_ + y), colour(i));
      }
      out_ += marker(shape(i), (x0 + x1) / 2, oy_ + y, colour(i)) + "\n";
      text(kPlotLeft + 36, y + 4, s.label, "start");
    }
    for (std::size_t i = 0; i < chart_.references.size(); ++i) {
      const ReferenceLine& r = chart_.references[i];
      out_ += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.2\" "
          "stroke-dasharray=\"{}\"/>\n",
          px(x0), px(oy_ + y), px(x1), px(oy_ + y), kReferenceColour, dashes(i));
      text(kPlotLeft + 36, y + 4, r.label.empty() ? "y = " + factor_text(r.factor) + " x" : r.label,
           "start");
      y += kLegendRow;
    }
    out_ += "</g>\n";
  }

  std::string& out_;
  const Chart& chart_;
  double ox_, oy_;
  Range data_x_;
  Scale xs_, ys_;
};

}  // namespace

std::string svg_charts(const std::string& title, const std::vector<Chart>& charts, std::size_t columns) {
  if (charts.empty()) {
    throw sim::ConfigError(fmt::format("svg plot '{}': no charts (expected at least one)", title));
  }
  for (const Chart& c : charts) {
    if (c.series.empty()) {
      throw sim::ConfigError(fmt::format("chart '{}': no series (expected at least one)", c.title));
    }
  }
  const std::size_t per_row = columns == 0 ? charts.size() : std::min(columns, charts.size());
  std::string body;
  double top = kHeaderHeight;  // of the current row
  double row_height = 0;
  for (std::size_t i = 0; i < charts.size(); ++i) {
    if (i > 0 && i % per_row == 0) {
      top += row_height;
      row_height = 0;
    }
    body += fmt::format("<g class=\"chart\" data-chart=\"{}\">\n", i);
    ChartWriter w(body, charts[i], kChartWidth * static_cast<double>(i % per_row), top);
    w.write();
    row_height = std::max(row_height, w.height());
    body += "</g>\n";
  }
  const double width = kChartWidth * static_cast<double>(per_row);
  const double total = top + row_height;
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>{2}</title>\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text class=\"title\" x=\"{3}\" y=\"22\" text-anchor=\"middle\" font-size=\"16\" "
      "font-weight=\"bold\">{2}</text>\n",
      px(width), px(total), xml_escape(title), px(width / 2));
  out += body;
  out += "</svg>\n";
  return out;
}

}  // namespace foresight::validate
