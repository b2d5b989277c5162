// Vertex AI CustomJob files as Vertex users have them, submitted unchanged with `cohort submit` to
// a local coordinator and agent: an image whose ENTRYPOINT runs the trainer (the job gives only
// args), every replica in a real container (an OCI image layout made with umoci, run with runc or
// crun), the image's ENTRYPOINT with the job's args in place of its CMD, with its rank; and a
// training application package (pythonPackageSpec) installed and run on every replica.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/cluster_test.h"
#include "tests/testing/oci_image.h"

namespace cohort::testing {
namespace {

namespace fs = std::filesystem;

class VertexContainerJobTest : public ClusterTest {
 protected:
  // An image layout `layout`:latest of busybox whose ENTRYPOINT echoes the rank and its
  // arguments, and whose CMD is --default.
  static void MakeImage(const TempDir& dir, const std::string& layout) {
    MakeBusyboxImage(dir.path(), layout, {"echo"},
                     {"/bin/sh", "-c", "echo \"rank=$RANK args=$*\"", "entry"}, {"--default"});
  }
};

TEST_F(VertexContainerJobTest, AGcloudConfigRunsTheImagesEntrypointWithTheJobsArgsOnEveryReplica) {
  if (!NeedBinaries({COHORT_CLI_BIN})) return;
  if (std::string why = WhyNoContainers(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("cohort-vertex");
  const std::string layout = dir.Join("trainer");
  ASSERT_NO_FATAL_FAILURE(MakeImage(dir, layout));
  ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("vertex")}));
  // As `gcloud ai custom-jobs describe --format=json` writes a job (int64 counts as strings).
  const std::string file = dir.Join("custom_job.json");
  std::ofstream(file) << R"({"displayName": "vertex e2e", "jobSpec": {
    "workerPoolSpecs": [
      {"replicaCount": "1", "machineSpec": {"machineType": "n1-standard-4"},
       "containerSpec": {"imageUri": ")"
                      << layout
                      << R"x(", "args": ["--epochs=2", "--lr=0.1", "--world=$(WORLD_SIZE)"]}},
      {"replicaCount": "1", "machineSpec": {"machineType": "n1-standard-4"},
       "containerSpec": {"imageUri": ")x"
                      << layout << R"("}}],
    "baseOutputDirectory": {"outputUriPrefix": ")"
                      << dir.Join("out") << R"("}}})";
  RunResult submit = RunCli({"submit", file, "--wait"}, std::chrono::seconds(120));
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  const std::string name = submit.out.substr(0, submit.out.find('\n'));
  EXPECT_EQ(name.rfind("vertex-e2e-", 0), 0u) << name;
  EXPECT_NE(submit.err.find("cohort: note: Vertex jobSpec.workerPoolSpecs[0].machineSpec."
                            "machineType: ignored 'n1-standard-4'"),
            std::string::npos)
      << submit.err;
  // The chief: the ENTRYPOINT with the job's args, $(VAR) expanded from the replica's env (as
  // Kubernetes does); the worker, which gives none: with the CMD.
  RunResult chief = RunCli({"logs", name, "--replica", "chief-0"});
  EXPECT_NE(chief.out.find("rank=0 args=--epochs=2 --lr=0.1 --world=2"), std::string::npos)
      << chief.out;
  RunResult worker = RunCli({"logs", name, "--replica", "worker-0"});
  EXPECT_NE(worker.out.find("rank=1 args=--default"), std::string::npos) << worker.out;
}

// A Vertex "training application package" job: a real sdist made with setuptools, named by a
// pythonPackageSpec whose executor is a Vertex prebuilt image, so that each replica runs on the
// node's python3 (Debian's: the job's PATH says so), which installs the package with pip (no
// index) into the attempt's directory and runs its module with the job's args, env and rank.
class VertexPythonPackageJobTest : public ClusterTest {};

