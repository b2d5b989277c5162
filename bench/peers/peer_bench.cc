#include "bench/peers/peer_bench.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace cohort::bench {
namespace {

std::optional<size_t> ParseOneSize(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return std::nullopt;
  std::string suffix(end);
  if (suffix == "" || suffix == "B") {
  } else if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    value <<= 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    value <<= 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    value <<= 30;
  } else {
    return std::nullopt;
  }
  return static_cast<size_t>(value);
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, sep)) parts.push_back(part);
  return parts;
}

void PrintUsage(const char* prog, const std::string& usage_extra) {
  std::fprintf(stderr,
               "usage: %s [--sizes 1K:256M] [--dtype f32] [--iters N] [--warmup N] [--check]\n"
               "          [--json] [--max-seconds-per-size S]%s\n"
               "Prints nccl-tests' columns: size count type time_us algbw_GBps busbw_GBps wrong.\n"
               "time_us is the mean over iterations of the slowest rank; algbw = size / time;\n"
               "busbw = algbw * 2(n-1)/n. --check counts elements differing from the exact sum.\n",
               prog, usage_extra.c_str());
}

}  // namespace

std::optional<std::string> ParseSizes(const std::string& spec, std::vector<size_t>* sizes) {
  sizes->clear();
  if (spec.find(':') != std::string::npos) {
    std::vector<std::string> parts = Split(spec, ':');
    if (parts.size() < 2 || parts.size() > 3) return "size range must be MIN:MAX[:FACTOR]";
    std::optional<size_t> lo = ParseOneSize(parts[0]);
    std::optional<size_t> hi = ParseOneSize(parts[1]);
    size_t factor = 2;
    if (parts.size() == 3) {
      std::optional<size_t> f = ParseOneSize(parts[2]);
      if (!f || *f < 2) return "size factor must be an integer >= 2";
      factor = *f;
    }
    if (!lo || !hi || *lo == 0 || *lo > *hi) return "bad size range '" + spec + "'";
    for (size_t s = *lo; s <= *hi; s *= factor) sizes->push_back(s);
  } else {
    for (const std::string& part : Split(spec, ',')) {
      std::optional<size_t> s = ParseOneSize(part);
      if (!s || *s == 0) return "bad size '" + part + "'";
      sizes->push_back(*s);
    }
  }
  if (sizes->empty()) return "no sizes in '" + spec + "'";
  for (size_t s : *sizes) {
    if (s % sizeof(float) != 0) {
      return "size " + std::to_string(s) + " is not a multiple of the f32 element size";
    }
  }
  return std::nullopt;
}

std::optional<PeerOptions> ParsePeerOptions(int argc, char** argv,
                                            const std::vector<std::string>& extra_flags,
                                            const std::string& usage_extra, int* exit_code) {
  PeerOptions options;
  std::string size_spec = "1K:256M";
  auto fail = [&](const std::string& message) -> std::optional<PeerOptions> {
    std::fprintf(stderr, "%s: %s\n", argv[0], message.c_str());
    PrintUsage(argv[0], usage_extra);
    *exit_code = 2;
    return std::nullopt;
  };
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    // Accept both "--flag value" and "--flag=value".
    size_t eq = flag.find('=');
    bool has_inline_value = flag.rfind("--", 0) == 0 && eq != std::string::npos;
    if (has_inline_value) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto take_value = [&]() -> bool {
      if (has_inline_value) return true;
      if (i + 1 >= argc) return false;
      value = argv[++i];
      return true;
    };
    auto parse_int = [&](int* out) -> bool {
      if (!take_value()) return false;
      char* end = nullptr;
      long v = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || v < 0 || v > 1000000) return false;
      *out = static_cast<int>(v);
      return true;
    };
    if (flag == "--help" || flag == "-h") {
      PrintUsage(argv[0], usage_extra);
      *exit_code = 0;
      return std::nullopt;
    } else if (flag == "--sizes") {
      if (!take_value()) return fail("--sizes needs a value");
      size_spec = value;
    } else if (flag == "--dtype") {
      if (!take_value()) return fail("--dtype needs a value");
      if (value != "f32" && value != "float") return fail("only --dtype f32 is supported");
    } else if (flag == "--iters") {
      if (!parse_int(&options.iters) || options.iters < 1) return fail("bad --iters");
    } else if (flag == "--warmup") {
      if (!parse_int(&options.warmup)) return fail("bad --warmup");
    } else if (flag == "--check") {
      options.check = true;
    } else if (flag == "--json") {
      options.json = true;
    } else if (flag == "--max-seconds-per-size") {
      if (!take_value()) return fail("--max-seconds-per-size needs a value");
      options.max_seconds_per_size = std::atof(value.c_str());
    } else if (std::find(extra_flags.begin(), extra_flags.end(), flag) != extra_flags.end()) {
      if (!take_value()) return fail(flag + " needs a value");
      options.extra.emplace_back(flag, value);
    } else {
      return fail("unknown flag '" + flag + "'");
    }
  }
  if (std::optional<std::string> error = ParseSizes(size_spec, &options.sizes)) return fail(*error);
  return options;
}

