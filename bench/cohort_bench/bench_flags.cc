#include "bench/cohort_bench/bench_flags.h"

#include <charconv>
#include <cstdio>
#include <optional>

#include "bench/common/size_args.h"

namespace cohort::bench {

bool ParseBenchFlags(const std::vector<std::string>& args, const char* program,
                     const std::vector<BenchFlag>& flags, bool* help) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return true;
    }
    std::optional<std::string> value;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    const BenchFlag* flag = nullptr;
    for (const BenchFlag& f : flags) {
      if (f.name == a) flag = &f;
    }
    if (flag == nullptr) {
      std::fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", program, a.c_str());
      return false;
    }
    if (!flag->is_switch && !value) {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "%s: %s needs a value\n", program, a.c_str());
        return false;
      }
      value = args[++i];
    }
    if ((flag->is_switch && value) || !flag->set(value.value_or(""))) {
      std::fprintf(stderr, "%s: bad value for %s: '%s'\n", program, a.c_str(),
                   value.value_or("").c_str());
      return false;
    }
  }
  return true;
}

bool CheckSweepAndRank(const char* program, const std::string& sizes, std::vector<size_t>* sweep,
                       int rank, const std::string& bootstrap) {
  if (auto e = ParseSizeSweep(sizes, sweep)) {
    std::fprintf(stderr, "%s: bad --sizes '%s': %s (want e.g. 1K:256M or 64M)\n", program,
                 sizes.c_str(), e->c_str());
    return false;
  }
  if ((rank >= 0) != !bootstrap.empty()) {
    std::fprintf(stderr, "%s: --rank and --bootstrap go together\n", program);
    return false;
  }
  return true;
}

std::function<bool(const std::string&)> IntAtLeast(int* out, int min) {
  return [out, min](const std::string& s) {
    int v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min) return false;
    *out = v;
    return true;
  };
}

std::function<bool(const std::string&)> OneOf(std::string* out, std::vector<std::string> allowed) {
  return [out, allowed = std::move(allowed)](const std::string& s) {
    bool ok = allowed.empty();
    for (const auto& a : allowed) ok = ok || s == a;
    if (ok) *out = s;
    return ok;
  };
}

}  // namespace cohort::bench
