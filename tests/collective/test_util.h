// Helpers for the collective tests: deterministic inputs per (rank, index), a double-precision
// reference, tolerance per data type, and N ranks as threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collective/kernels/reduce.h"
#include "collective/transport/transport.h"
#include "collective/types.h"
#include "common/status.h"

namespace cohort::collective::testing {

// A Transport that hands everything to `base`: test doubles derive from it and override what they
// change (IsendNotice is Transport's default: it goes through this Isend).
class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(Transport& base) : base_(base) {}
  int rank() const override { return base_.rank(); }
  int size() const override { return base_.size(); }
  std::string name() const override { return "forwarding(" + base_.name() + ")"; }
  const Placement& placement() const override { return base_.placement(); }
  StatusOr<Request> Isend(int peer, Tag tag, ConstBytes data) override {
    return base_.Isend(peer, tag, data);
  }
  StatusOr<Request> Irecv(int peer, Tag tag, MutableBytes data) override {
    return base_.Irecv(peer, tag, data);
  }
  StatusOr<int> Probe(Tag tag, Deadline deadline) override { return base_.Probe(tag, deadline); }
  int gone_peer() const override { return base_.gone_peer(); }
  bool peer_gone(int peer) const override { return base_.peer_gone(peer); }
  void Cancel() override { base_.Cancel(); }

 private:
  Transport& base_;
};

inline constexpr DataType kAllTypes[] = {DataType::kF32,  DataType::kF64, DataType::kF16,
                                         DataType::kBF16, DataType::kI32, DataType::kI64};

// The ops the reference below covers that reduce `type`: sum, avg, min, max, and for the integer
// types the bitwise ones. (kProduct needs inputs of its own: ProductInputValue.)
inline std::vector<ReduceOp> OpsFor(DataType type) {
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax};
  if (IsInteger(type)) {
    ops.insert(ops.end(), {ReduceOp::kBitwiseAnd, ReduceOp::kBitwiseOr, ReduceOp::kBitwiseXor});
  }
  return ops;
}

// Value of element i on rank r, as a double that is exactly representable in every type
// (integers in [-48, 48] or multiples of 1/4 up to +-24.75 for floats).
inline double InputValue(DataType type, int r, size_t i) {
  const uint64_t h =
      (static_cast<uint64_t>(i) * 2654435761u + static_cast<uint64_t>(r) * 40503u + 17) % 1000003;
  if (IsInteger(type)) return static_cast<double>(static_cast<int64_t>(h % 97) - 48);
  return (static_cast<double>(h % 199) - 99) * 0.25;
}

inline void Store(DataType type, void* base, size_t i, double v) {
  SetElementFromDouble(type, base, i, v);
}

inline double Load(DataType type, const void* base, size_t i) {
  return ElementAsDouble(type, base, i);
}

inline std::vector<char> MakeInput(DataType type, int rank, size_t count) {
  std::vector<char> buf(count * DataTypeSize(type) + 1);
  for (size_t i = 0; i < count; ++i) Store(type, buf.data(), i, InputValue(type, rank, i));
  return buf;
}

// Reference result of element i over n ranks, computed in double from the values each rank
// actually holds (after rounding to the type).
inline double Reference(DataType type, ReduceOp op, int n, size_t i) {
  std::vector<char> one(8);
  double acc = 0;
  for (int r = 0; r < n; ++r) {
    Store(type, one.data(), 0, InputValue(type, r, i));
    const double v = Load(type, one.data(), 0);
    if (r == 0) {
      acc = v;
    } else if (op == ReduceOp::kMin) {
      acc = std::min(acc, v);
    } else if (op == ReduceOp::kMax) {
      acc = std::max(acc, v);
    } else if (IsBitwise(op)) {  // integers only, |v| <= 48: exact in a double
      const auto a = static_cast<int64_t>(acc), b = static_cast<int64_t>(v);
      acc = static_cast<double>(op == ReduceOp::kBitwiseAnd  ? (a & b)
                                : op == ReduceOp::kBitwiseOr ? (a | b)
                                                             : (a ^ b));
    } else {
      acc += v;
    }
  }
  if (op == ReduceOp::kAvg) {
    if (IsInteger(type)) return std::trunc(acc / n);
    return acc / n;
  }
  return acc;
}

// Allowed |got - reference| for element i: exact for integers and min/max, else a few ulps of
// the type per reduction step, relative to the sum of magnitudes.
inline double Tolerance(DataType type, ReduceOp op, int n) {
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) return 0;
  switch (type) {
    case DataType::kI32:
    case DataType::kI64:
      return 0;
    case DataType::kF64:
      return 1e-12 * n * 25;
    case DataType::kF32:
      return 1e-6 * n * 25;
    case DataType::kF16:
      return std::ldexp(1.0, -10) * (n + 1) * 25 * n;
    case DataType::kBF16:
      return std::ldexp(1.0, -7) * (n + 1) * 25 * n;
  }
  return 0;
}

// Checks every element; returns "" or a description of the first mismatch.
inline std::string CheckResult(DataType type, ReduceOp op, int n, const void* data, size_t count) {
  const double tol = Tolerance(type, op, n);
  for (size_t i = 0; i < count; ++i) {
    const double want = Reference(type, op, n, i);
    const double got = Load(type, data, i);
    if (!(std::fabs(got - want) <= tol)) {
      return "element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " +
             std::to_string(want) + " (tolerance " + std::to_string(tol) + ")";
    }
  }
  return "";
}

