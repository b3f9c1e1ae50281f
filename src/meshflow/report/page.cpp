#include "meshflow/report/page.h"

#include <cmath>

#include "meshflow/report/svg.h"

namespace mf::report {

namespace {

const char* const kStyle = R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
.figures { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #ddd; padding: 8px; background: #fff; }
figcaption { font-size: 12px; color: #555; max-width: 640px; margin-top: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
pre.config { background: #f6f6f6; border: 1px solid #ddd; padding: 8px; font-size: 12px; max-height: 480px; overflow: auto; }
.note { color: #555; font-size: 13px; }
</style>
)";

// Writes each figure's plot area (page coordinates, CSS pixels) as JSON into #figure-rects, so a
// headless browser's DOM dump says where to look in its screenshot.
const char* const kScript = R"(<script>
(function () {
  var figures = [];
  document.querySelectorAll('figure[data-figure]').forEach(function (f) {
    var svg = f.querySelector('svg');
    var area = svg ? svg.querySelector('.plot-area') : null;
    var r = (area || f).getBoundingClientRect();
    figures.push({figure: f.getAttribute('data-figure'), svg: !!svg, plot_area: !!area,
                  x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height});
  });
  var root = document.documentElement;
  document.getElementById('figure-rects').textContent =
      JSON.stringify({page_width: root.scrollWidth, page_height: root.scrollHeight, figures: figures});
})();
</script>
)";

std::string h(std::string_view s) { return xml_escape(s); }

std::string percent(double v) { return std::isfinite(v) ? format_value(100 * v) + " %" : "n/a"; }

std::string figure_html(const Figure& f) {
  return "<figure data-figure=\"" + h(f.id) + "\">\n" + f.svg + "<figcaption>" + h(f.caption) + " <a href=\"" +
         h(f.id) + ".svg\">" + h(f.id) + ".svg</a></figcaption>\n</figure>\n";
}

std::string figures_html(const std::vector<Figure>& figures) {
  std::string s = "<div class=\"figures\">\n";
  for (const Figure& f : figures) s += figure_html(f);
  return s + "</div>\n";
}

std::string layout_text(const RunLayout& l) {
  // "dp 2 × tp 2 × pp 1": the batch-splitting dimensions first, then the others in mesh order.
  std::string s;
  for (const bool batch : {true, false})
    for (size_t i = 0; i < l.dims.count(); ++i) {
      if (global::dim_specs()[i].splits_batch != batch) continue;
      const int64_t n = l.dims.size(i);
      s += (s.empty() ? "" : " × ") + std::string(l.dims.name(i)) + (n > 0 ? " " + std::to_string(n) : std::string(" (derived)"));
    }
  if (l.dims.size("pp") > 1 && !l.schedule.empty()) s += " (" + l.schedule + ")";
  return s;
}

std::string runs_table(const std::vector<RunFiles>& runs) {
  std::string s = "<table>\n<tr><th>run</th><th>model</th><th>layout</th><th>last step</th><th>loss</th>"
                  "<th>validation loss</th><th>tokens/s</th></tr>\n";
  for (const RunFiles& r : runs) {
    const TrainPoint* last = r.metrics.train.empty() ? nullptr : &r.metrics.train.back();
    double val = kMissing;
    for (const EvalPoint& e : r.metrics.eval)
      if (e.values.count("val_loss")) val = e.values.at("val_loss");
    s += "<tr><td>" + h(r.name) + "</td><td>" + h(r.layout.model_name) + "</td><td>" + h(layout_text(r.layout)) +
         "</td><td>" + (last ? std::to_string(last->step) : "-") + "</td><td>" +
         (last ? format_value(last->loss) : "-") + "</td><td>" + format_value(val) + "</td><td>" +
         (last ? format_value(last->tokens_per_sec) : "-") + "</td></tr>\n";
  }
  return s + "</table>\n";
}

std::string bubble_html(const PipelineBubble& b) {
  if (b.steps.empty()) return "<p class=\"note\">trace.json has no pipeline \"schedule\" spans (no pipeline parallelism).</p>\n";
  std::string s = "<p>Schedule <b>" + h(b.schedule) + "</b>: " + std::to_string(b.stages) + " stages, " +
                  std::to_string(b.micro_batches) + " micro-batches" +
                  (b.chunks > 1 ? ", " + std::to_string(b.chunks) + " chunks per rank" : "") +
                  ". Theoretical bubble " + (b.schedule == "interleaved_1f1b" ? "(p−1)/(v·m+p−1)" : "(p−1)/(m+p−1)") +
                  " = <b>" + percent(b.theoretical) + "</b>.</p>\n"
                  "<p class=\"note\">Measured bubble of a rank in a step = 1 − (its forward and backward time) / "
                  "(its schedule span: the executor's run of the step's micro-batches).</p>\n";
  for (const StepBubble& st : b.steps) {
    s += "<h3>Step " + std::to_string(st.step) + "</h3>\n<table>\n<tr><th>rank</th><th>stage</th>"
         "<th>schedule span (ms)</th><th>forward + backward (ms)</th><th>measured bubble</th></tr>\n";
    for (const RankBubble& r : st.ranks)
      s += "<tr><td>" + std::to_string(r.rank) + "</td><td>" + (r.stage >= 0 ? std::to_string(r.stage) : "?") +
           "</td><td>" + format_value(r.schedule_us / 1e3) + "</td><td>" + format_value(r.compute_us / 1e3) +
           "</td><td>" + percent(r.bubble) + "</td></tr>\n";
    for (const auto& [stage, v] : st.stage_bubble)
      s += "<tr><td>stage " + (stage >= 0 ? std::to_string(stage) : "?") + " (mean)</td><td></td><td></td><td></td><td>" +
           percent(v) + "</td></tr>\n";
    s += "<tr><th>mean</th><td></td><td></td><td></td><th>" + percent(st.mean) + "</th></tr>\n"
         "<tr><td>theoretical</td><td></td><td></td><td></td><td>" + percent(b.theoretical) + "</td></tr>\n</table>\n";
  }
  return s;
}

std::string section_html(const RunSection& sec, bool several) {
  const RunFiles& r = *sec.run;
  std::string s = "<h2>" + std::string(several ? "Ranks of " + h(r.name) : "Ranks") + "</h2>\n";
  if (sec.figures.empty()) s += "<p class=\"note\">No training lines in metrics.jsonl.</p>\n";
  else s += figures_html(sec.figures);
  s += "<h2>Pipeline" + std::string(several ? " of " + h(r.name) : "") + "</h2>\n";
  if (sec.bubble) s += bubble_html(*sec.bubble);
  else s += "<p class=\"note\">No trace.json in this run (profile a run with train.profile.enabled=true).</p>\n";
  return s;
}

}  // namespace

std::string render_page(const std::vector<RunFiles>& runs, const std::vector<Figure>& curves,
                        const std::vector<RunSection>& sections) {
  const bool several = runs.size() > 1;
  std::string title = "meshflow report: ";
  for (size_t i = 0; i < runs.size(); ++i) title += (i ? ", " : "") + runs[i].name;
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + h(title) +
                  "</title>\n" + kStyle + "</head>\n<body>\n<h1>" + h(title) + "</h1>\n" + runs_table(runs) +
                  "<h2>Training</h2>\n" + figures_html(curves);
  for (const RunSection& sec : sections) s += section_html(sec, several);
  s += "<h2>Configuration</h2>\n";
  for (const RunFiles& r : runs) {
    if (several) s += "<h3>" + h(r.name) + "</h3>\n";
    s += r.config_text.empty() ? "<p class=\"note\">No config.yaml in this run folder.</p>\n"
                               : "<pre class=\"config\">" + h(r.config_text) + "</pre>\n";
  }
  return s + "<pre id=\"figure-rects\" hidden></pre>\n" + kScript + "</body>\n</html>\n";
}

}  // namespace mf::report
