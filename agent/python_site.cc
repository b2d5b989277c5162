#include "agent/python_site.h"

#include <sys/stat.h>

#include <cerrno>

#include "common/file_util.h"

namespace cohort::agent {

const char kSitecustomizePy[] =
    R"py(# Cohort's agent puts this directory first on the PYTHONPATH of the replicas it starts
# (agent/python_site.h): every Python process of a job registers faulthandler on
# COHORT_STACK_DUMP_SIGNAL, so that `cohort stacks` and the hang watchdog can show where its
# threads are. Then the sitecustomize module this one hides runs, as it would have. A pool's env
# COHORT_PYTHON_STACKS: "0" keeps this directory off PYTHONPATH.
import os as _os
import sys as _sys

_cohort_stack_file = None


def _cohort_register():
    global _cohort_stack_file
    directory = _os.environ.get("COHORT_STACK_DUMP_DIR")
    signum = _os.environ.get("COHORT_STACK_DUMP_SIGNAL")
    if not directory or not signum:
        return
    try:
        import faulthandler
        try:
            _os.makedirs(directory)
        except OSError:
            pass
        path = _os.path.join(directory, "python-%d.txt" % _os.getpid())
        _cohort_stack_file = open(path, "a", 1)
        faulthandler.register(int(signum), file=_cohort_stack_file, all_threads=True,
                              chain=False)
    except Exception:
        _cohort_stack_file = None


def _cohort_run_hidden():
    here = _os.path.dirname(_os.path.abspath(__file__))
    try:
        import importlib.machinery
        import importlib.util
    except ImportError:
        return
    path = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_cohort_register()
_cohort_run_hidden()
)py";

StatusOr<std::string> InstallPythonSite(const std::string& work_dir) {
  const std::string dir = work_dir + "/.python-site";
  const std::string path = dir + "/sitecustomize.py";
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir " + dir, errno);
  }
  ::chmod(dir.c_str(), 0755);
  if (auto was = ReadFileToString(path, "sitecustomize"); was.ok() && *was == kSitecustomizePy) {
    return dir;
  }
  COHORT_RETURN_IF_ERROR(ReplaceFile(path, kSitecustomizePy, 0644));
  return dir;
}

}  // namespace cohort::agent
