// The SVG chart writer: document structure, series and legend, escaping, log-axis decades, the
// position of a known point, and errors on data a chart cannot show.
#include <catch2/catch.hpp>

#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "plots/svg_plot.hpp"

using namespace foresight;
using validate::Chart;
using validate::Series;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The text of the element group `<g class="series" data-series="i">...</g>`.
std::string series_group(const std::string& svg, int i) {
  const std::string open = "<g class=\"series\" data-series=\"" + std::to_string(i) + "\">";
  const auto from = svg.find(open);
  REQUIRE(from != std::string::npos);
  return svg.substr(from, svg.find("</g>", from) - from);
}

double attribute(const std::string& element, const std::string& name) {
  std::smatch m;
  REQUIRE(std::regex_search(element, m, std::regex(" " + name + "=\"([-0-9.]+)\"")));
  return std::stod(m[1]);
}

std::vector<std::string> texts_of_class(const std::string& svg, const std::string& cls) {
  std::vector<std::string> out;
  const std::regex re("<text x=\"[^\"]*\" y=\"[^\"]*\" text-anchor=\"[a-z]+\" class=\"" + cls +
                      "\">([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

Chart scaling_chart() {
  Chart c;
  c.title = "Iteration time";
  c.x = {"GPUs", false, {}};
  c.y = {"time (ms)", false, {}};
  c.series.push_back({"predicted", {{0, 0}, {5, 25}, {10, 100}}, false});
  c.series.push_back({"measured <A&B>", {{2, 10}, {8, 70}}, true});
  c.series.push_back({"ideal", {{0, 0}, {10, 50}}, false});
  return c;
}

}  // namespace

TEST_CASE("svg: one document, a line per series, an escaped legend", "[validate]") {
  Chart loglog;
  loglog.title = "Predicted vs measured";
  loglog.x = {"measured (s)", true, {}};
  loglog.y = {"predicted (s)", true, {}};
  loglog.series.push_back({"cases", {{0.02, 0.021}, {0.5, 0.45}, {3.0, 3.3}}, true});
  loglog.references = {{1.0, ""}, {1.1, "+10 %"}, {0.9, "-10 %"}};
  const std::string svg = validate::svg_charts("Sweep \"A\" & B", {scaling_chart(), loglog});

  // Well-formed enough: one root, the XML declaration, balanced groups.
  CHECK(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0) == 0);
  CHECK(count(svg, "<svg ") == 1);
  CHECK(count(svg, "</svg>") == 1);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<g ") == count(svg, "</g>"));
  CHECK(count(svg, "<text") == count(svg, "</text>"));
  // Two charts side by side, 520 px each.
  CHECK(svg.find("width=\"1040.00\"") != std::string::npos);
  CHECK(count(svg, "<g class=\"chart\"") == 2);
  CHECK(count(svg, "class=\"plot-area\"") == 2);

  // A polyline per series that has a line (not markers only), a dashed one per reference line.
  CHECK(count(svg, "<polyline class=\"line\"") == 2);
  CHECK(count(svg, "<polyline class=\"reference\"") == 3);
  CHECK(count(series_group(svg, 0), "<polyline") == 1);
  CHECK(count(series_group(svg, 1), "<polyline") == 0);  // markers only
  CHECK(count(series_group(svg, 0), "class=\"marker\"") == 3);
  CHECK(count(series_group(svg, 1), "class=\"marker\"") == 2);

  // Titles, axis labels and legend labels, XML-escaped.
  CHECK(svg.find("<title>Sweep &quot;A&quot; &amp; B</title>") != std::string::npos);
  CHECK(svg.find(">measured &lt;A&amp;B&gt;</text>") != std::string::npos);
  CHECK(svg.find("<A&B>") == std::string::npos);
  CHECK(svg.find(">predicted</text>") != std::string::npos);
  CHECK(svg.find(">y = 1 x</text>") != std::string::npos);
  CHECK(svg.find(">+10 %</text>") != std::string::npos);
  CHECK(svg.find(">time (ms)</text>") != std::string::npos);
  CHECK(svg.find(">Iteration time</text>") != std::string::npos);
  // Each series has its own colour.
  const auto stroke = [&](int i) {
    std::smatch m;
    const std::string g = series_group(svg, i);
    REQUIRE(std::regex_search(g, m, std::regex("fill=\"(#[0-9A-F]{6})\"")));
    return m[1].str();
  };
  CHECK(stroke(0) != stroke(1));
  CHECK(stroke(1) != stroke(2));
  CHECK(stroke(0) != stroke(2));
}