// kProduct's inputs: element i on rank r is one of -2, -1, -0.5, 0.5, 1, 2 (integers: -2, -1, 1,
// 2), so every product over up to 13 ranks is a power of two that every type holds exactly.
inline double ProductInputValue(DataType type, int r, size_t i) {
  const uint64_t h =
      (static_cast<uint64_t>(i) * 2654435761u + static_cast<uint64_t>(r) * 40503u + 5) % 1000003;
  static constexpr double kFloat[] = {-2, -1, -0.5, 0.5, 1, 2};
  static constexpr double kInt[] = {-2, -1, 1, 2};
  if (IsInteger(type)) return kInt[h % 4];
  return kFloat[h % 6];
}

inline std::vector<char> MakeProductInput(DataType type, int rank, size_t count) {
  std::vector<char> buf(count * DataTypeSize(type) + 1);
  for (size_t i = 0; i < count; ++i) Store(type, buf.data(), i, ProductInputValue(type, rank, i));
  return buf;
}

// The exact product of element i over n ranks.
inline double ProductReference(DataType type, int n, size_t i) {
  double p = 1;
  for (int r = 0; r < n; ++r) p *= ProductInputValue(type, r, i);
  return p;
}

// Runs fn(rank) on `n` threads and joins them.
// One worker's all-reduce call in the agreement tests.
struct AllreduceCall {
  std::string name;  // what differs from the common call, for failure messages
  size_t count = 0;
  DataType type = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  // As errors quote it: "1000 f32 (sum)".
  std::string Quoted() const {
    return std::to_string(count) + " " + std::string(DataTypeName(type)) + " (" +
           std::string(ReduceOpName(op)) + ")";
  }
};

// The calls an odd worker makes against a common call of `count` f32 (sum): one element more,
// another type of the same size, another op, and with `empty`, no elements.
inline std::vector<AllreduceCall> OddCalls(size_t count, bool empty) {
  std::vector<AllreduceCall> calls = {{"count", count + 1, DataType::kF32, ReduceOp::kSum},
                                      {"type", count, DataType::kI32, ReduceOp::kSum},
                                      {"op", count, DataType::kF32, ReduceOp::kMax}};
  if (empty) calls.push_back({"empty", 0, DataType::kF32, ReduceOp::kSum});
  return calls;
}

// Empty when `s`, worker `worker`'s outcome where worker `odd` called `variant` and every other
// worker `common`, is the disagreement every worker must see: kInvalidArgument quoting a call that
// differs from its own (the odd worker's, for the others) and its own; else what it was.
inline std::string DisagreementProblem(const Status& s, int worker, int odd,
                                       const AllreduceCall& common, const AllreduceCall& variant) {
  const AllreduceCall& mine = worker == odd ? variant : common;
  const AllreduceCall& theirs = worker == odd ? common : variant;
  const std::string& m = s.message();
  const bool named =
      worker == odd || m.find("worker " + std::to_string(odd) + " called") != std::string::npos;
  if (s.code() == StatusCode::kInvalidArgument &&
      m.find("the workers disagree") != std::string::npos &&
      m.find(" called " + theirs.Quoted() + ", this worker " + mine.Quoted()) !=
          std::string::npos &&
      named) {
    return "";
  }
  return s.ToString();
}

inline void RunRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// One all-reduce by worker `worker` of `count` elements at `data`, in place.
using AllreduceFn =
    std::function<Status(int worker, void* data, size_t count, DataType type, ReduceOp op)>;

// Every type and op at each of `counts` on `n` worker threads: each worker reduces its input, then
// a copy of it again. Returns the failures: an error, a result off the double-precision reference,
// a repeat with other bytes, workers whose bytes differ.
inline std::vector<std::string> CheckEveryCase(int n, const std::vector<size_t>& counts,
                                               const AllreduceFn& allreduce) {
  std::mutex mu;
  std::vector<std::string> failures;
  std::map<std::string, std::vector<char>> first_result;
  RunRanks(n, [&](int w) {
    const std::string who = "worker " + std::to_string(w) + " ";
    for (DataType type : kAllTypes) {
      for (ReduceOp op : OpsFor(type)) {
        for (size_t count : counts) {
          const std::string name = std::string(DataTypeName(type)) + "/" +
                                   std::string(ReduceOpName(op)) + "/" + std::to_string(count);
          std::vector<char> a = MakeInput(type, w, count);
          std::vector<char> b = a;
          Status s = allreduce(w, a.data(), count, type, op);
          if (s.ok()) s = allreduce(w, b.data(), count, type, op);
          std::lock_guard<std::mutex> lock(mu);
          if (!s.ok()) {
            failures.push_back(who + name + ": " + s.ToString());
            return;
          }
          const std::string bad = CheckResult(type, op, n, a.data(), count);
          if (!bad.empty()) failures.push_back(who + name + ": " + bad);
          if (a != b) failures.push_back(who + name + ": repeat differs");
          auto [it, inserted] = first_result.emplace(name, a);
          if (!inserted && it->second != a)
            failures.push_back(name + ": workers disagree bit-wise");
        }
      }
    }
  });
  return failures;
}

}  // namespace cohort::collective::testing
