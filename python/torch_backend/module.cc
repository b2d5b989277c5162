// cohort.torch._C: the Python face of the `cohort` torch.distributed backend. cohort/torch/
// __init__.py registers the backend with a creator that calls _create; `python3 -m
// cohort.torch.reducer` runs a Reducer. The rendezvous and the reducer block: both release the
// GIL while they wait.
#include <pybind11/functional.h>
#include <torch/python.h>

#include <chrono>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "python/torch_backend/process_group_cohort.h"
#include "python/torch_backend/torch_reducer.h"

namespace py = pybind11;

namespace cohort::torch_backend {
namespace {

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

c10::intrusive_ptr<ProcessGroupCohort> CreateProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s,
    bool default_group, const Config& config) {
  py::gil_scoped_release release;
  return ProcessGroupCohort::Create(store, rank, size, Milliseconds(timeout_s), default_group,
                                    config);
}

}  // namespace
}  // namespace cohort::torch_backend

PYBIND11_MODULE(_C, m) {
  using cohort::torch_backend::ProcessGroupCohort;
  using cohort::torch_backend::TorchReducer;
  m.doc() = "The cohort torch.distributed backend (C++ side); use `import cohort.torch`.";
  // The base class must be registered (by torch) before ours names it.
  py::module_::import("torch.distributed");

  py::class_<ProcessGroupCohort, cohort::torch_backend::BackendBase,
             c10::intrusive_ptr<ProcessGroupCohort>>(m, "ProcessGroupCohort")
      .def("describe", &ProcessGroupCohort::Describe)
      .def_property_readonly("num_reducers", &ProcessGroupCohort::num_reducers)
      .def("shutdown", &ProcessGroupCohort::Shutdown,
           "Runs what is queued and closes the communicator; later operations raise.")
      .def("abort", &ProcessGroupCohort::Abort, py::call_guard<py::gil_scoped_release>(),
           "Fails the operation in flight and those queued at once, without waiting for the "
           "peers, and closes the communicator; later operations raise.")
      .def("register_abort_hook", &ProcessGroupCohort::registerAbortHook, py::arg("hook_id"),
           py::arg("hook"),
           "hook() runs once when the group gives up: in abort(), or when an operation first "
           "fails or times out (before its error is raised). Registering an id again replaces it.")
      .def("unregister_abort_hook", &ProcessGroupCohort::unregisterAbortHook, py::arg("hook_id"))
#if !COHORT_TORCH_HAS_ERROR_TYPE
      // Newer torch binds Backend.get_error() (an ErrorType), which reaches getError.
      .def("get_error", &ProcessGroupCohort::ErrorTypeName,
           "\"SUCCESS\" while the group runs; why it gave up: \"TIMEOUT\", \"REMOTE_ERROR\" (a "
           "peer gone or failed) or \"COMM_ERROR\" (any other failure, or an abort)")
#endif
      .def(
          "set_timeout",
          [](ProcessGroupCohort& pg, const py::object& timeout) {
            // A datetime.timedelta, as torch.distributed.set_timeout takes, or seconds.
            double seconds = py::hasattr(timeout, "total_seconds")
                                 ? timeout.attr("total_seconds")().cast<double>()
                                 : timeout.cast<double>();
            pg.setTimeout(cohort::torch_backend::Milliseconds(seconds));
          },
          py::arg("timeout"),
          "The timeout (a timedelta, or seconds) of the operations issued from now on.");

  // cohort.torch.Options as the C++ side takes it (process_group_cohort.h, Config).
  using cohort::torch_backend::Config;
  py::class_<Config>(m, "Config")
      .def(py::init([](int num_reducers, std::string algorithm, size_t chunk_bytes, int check_calls,
                       std::string wire_dtype, int overlap) {
             return Config{num_reducers, std::move(algorithm),  chunk_bytes,
                           check_calls,  std::move(wire_dtype), overlap};
           }),
           py::arg("num_reducers"), py::arg("algorithm"), py::arg("chunk_bytes"),
           py::arg("check_calls"), py::arg("wire_dtype"), py::arg("overlap"));
  m.def("_create", &cohort::torch_backend::CreateProcessGroup, py::arg("store"), py::arg("rank"),
        py::arg("size"), py::arg("timeout_s"), py::arg("default_group"), py::arg("config"));

  py::class_<TorchReducer>(m, "Reducer")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int index, double timeout_s,
                       double rejoin_s) {
             py::gil_scoped_release release;
             return std::make_unique<TorchReducer>(store, index,
                                                   cohort::torch_backend::Milliseconds(timeout_s),
                                                   cohort::torch_backend::Milliseconds(rejoin_s));
           }),
           py::arg("store"), py::arg("index"), py::arg("timeout_s"), py::arg("rejoin_s"))
      .def("start", &TorchReducer::Start)
      .def("stop", &TorchReducer::Stop)
      .def("store_gone", &TorchReducer::StoreGone)
      .def(
          "join",
          [](TorchReducer& r, double seconds) {
            py::gil_scoped_release release;
            return r.Join(cohort::torch_backend::Milliseconds(seconds));
          },
          py::arg("seconds"))
      .def_property_readonly(
          "error",
          [](const TorchReducer& r) { return r.status().ok() ? "" : r.status().ToString(); })
      .def_property_readonly("sessions", &TorchReducer::sessions);
}
