#include "common/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cohort {
namespace {

[[noreturn]] void Invalid(std::string_view what, std::string_view name) {
  std::fprintf(stderr, "PrometheusText: invalid %.*s '%.*s'\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(name.size()), name.data());
  std::abort();
}

bool NameChar(char c, bool first, bool colon) {
  bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool ValidName(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

// Backslash and newline escaped, and with `quote`, the double quote too.
std::string Escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[i];
  sum += value;
  ++count;
}

std::vector<double> DurationBucketsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,  1,
          2.5,   5,      10,    30,   60,    120,  300, 600,  1800, 3600};
}

bool PrometheusText::ValidMetricName(std::string_view name) { return ValidName(name, true); }

bool PrometheusText::ValidLabelName(std::string_view name) {
  return ValidName(name, false) && !(name.size() >= 2 && name.substr(0, 2) == "__");
}

std::string PrometheusText::EscapeLabelValue(std::string_view value) { return Escape(value, true); }

std::string PrometheusText::EscapeHelp(std::string_view help) { return Escape(help, false); }

std::string PrometheusText::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

void PrometheusText::Family(std::string_view name, Type type, std::string_view help) {
  if (!ValidMetricName(name)) Invalid("metric name", name);
  const char* t = type == Type::kCounter ? "counter" : type == Type::kGauge ? "gauge" : "histogram";
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += t;
  out_ += '\n';
}

void PrometheusText::Sample(std::string_view name, const PrometheusLabels& labels, double value) {
  if (!ValidMetricName(name)) Invalid("metric name", name);
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!ValidLabelName(k)) Invalid("label name", k);
      if (!first) out_ += ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      out_ += EscapeLabelValue(v);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void PrometheusText::WriteHistogram(std::string_view name, const PrometheusLabels& labels,
                                    const Histogram& h) {
  std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += i < h.counts.size() ? h.counts[i] : 0;
    PrometheusLabels l = labels;
    l.emplace_back("le", i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf");
    Sample(bucket, l, static_cast<double>(cumulative));
  }
  Sample(std::string(name) + "_sum", labels, h.sum);
  Sample(std::string(name) + "_count", labels, static_cast<double>(h.count));
}

}  // namespace cohort