TEST_CASE("svg: linear ticks are round numbers, log ticks are decades", "[validate]") {
  const std::string lin = validate::svg_charts("t", {scaling_chart()});
  // x data 0..10 -> ticks every 2; y data 0..100 -> ticks every 20.
  CHECK(texts_of_class(lin, "x-tick") == std::vector<std::string>{"0", "2", "4", "6", "8", "10"});
  CHECK(texts_of_class(lin, "y-tick") ==
        std::vector<std::string>{"0", "20", "40", "60", "80", "100"});

  Chart c;
  c.title = "scaling";
  c.x = {"GPUs", true, {}};
  c.y = {"throughput", true, {}};
  c.series.push_back({"s", {{1, 0.5}, {8, 3.0}, {64, 20.0}}, false});
  const std::string log = validate::svg_charts("t", {c});
  // x 1..64 spans the decades 1..100; y 0.5..20 spans 0.1..100.
  CHECK(texts_of_class(log, "x-tick") == std::vector<std::string>{"1", "10", "100"});
  CHECK(texts_of_class(log, "y-tick") == std::vector<std::string>{"0.1", "1", "10", "100"});
  // Minor ticks at 2..9 in each decade: 2 x 8 on x, 3 x 8 on y; 3 + 4 major ones.
  const std::string ticks = log.substr(log.find("<g class=\"ticks\""));
  CHECK(count(ticks.substr(0, ticks.find("</g>")), "<line") == 16 + 24 + 3 + 4);
}

TEST_CASE("svg: a point sits where the axis ranges put it", "[validate]") {
  const std::string svg = validate::svg_charts("t", {scaling_chart()});
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("<rect class=\"plot-area\"[^>]*>")));
  const std::string area = m[0];
  const double left = attribute(area, "x"), top = attribute(area, "y");
  const double width = attribute(area, "width"), height = attribute(area, "height");
  CHECK(width > 300);
  CHECK(height > 200);
  // The second marker of series 0 is (5, 25); the axes span x 0..10 and y 0..100 (whole ticks).
  const std::string g = series_group(svg, 0);
  std::vector<std::string> circles;
  const std::regex circle("<circle [^>]*>");
  for (auto it = std::sregex_iterator(g.begin(), g.end(), circle); it != std::sregex_iterator();
       ++it) {
    circles.push_back((*it)[0]);
  }
  REQUIRE(circles.size() == 3);
  CHECK(attribute(circles[1], "cx") == Approx(left + width * (5.0 - 0.0) / 10.0).margin(0.01));
  CHECK(attribute(circles[1], "cy") == Approx(top + height * (1.0 - 25.0 / 100.0)).margin(0.01));
  // The corners of the data are the corners of the plot area here.
  CHECK(attribute(circles[0], "cx") == Approx(left).margin(0.01));
  CHECK(attribute(circles[0], "cy") == Approx(top + height).margin(0.01));
  CHECK(attribute(circles[2], "cy") == Approx(top).margin(0.01));

  // On log axes a value maps by its logarithm: 10 is halfway between 1 and 100.
  Chart c;
  c.title = "log";
  c.x = {"x", true, {}};
  c.y = {"y", true, {}};
  c.series.push_back({"s", {{1, 1}, {10, 10}, {100, 100}}, true});
  const std::string log = validate::svg_charts("t", {c});
  const std::string lg = series_group(log, 0);
  REQUIRE(std::regex_search(lg, m, std::regex("<circle [^>]*cx=\"[^\"]*\" cy=\"[^\"]*\"[^>]*>")));
  std::vector<std::string> marks;
  for (auto it = std::sregex_iterator(lg.begin(), lg.end(), circle); it != std::sregex_iterator();
       ++it) {
    marks.push_back((*it)[0]);
  }
  REQUIRE(marks.size() == 3);
  CHECK(attribute(marks[1], "cx") ==
        Approx((attribute(marks[0], "cx") + attribute(marks[2], "cx")) / 2).margin(0.01));
  CHECK(attribute(marks[1], "cy") ==
        Approx((attribute(marks[0], "cy") + attribute(marks[2], "cy")) / 2).margin(0.01));
}