TEST_F(VertexPythonPackageJobTest, AnSdistIsInstalledAndItsModuleRunsOnEveryReplica) {
  if (!NeedBinaries({COHORT_CLI_BIN})) return;
  RunResult tools = RunProcess("/usr/bin/python3", {"-c", "import setuptools, wheel, pip"});
  if (tools.exit_code != 0) {
    GTEST_SKIP() << "Debian's python3 lacks pip, setuptools or wheel (scripts/install-deps.sh): "
                 << tools.err;
  }
  TempDir dir("cohort-vertex-pkg");
  const std::string src = dir.Join("src");
  fs::create_directories(src + "/trainer");
  std::ofstream(src + "/setup.py")
      << "from setuptools import setup\n"
         "setup(name='trainer', version='0.1', packages=['trainer'])\n";
  std::ofstream(src + "/trainer/__init__.py") << "";
  std::ofstream(src + "/trainer/task.py")
      << "import os, sys, trainer\n"
         "print('rank=%s mode=%s args=%s' % (os.environ['RANK'], os.environ['MODE'],\n"
         "      ' '.join(sys.argv[1:])))\n"
         "print('from ' + trainer.__file__)\n";
  // `python3 setup.py -q sdist -d PKGS` in src.
  RunResult sdist = RunProcess(
      "/usr/bin/python3",
      {"-c",
       "import os, sys; os.chdir(sys.argv[1]); sys.argv = ['setup.py', '-q', 'sdist', '-d', "
       "sys.argv[2]]; exec(open('setup.py').read())",
       src, dir.Join("pkgs")});
  ASSERT_EQ(sdist.exit_code, 0) << sdist.err;
  const std::string package = dir.Join("pkgs/trainer-0.1.tar.gz");
  ASSERT_TRUE(fs::exists(package));
  ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("vertex-pkg")}));
  const std::string file = dir.Join("package_job.yaml");
  std::ofstream(file) << "workerPoolSpecs:\n"
                         "  - replicaCount: 1\n"
                         "    pythonPackageSpec: &package\n"
                         "      executorImageUri: "
                         "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest\n"
                         "      packageUris: ["
                      << package
                      << "]\n"
                         "      pythonModule: trainer.task\n"
                         "      args: [--epochs=2]\n"
                         "      env: [{name: MODE, value: fast}, {name: PATH, value: "
                         "/usr/bin:/bin}]\n"
                         "  - replicaCount: 1\n"
                         "    pythonPackageSpec: *package\n"
                         "baseOutputDirectory: {outputUriPrefix: "
                      << dir.Join("out") << "}\n";
  RunResult submit = RunCli({"submit", file, "--wait"}, std::chrono::seconds(120));
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  const std::string name = submit.out.substr(0, submit.out.find('\n'));
  EXPECT_NE(submit.err.find("pythonPackageSpec.executorImageUri: "
                            "'us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest' "
                            "is a Vertex prebuilt image"),
            std::string::npos)
      << submit.err;
  for (const auto& [replica, rank] : {std::pair{"chief-0", "0"}, std::pair{"worker-0", "1"}}) {
    // The job succeeded when the chief exited: the worker's last lines may still be on their way.
    const std::string ran = std::string("rank=") + rank + " mode=fast args=--epochs=2";
    RunResult logs;
    EXPECT_TRUE(WaitUntil(
        [&] {
          logs = RunCli({"logs", name, "--replica", replica});
          return logs.out.find(ran) != std::string::npos &&
                 logs.out.find("/trainer/__init__.py") != std::string::npos;
        },
        std::chrono::seconds(20), std::chrono::milliseconds(200)))
        << logs.out;
    EXPECT_NE(logs.out.find("Successfully installed trainer-0.1"), std::string::npos) << logs.out;
    // The package came from the attempt's own install, not from anywhere on the node.
    EXPECT_NE(logs.out.find("/" + std::string(replica) +
                            "/attempt-0/python-packages/trainer/__init__.py"),
              std::string::npos)
        << logs.out;
  }
}

}  // namespace
}  // namespace cohort::testing
