// The run report (src/meshflow/report): the SVG writer (1-2-5 ticks, escaping, a chart's points on
// the pixels they stand for), the pipeline bubble of the hand-written trace of
// tests/fixtures/report_run (2 stages, 1F1B, 4 micro-batches) against numbers worked out by hand,
// metrics.jsonl with and without per-rank figures, errors naming file and line, and the page.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "data_testing.h"
#include "testing.h"
#include "meshflow/core/atomic_file.h"
#include "meshflow/core/error.h"
#include "meshflow/report/bar_chart.h"
#include "meshflow/report/line_chart.h"
#include "meshflow/report/report.h"
#include "meshflow/report/run_files.h"
#include "meshflow/report/svg.h"
#include "meshflow/report/trace_summary.h"

namespace {

namespace fs = std::filesystem;
using namespace mf::report;
using mft::TempDir;

const std::string kFixture = std::string(MESHFLOW_SOURCE_DIR) + "/tests/fixtures/report_run";

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The `points` of every <polyline> of an SVG, as (x, y) pairs.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> out;
  static const std::regex kPoly("<polyline points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kPoly); it != std::sregex_iterator(); ++it) {
    std::vector<std::pair<double, double>> pts;
    std::istringstream in((*it)[1].str());
    std::string pair;
    while (in >> pair) {
      const size_t comma = pair.find(',');
      pts.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
    }
    out.push_back(pts);
  }
  return out;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// ---------------------------------------------------------------- SVG writer

TEST(ReportSvg, NiceTicksAreOneTwoFiveSteps) {
  EXPECT_EQ(nice_ticks(0, 10, 6), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(2, 8, 8), (std::vector<double>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(nice_ticks(-3, 7, 6), (std::vector<double>{-4, -2, 0, 2, 4, 6, 8}));
  const std::vector<double> t = nice_ticks(0.13, 0.87, 6);  // 0.1 would need 8 intervals: 0.2
  ASSERT_EQ(t.size(), 6u);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], 0.2 * static_cast<double>(i), 1e-12);
  EXPECT_DOUBLE_EQ(nice_step(1020, 1080, 6), 10);
  // Any range: the step is 1, 2 or 5 times a power of ten, the ticks cover it in at most max_ticks steps.
  for (double lo : {-7.3, 0.0, 0.0012, 3.0, 980.0})
    for (double span : {1e-4, 0.37, 1.0, 42.0, 9e5}) {
      const std::vector<double> ticks = nice_ticks(lo, lo + span, 6);
      const double step = ticks[1] - ticks[0];
      const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
      EXPECT_TRUE(std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 || std::abs(mantissa - 5) < 1e-6)
          << lo << " + " << span << ": step " << step;
      EXPECT_LE(ticks.front(), lo + step * 1e-6);  // ticks are k * step: within rounding of the ends
      EXPECT_GE(ticks.back(), lo + span - step * 1e-6);
      EXPECT_LE(ticks.size(), 7u);
    }
  EXPECT_EQ(log_ticks(0.3, 40), (std::vector<double>{0.1, 1, 10, 100}));
  EXPECT_EQ(log_ticks(2, 30), (std::vector<double>{2, 5, 10, 20, 50}));
}

TEST(ReportSvg, TickLabelsShareTheAxisForm) {
  EXPECT_EQ(format_tick(1.5, 0.5), "1.5");
  EXPECT_EQ(format_tick(12, 2), "12");
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(4e-4, 2e-4), "4e-4");
  EXPECT_EQ(format_tick(1e-3, 2e-4), "1e-3");  // not "0.0010" beside "8e-4"
  EXPECT_EQ(format_tick(20000, 5000), "20k");
  EXPECT_EQ(format_tick(2500, 500), "2500");
  EXPECT_EQ(format_tick(3e6, 1e6), "3M");
  EXPECT_EQ(format_tick(0, 5), "0");
}

