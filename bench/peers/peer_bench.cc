#include "bench/peers/peer_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/common/json_line.h"
#include "bench/common/size_args.h"

namespace cohort::bench {
namespace {

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
  if (std::optional<std::string> error = ParseSizeSweep(size_spec, &options.sizes))
    return fail(*error);
  for (size_t s : options.sizes) {
    if (s % sizeof(float) != 0) {
      return fail("size " + std::to_string(s) + " is not a multiple of the f32 element size");
    }
  }
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
    JsonLine line;
    line["impl"] = row.impl;
    line["algo"] = row.algo;
    line["size"] = row.size;
    line["count"] = count;
    line["type"] = "float";
    line["time_us"] = RoundTo(row.time_us, 3);
    line["algbw_GBps"] = RoundTo(algbw, 6);
    line["busbw_GBps"] = RoundTo(busbw, 6);
    line["wrong"] = row.wrong ? JsonLine(*row.wrong) : JsonLine(nullptr);
    line["ranks"] = row.nranks;
    line["iters"] = row.iters;
    PrintJsonLine(line);
    return;
  }
  const std::string wrong = row.wrong ? std::to_string(*row.wrong) : "N/A";
  std::printf("  %12zu %12zu %6s %12.2f %11.4f %11.4f %8s  %s\n", row.size, count, "float",
              row.time_us, algbw, busbw, wrong.c_str(), row.algo.c_str());
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