TEST_CASE("svg: explicit ticks label the given values and pad the axis by 4 %", "[validate]") {
  Chart c;
  c.title = "sweep";
  c.x = {"GPUs", true, {8, 16, 32, 64}};
  c.y = {"samples / s", true, {}};
  c.series.push_back({"s", {{8, 100}, {16, 200}, {32, 400}, {64, 800}}, false});
  const std::string svg = validate::svg_charts("t", {c});
  CHECK(texts_of_class(svg, "x-tick") == std::vector<std::string>{"8", "16", "32", "64"});
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("<rect class=\"plot-area\"[^>]*>")));
  const std::string area = m[0];
  const double left = attribute(area, "x"), width = attribute(area, "width");
  // log10(8)..log10(64) is three doublings; 4 % of it pads either side, so 8 sits at 0.04/1.08
  // of the width and each doubling spans 1/1.08 / 3 of it.
  const std::string g = series_group(svg, 0);
  std::vector<double> cx;
  const std::regex circle("<circle [^>]*>");
  for (auto it = std::sregex_iterator(g.begin(), g.end(), circle); it != std::sregex_iterator();
       ++it) {
    cx.push_back(attribute((*it)[0], "cx"));
  }
  REQUIRE(cx.size() == 4);
  CHECK(cx[0] == Approx(left + width * 0.04 / 1.08).margin(0.01));
  for (std::size_t i = 1; i < 4; ++i) {
    CHECK(cx[i] - cx[i - 1] == Approx(width / 1.08 / 3).margin(0.02));
  }
  // A tick a log axis cannot show is an error naming the chart.
  c.x.ticks = {0, 8};
  CHECK_THROWS_WITH(validate::svg_charts("t", {c}), Catch::Contains("sweep"));
}

TEST_CASE("svg: charts in rows of a given width", "[validate]") {
  Chart tall = scaling_chart();
  tall.series.push_back({"extra", {{1, 1}}, false});  // one legend row more than the others
  const std::string row = validate::svg_charts("t", {scaling_chart(), scaling_chart(), scaling_chart()});
  const std::string grid = validate::svg_charts("t", {scaling_chart(), tall, scaling_chart()}, 2);
  // One row: three charts across. Rows of two: two across, the third under the first, below the
  // taller of the first row's charts (its one more legend row, 18 px).
  const std::regex title_at("<text x=\"([0-9.]+)\" y=\"([0-9.]+)\" text-anchor=\"middle\" class=\"chart-title\"");
  std::vector<std::pair<double, double>> row_titles, grid_titles;
  for (auto [text, out] : {std::pair{&row, &row_titles}, std::pair{&grid, &grid_titles}}) {
    for (auto it = std::sregex_iterator(text->begin(), text->end(), title_at); it != std::sregex_iterator(); ++it) {
      out->emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
    }
  }
  REQUIRE(row_titles.size() == 3);
  REQUIRE(grid_titles.size() == 3);
  CHECK(row_titles[2].first == Approx(row_titles[0].first + 2 * 520.0));
  CHECK(row_titles[2].second == row_titles[0].second);
  CHECK(grid_titles[1].first == Approx(grid_titles[0].first + 520.0));
  CHECK(grid_titles[2].first == grid_titles[0].first);
  const double one_row = attribute(row.substr(0, row.find('>', row.find("<svg"))), "height") - 34.0;
  CHECK(grid_titles[2].second == Approx(grid_titles[0].second + one_row + 18.0));
  CHECK(attribute(grid.substr(0, grid.find('>', grid.find("<svg"))), "width") == Approx(2 * 520.0));
  CHECK(attribute(grid.substr(0, grid.find('>', grid.find("<svg"))), "height") ==
        Approx(34.0 + 2 * one_row + 18.0));
  // No width given: the one row as before.
  CHECK(validate::svg_charts("t", {scaling_chart(), scaling_chart()}, 0) ==
        validate::svg_charts("t", {scaling_chart(), scaling_chart()}));
}

TEST_CASE("svg: deterministic output", "[validate]") {
  CHECK(validate::svg_charts("t", {scaling_chart()}) ==
        validate::svg_charts("t", {scaling_chart()}));
}

TEST_CASE("svg: errors name the chart and series", "[validate]") {
  Chart c = scaling_chart();
  c.y.log = true;  // series "predicted" has y = 0
  try {
    validate::svg_charts("t", {c});
    FAIL("expected a ConfigError");
  } catch (const sim::ConfigError& e) {
    const std::string what = e.what();
    CHECK(what.find("Iteration time") != std::string::npos);
    CHECK(what.find("predicted") != std::string::npos);
  }
  c = scaling_chart();
  c.series[1].points[0].first = -2;
  c.x.log = true;
  CHECK_THROWS_AS(validate::svg_charts("t", {c}), sim::ConfigError);
  c = scaling_chart();
  c.series[2].points.clear();
  CHECK_THROWS_WITH(validate::svg_charts("t", {c}), Catch::Contains("ideal"));
  c = scaling_chart();
  c.series.clear();
  CHECK_THROWS_AS(validate::svg_charts("t", {c}), sim::ConfigError);
  CHECK_THROWS_AS(validate::svg_charts("t", {}), sim::ConfigError);
  c = scaling_chart();
  c.series[0].points[1].second = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(validate::svg_charts("t", {c}), sim::ConfigError);
}