void FillPattern(float* data, size_t count, int rank) {
  const float scale = static_cast<float>(rank + 1);
  for (size_t i = 0; i < count; ++i) data[i] = scale * static_cast<float>(1 + i % 7);
}

int64_t CountWrong(const float* data, size_t count, int nranks) {
  const float scale = static_cast<float>(nranks) * static_cast<float>(nranks + 1) / 2.0f;
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (data[i] != scale * static_cast<float>(1 + i % 7)) ++wrong;
  }
  return wrong;
}

void PrintHeader(const PeerOptions& options, const std::string& impl, int nranks) {
  if (options.json) return;
  std::printf("# %s all-reduce, %d ranks, sum, f32, iters %d, warmup %d\n", impl.c_str(), nranks,
              options.iters, options.warmup);
  std::printf("# %12s %12s %6s %12s %11s %11s %8s  %s\n", "size", "count", "type", "time_us",
              "algbw_GBps", "busbw_GBps", "wrong", "algo");
  std::fflush(stdout);
}

void PrintRow(const PeerOptions& options, const ResultRow& row) {
  const size_t count = row.size / sizeof(float);
  const double algbw = row.time_us > 0 ? static_cast<double>(row.size) / (row.time_us * 1e3) : 0;
  const double busbw =
      row.nranks > 1 ? algbw * 2.0 * (row.nranks - 1) / static_cast<double>(row.nranks) : algbw;
  if (options.json) {
    std::string wrong = row.wrong ? std::to_string(*row.wrong) : "null";
    std::printf(
        "{\"impl\":\"%s\",\"algo\":\"%s\",\"size\":%zu,\"count\":%zu,\"type\":\"float\","
        "\"time_us\":%.3f,\"algbw_GBps\":%.6f,\"busbw_GBps\":%.6f,\"wrong\":%s,\"ranks\":%d,"
        "\"iters\":%d}\n",
        row.impl.c_str(), row.algo.c_str(), row.size, count, row.time_us, algbw, busbw,
        wrong.c_str(), row.nranks, row.iters);
  } else {
    std::string wrong = row.wrong ? std::to_string(*row.wrong) : "N/A";
    std::printf("  %12zu %12zu %6s %12.2f %11.4f %11.4f %8s  %s\n", row.size, count, "float",
                row.time_us, algbw, busbw, wrong.c_str(), row.algo.c_str());
  }
  std::fflush(stdout);
}

int ItersFor(const PeerOptions& options, double seconds_per_op) {
  if (options.max_seconds_per_size <= 0 || seconds_per_op <= 0) return options.iters;
  double fit = std::floor(options.max_seconds_per_size / seconds_per_op);
  return static_cast<int>(std::clamp(fit, 1.0, static_cast<double>(options.iters)));
}

int MoreWarmupFor(const PeerOptions& options, double first_call_seconds) {
  const int rest = std::max(options.warmup - 1, 0);
  if (options.max_seconds_per_size <= 0 || first_call_seconds <= 0) return rest;
  double fit = std::floor(options.max_seconds_per_size / 4 / first_call_seconds);
  return static_cast<int>(std::clamp(fit, 0.0, static_cast<double>(rest)));
}

}  // namespace cohort::bench