TEST(ReportSvg, EscapesText) {
  EXPECT_EQ(xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  EXPECT_EQ(xml_escape("caf\xC3\xA9 \xE2\x80\x94 ok"), "caf\xC3\xA9 \xE2\x80\x94 ok");  // UTF-8 kept
  EXPECT_EQ(xml_escape("x\x01y"), "x\xEF\xBF\xBDy");                                   // control character
  EXPECT_EQ(xml_escape("bad \xFF\xC3"), "bad \xEF\xBF\xBD\xEF\xBF\xBD");                // not UTF-8
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");        // a surrogate
  Svg svg(100, 50);
  svg.text(1, 2, "</text><script>alert(1)</script>");
  svg.rect(0, 0, 10, 10, "red", "tip \"<&>\"");
  const std::string s = svg.str();
  EXPECT_EQ(s.find("<script>"), std::string::npos) << s;
  EXPECT_NE(s.find("&lt;/text&gt;&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos) << s;
  EXPECT_NE(s.find("<title>tip &quot;&lt;&amp;&gt;&quot;</title>"), std::string::npos) << s;
}

// ---------------------------------------------------------------- charts

TEST(ReportCharts, LinePointsLandOnTheirPixels) {
  const Layout l;  // plot area x 76..620, y 34..270
  LineChart c{"t", "step", "loss", false, {Series{"a", "#000", {0, 50, 100}, {0, 5, 10}, false}}};
  const LineScales sc = line_chart_scales(c, l);
  EXPECT_EQ(sc.x_ticks.front(), 0);
  EXPECT_EQ(sc.x_ticks.back(), 100);
  EXPECT_EQ(sc.y_ticks, (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const auto lines = polylines(render_line_chart(c, l));
  ASSERT_EQ(lines.size(), 1u);
  const std::vector<std::pair<double, double>> want = {{76, 270}, {348, 152}, {620, 34}};
  ASSERT_EQ(lines[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(lines[0][i].first, want[i].first, 0.01) << i;
    EXPECT_NEAR(lines[0][i].second, want[i].second, 0.01) << i;
  }
  // Log y: 1, 10, 100 evenly spaced over the axis 1..100.
  LineChart lg{"t", "step", "norm", true, {Series{"a", "#000", {0, 50, 100}, {1, 10, 100}, false}}};
  const auto log_lines = polylines(render_line_chart(lg, l));
  ASSERT_EQ(log_lines.size(), 1u);
  ASSERT_EQ(log_lines[0].size(), 3u);
  EXPECT_NEAR(log_lines[0][0].second, 270, 0.01);
  EXPECT_NEAR(log_lines[0][1].second, 152, 0.01);
  EXPECT_NEAR(log_lines[0][2].second, 34, 0.01);
}

TEST(ReportCharts, MissingValuesBreakTheLine) {
  const double nan = std::nan("");
  LineChart c{"t", "step", "y", false,
              {Series{"a", "#000", {1, 2, 3, 4, 5, 6}, {1, nan, 3, 4, nan, 6}, false},
               Series{"<b> & co", "#111", {1, 2}, {2, 2}, true}}};
  const std::string svg = render_line_chart(c);
  EXPECT_EQ(polylines(svg).size(), 2u);                 // (3, 4) and the second series: lone points are dots
  EXPECT_EQ(count(svg, "<circle"), 6u);                 // every drawn point
  EXPECT_NE(svg.find("&lt;b&gt; &amp; co"), std::string::npos);  // the legend, escaped
  EXPECT_NE(svg.find("stroke-dasharray=\"6 3\""), std::string::npos);
  LineChart empty{"t", "step", "y", false, {Series{"a", "#000", {1}, {nan}, false}}};
  EXPECT_NE(render_line_chart(empty).find(">no data<"), std::string::npos);
  // Values near the double's limit are left out: their span would overflow to NaN coordinates.
  LineChart extreme{"t", "step", "y", false, {Series{"a", "#000", {1, 2, 3, 4}, {1e308, -1e308, 2, 3}, false}}};
  const std::string xs = render_line_chart(extreme);
  EXPECT_EQ(xs.find("nan"), std::string::npos) << xs;
  EXPECT_EQ(count(xs, "<circle"), 2u);
}

TEST(ReportCharts, StackedBarsStackFromTheAxis) {
  // Totals 2 and 2: a value axis 0..2 over the plot's 236 pixels, so 1 unit = 118 pixels.
  StackedBars c{"t", "rank", "memory (GB)", {"rank 0", "rank 1"},
                {BarPart{"a", "#100000", {1, 1}}, BarPart{"b", "#200000", {1, 0}}, BarPart{"c", "#300000", {0, 1}}}};
  const std::string svg = render_stacked_bars(c);
  static const std::regex kRect("<rect x=\"([^\"]+)\" y=\"([^\"]+)\" width=\"([^\"]+)\" height=\"([^\"]+)\" "
                                "fill=\"#([123])00000\"><title>");
  std::vector<std::smatch> bars;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kRect); it != std::sregex_iterator(); ++it)
    bars.push_back(*it);
  ASSERT_EQ(bars.size(), 4u) << svg;  // zero values draw nothing
  for (const std::smatch& m : bars) EXPECT_NEAR(std::stod(m[4].str()), 118, 0.01) << m[0];
  EXPECT_NEAR(std::stod(bars[0][2].str()), 270 - 118, 0.01);  // rank 0's "a" sits on the axis
  EXPECT_NEAR(std::stod(bars[1][2].str()), 270 - 236, 0.01);  // its "b" on top of it
}

// ---------------------------------------------------------------- trace

// The fixture (see tests/fixtures/report_run): forward 10 us, backward 20 us; rank 0 (stage 0)
// runs its 4 micro-batches in a 150 us schedule span, rank 1 (stage 1) in 130 us; step 4 doubles
// every duration.
TEST(ReportBubble, FixtureTraceByHand) {
  const nlohmann::json trace = nlohmann::json::parse(mf::read_file(kFixture + "/trace.json"));
  const PipelineBubble b = pipeline_bubble(trace);
  EXPECT_EQ(b.schedule, "1f1b");
  EXPECT_EQ(b.stages, 2);
  EXPECT_EQ(b.micro_batches, 4);
  EXPECT_EQ(b.chunks, 1);
  EXPECT_DOUBLE_EQ(b.theoretical, 1.0 / 5.0);  // (p-1)/(m+p-1)
  ASSERT_EQ(b.steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const StepBubble& s = b.steps[i];
    const double k = i == 0 ? 1 : 2;
    EXPECT_EQ(s.step, 3 + static_cast<int64_t>(i));
    ASSERT_EQ(s.ranks.size(), 2u);
    EXPECT_EQ(s.ranks[0].rank, 0);
    EXPECT_EQ(s.ranks[0].stage, 0);
    EXPECT_DOUBLE_EQ(s.ranks[0].schedule_us, 150 * k);
    EXPECT_DOUBLE_EQ(s.ranks[0].compute_us, 120 * k);  // 4 x 10 + 4 x 20; the ops inside are not counted again
    EXPECT_DOUBLE_EQ(s.ranks[0].bubble, 1 - 120.0 / 150.0);
    EXPECT_EQ(s.ranks[1].stage, 1);
    EXPECT_DOUBLE_EQ(s.ranks[1].schedule_us, 130 * k);
    EXPECT_DOUBLE_EQ(s.ranks[1].bubble, 1 - 120.0 / 130.0);
    EXPECT_DOUBLE_EQ(s.mean, (0.2 + (1 - 120.0 / 130.0)) / 2);
    EXPECT_DOUBLE_EQ(s.stage_bubble.at(0), 0.2);
    EXPECT_DOUBLE_EQ(s.stage_bubble.at(1), 1 - 120.0 / 130.0);
  }
  // Without "step" spans the schedule spans are numbered from otherData.start_step.
  nlohmann::json no_steps = trace;
  auto& ev = no_steps["traceEvents"];
  ev.erase(std::remove_if(ev.begin(), ev.end(), [](const nlohmann::json& e) { return e.value("cat", "") == "step"; }),
           ev.end());
  const PipelineBubble b2 = pipeline_bubble(no_steps);
  ASSERT_EQ(b2.steps.size(), 2u);
  EXPECT_EQ(b2.steps[0].step, 3);
  EXPECT_EQ(b2.steps[1].step, 4);
  EXPECT_DOUBLE_EQ(b2.steps[1].ranks[1].bubble, 1 - 120.0 / 130.0);
}

TEST(ReportBubble, TheoreticalBubble) {
  EXPECT_DOUBLE_EQ(theoretical_bubble("gpipe", 4, 8, 1), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(theoretical_bubble("1f1b", 2, 8, 1), 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(theoretical_bubble("interleaved_1f1b", 4, 8, 2), 3.0 / 19.0);  // (p-1)/(v*m+p-1)
  EXPECT_DOUBLE_EQ(theoretical_bubble("1f1b", 1, 8, 1), 0.0);
  EXPECT_TRUE(std::isnan(theoretical_bubble("zigzag", 2, 8, 1)));
  EXPECT_TRUE(std::isnan(theoretical_bubble("1f1b", 2, 0, 1)));
}

TEST(ReportBubble, TimelineOfTheFirstStep) {
  const TraceEvents t = read_trace_events(nlohmann::json::parse(mf::read_file(kFixture + "/trace.json")));
  EXPECT_EQ(t.rank_name.at(1), "rank 1 (stage 1, dp 0, tp 0)");
  const StepTimeline st = first_step_timeline(t);
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(st.ranks, (std::vector<int64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(st.end_us, 190);
  // Rank 0: 8 forward/backward, 2 pipeline waits, grad sync, comm wait, optimizer; rank 1: one wait.
  // Ops and the communication thread's spans are not on the timeline.
  EXPECT_EQ(st.spans.size(), 13u + 12u);
  for (const Span& s : st.spans) {
    EXPECT_EQ(s.tid, 0);
    EXPECT_TRUE(s.cat != "op" && s.cat != "op_backward" && s.cat != "comm") << s.cat;
    EXPECT_LE(s.end(), 190);
  }
}

TEST(ReportBubble, BadTraceNamesTheEvent) {
  MFT_EXPECT_ERROR(
      pipeline_bubble(nlohmann::json::parse(R"({"traceEvents":[{"ph":"X","cat":"forward","pid":0,"ts":"x","dur":1}]})")),
      "traceEvents[0]", "\"ts\"");
  MFT_EXPECT_ERROR(pipeline_bubble(nlohmann::json::parse(R"({"events":[]})")), "no \"traceEvents\" array");
}

// ---------------------------------------------------------------- run folders

TEST(ReportMetrics, LoadsPerRankFigures) {
  const Metrics m = load_metrics(kFixture + "/metrics.jsonl");
  ASSERT_EQ(m.train.size(), 4u);
  ASSERT_EQ(m.eval.size(), 2u);
  EXPECT_EQ(m.train.back().step, 8);
  EXPECT_DOUBLE_EQ(m.train.back().loss, 6.0);
  ASSERT_EQ(m.train.back().ranks.size(), 2u);
  const RankMetrics& r1 = m.train.back().ranks[1];
  EXPECT_EQ(r1.rank, 1);
  EXPECT_EQ(r1.stage, 1);
  EXPECT_DOUBLE_EQ(r1.mem_activations, 15e6);
  EXPECT_DOUBLE_EQ(r1.pipeline_wait_time, 0.05);
  EXPECT_EQ(m.eval[1].step, 8);
  EXPECT_DOUBLE_EQ(m.eval[1].values.at("val_loss"), 9.0 - 8 * 0.4);
  const RunFiles run = load_run(kFixture);
  EXPECT_EQ(run.name, "report_run");
  EXPECT_EQ(run.layout.dims.size("pp"), 2);
  EXPECT_EQ(run.layout.schedule, "1f1b");
  EXPECT_EQ(run.layout.model_name, "gpt2");
  EXPECT_TRUE(run.trace.has_value());
}

TEST(ReportMetrics, OlderFilesWithoutRanks) {
  TempDir dir;
  write_text(dir.file("metrics.jsonl"),
             "{\"step\":10,\"loss\":5.5,\"lr\":0.001,\"grad_norm\":1.2,\"tokens_per_sec\":900,\"mfu\":0,"
             "\"peak_bytes\":100,\"step_time\":0.2,\"mem_parameters\":10,\"mem_gradients\":10,"
             "\"mem_optimizer_state\":20,\"mem_activations\":60,\"mem_comm_buffers\":0}\n"
             "\n"
             "{\"step\":20,\"loss\":null,\"lr\":0.001}\n"
             "{\"step\":20,\"val_loss\":5.0,\"val_accuracy\":0.5}\n");
  const RunFiles run = load_run(dir.path().string());
  ASSERT_EQ(run.metrics.train.size(), 2u);
  EXPECT_TRUE(run.metrics.train[0].ranks.empty());
  EXPECT_DOUBLE_EQ(run.metrics.train[0].rank0.mem_activations, 60);
  EXPECT_TRUE(std::isnan(run.metrics.train[0].rank0.pipeline_wait_time));
  EXPECT_TRUE(std::isnan(run.metrics.train[1].loss));  // JSON null: the writer's NaN
  EXPECT_DOUBLE_EQ(run.metrics.eval[0].values.at("val_accuracy"), 0.5);
  EXPECT_TRUE(run.config_text.empty());
  EXPECT_FALSE(run.trace.has_value());
  // The page says what it shows instead.
  const ReportFiles files = write_report({dir.path().string()}, dir.file("report"));
  const std::string page = mf::read_file(files.index_html);
  EXPECT_NE(page.find("No per-rank data in metrics.jsonl"), std::string::npos);
  EXPECT_NE(page.find("No trace.json in this run"), std::string::npos);
  EXPECT_NE(page.find("No config.yaml"), std::string::npos);
}

// A full disk (or a killed run) leaves the last line of metrics.jsonl cut, without its newline:
// the report leaves it out with a warning and shows the lines before it (it once refused the
// whole file). A damaged line that ends with its newline stays an error, last or not.
TEST(ReportMetrics, ACutLastLineIsLeftOutWithAWarning) {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  write_text(path, "{\"step\":1,\"loss\":2.5}\n{\"step\":2,\"val_loss\":2.4}\n{\"step\":3,\"lo");
  const Metrics m = load_metrics(path);
  ASSERT_EQ(m.train.size(), 1u);
  EXPECT_EQ(m.train[0].loss, 2.5);
  EXPECT_EQ(m.eval.size(), 1u);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find(path + ":3: the last line is cut"), std::string::npos) << m.warnings[0];
  const ReportFiles files = write_report({dir.path().string()}, dir.file("report"));
  EXPECT_EQ(files.warnings, m.warnings);
  // A whole last line without its newline reads as any other.
  write_text(path, "{\"step\":1,\"loss\":2.5}\n{\"step\":3,\"loss\":2}");
  const Metrics whole = load_metrics(path);
  EXPECT_EQ(whole.train.size(), 2u);
  EXPECT_TRUE(whole.warnings.empty());
  // A cut line before others is an error.
  write_text(path, "{\"step\":1,\"lo\n{\"step\":3,\"loss\":2}\n");
  const std::string middle = path + ":1: not JSON";
  MFT_EXPECT_ERROR(load_metrics(path), middle.c_str());
}

TEST(ReportMetrics, BadInputNamesFileAndLine) {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl"), trace = dir.file("trace.json"), config = dir.file("config.yaml");
  const std::string run = dir.path().string();
  // metrics.jsonl's content, the error's text after "<path>:".
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"step\":1,\"loss\":2}\n{\"step\":2,\"loss\":\n", "2: not JSON"},
      {"\n{\"step\":1,\"loss\":\"high\"}\n", "2: \"loss\" is string, not a number"},
      {"{\"step\":1,\"loss\":1e400}\n", "1: not JSON: number overflow parsing '1e400'"},  // out_of_range
      {"[1,2]\n", "1: a array, not a JSON object"},
      {"{\"loss\":1}\n", "1: no \"step\""},
      {"{\"step\":1,\"loss\":1,\"ranks\":[{\"rank\":0,\"mem_gradients\":\"x\"}]}\n", "1: ranks[0]: \"mem_gradients\""}};
  for (const auto& [content, error] : cases) {
    write_text(path, content);
    const std::string want = path + ":" + error;  // named: the macro's list holds pointers into it
    MFT_EXPECT_ERROR(load_metrics(path), want.c_str());
  }
  fs::remove(path);
  const std::string missing = path + ": not found";
  MFT_EXPECT_ERROR(load_run(run), missing.c_str());
  write_text(path, "{\"step\":1,\"loss\":1}\n");
  write_text(trace, "{\"traceEvents\": [\n{]");
  const std::string bad_trace = trace + ": not JSON: parse error at line 2";
  MFT_EXPECT_ERROR(load_run(run), bad_trace.c_str());
  fs::remove(trace);
  write_text(config, "train:\n  dist: [1,\n");
  const std::string bad_config = config + ":";
  MFT_EXPECT_ERROR(load_run(run), bad_config.c_str());
}

// ---------------------------------------------------------------- the page

TEST(ReportPage, SelfContainedWithEveryFigureInline) {
  TempDir dir;
  const ReportFiles files = write_report({kFixture}, dir.file("out"));
  const std::string page = mf::read_file(files.index_html);
  std::vector<std::string> names;
  for (const std::string& f : files.svg_files) names.push_back(fs::path(f).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"loss.svg", "lr.svg", "grad_norm.svg", "tokens_per_sec.svg", "mfu.svg",
                                              "memory.svg", "step_time.svg", "timeline.svg"}));
  for (const std::string& f : files.svg_files) {
    const std::string svg = mf::read_file(f);
    EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << f;
    EXPECT_NE(page.find(svg), std::string::npos) << f << " is not inline in the page";
  }
  // Nothing from the network: the only URL is SVG's namespace name.
  EXPECT_EQ(count(page, "http://") + count(page, "https://"), count(page, "http://www.w3.org/2000/svg"));
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_NE(page.find("note: &quot;&lt;b&gt;escaped &amp; shown verbatim&lt;/b&gt;&quot;"), std::string::npos);
  EXPECT_NE(page.find("Theoretical bubble (p−1)/(m+p−1) = <b>20 %</b>"), std::string::npos);
  EXPECT_NE(page.find("<th>13.85 %</th>"), std::string::npos);  // the mean measured bubble of step 3
}

TEST(ReportPage, SeveralRunsOverlaid) {
  TempDir dir;
  MFT_EXPECT_ERROR(default_output_dir({kFixture, kFixture}), "several runs need --output");
  EXPECT_EQ(default_output_dir({kFixture}), kFixture + "/report");
  fs::create_directories(dir.file("other"));
  fs::copy_file(kFixture + "/metrics.jsonl", dir.file("other/metrics.jsonl"));
  const ReportFiles files = write_report({kFixture, dir.file("other")}, dir.file("out"));
  const std::string loss = mf::read_file(dir.file("out/loss.svg"));
  EXPECT_NE(loss.find(">report_run training<"), std::string::npos);
  EXPECT_NE(loss.find(">other validation<"), std::string::npos);
  EXPECT_EQ(polylines(loss).size(), 4u);  // training and validation of each run
  EXPECT_TRUE(fs::exists(dir.file("out/run1-memory.svg")));
  EXPECT_TRUE(fs::exists(dir.file("out/run1-timeline.svg")));
  EXPECT_TRUE(fs::exists(dir.file("out/run2-step_time.svg")));
  EXPECT_FALSE(fs::exists(dir.file("out/run2-timeline.svg")));  // no trace.json in the second
}

}  // namespace
