#include "common/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/env.h"

namespace cohort {
namespace {

namespace po = boost::program_options;
using ::testing::HasSubstr;

// An agent-like daemon's options, bound to variables.
struct DaemonFlags {
  std::string coordinator;
  int cpus = 0;
  std::string work_dir = "/var/lib/x";
  FlagDuration grace = FlagDuration::Seconds(30);
  bool insecure = false;
  std::vector<std::string> labels;
  std::string log_level = "info";

  po::options_description Describe() {
    po::options_description d("daemon options");
    d.add_options()("coordinator", po::value(&coordinator), "coordinator endpoint")(
        "cpus", po::value(&cpus)->default_value(cpus), "CPUs to offer")(
        "work-dir", po::value(&work_dir)->default_value(work_dir), "work dir")(
        "grace-period", po::value(&grace)->default_value(grace), "SIGTERM-to-SIGKILL grace")(
        "insecure", po::bool_switch(&insecure), "plaintext ZeroMQ")(
        "label", po::value(&labels)->composing(), "node label (repeatable)")(
        "log.level", po::value(&log_level)->default_value(log_level), "log level");
    return d;
  }
};

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cohort_config_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  StatusOr<CommandLine> Parse(DaemonFlags& flags, std::vector<std::string> args,
                              std::ostream* help = nullptr) {
    std::vector<const char*> argv = {"cohort-test"};
    for (const auto& a : args) argv.push_back(a.c_str());
    po::options_description desc = flags.Describe();
    return ParseFlags(static_cast<int>(argv.size()), argv.data(), desc,
                      "usage: cohort-test [options]", help);
  }

  std::filesystem::path dir_;
};

TEST_F(ConfigTest, FlagsOnly) {
  DaemonFlags f;
  auto cl = Parse(f, {"--coordinator", "tcp://h:7401", "--cpus=4", "--grace-period", "1500ms",
                      "--insecure", "--label", "a", "--label", "b"});
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_FALSE(cl->help);
  EXPECT_EQ(cl->config_file, "");
  EXPECT_EQ(f.coordinator, "tcp://h:7401");
  EXPECT_EQ(f.cpus, 4);
  EXPECT_EQ(f.grace.value, std::chrono::milliseconds(1500));
  EXPECT_TRUE(f.insecure);
  EXPECT_EQ(f.labels, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.work_dir, "/var/lib/x");  // default kept
  EXPECT_EQ(cl->values["cpus"].as<int>(), 4);
}

TEST_F(ConfigTest, DefaultsWithNoArguments) {
  DaemonFlags f;
  auto cl = Parse(f, {});
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_EQ(f.grace.value, std::chrono::seconds(30));
  EXPECT_FALSE(f.insecure);
  EXPECT_TRUE(cl->values["cpus"].defaulted());
}

TEST_F(ConfigTest, ConfigFileAndCommandLinePrecedence) {
  std::string path = WriteFile("agent.conf",
                               "# a comment\n"
                               "; another\n"
                               "coordinator = tcp://from-file:7401\n"
                               "cpus = 4\n"
                               "  work-dir =   /srv/work   # inline comment\n"
                               "grace-period = 10s\n"
                               "insecure = true\n"
                               "label = x\n"
                               "label = y\n"
                               "\n"
                               "[log]\n"
                               "level = \"debug # not a comment\"\n");
  DaemonFlags f;
  auto cl = Parse(f, {"--config", path, "--cpus", "8", "--label", "cli"});
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_EQ(cl->config_file, path);
  EXPECT_EQ(f.cpus, 8);  // the command line wins
  EXPECT_EQ(f.coordinator, "tcp://from-file:7401");
  EXPECT_EQ(f.work_dir, "/srv/work");
  EXPECT_EQ(f.grace.value, std::chrono::seconds(10));
  EXPECT_TRUE(f.insecure);
  EXPECT_EQ(f.labels, (std::vector<std::string>{"cli", "x", "y"}));  // composing: merged
  EXPECT_EQ(f.log_level, "debug # not a comment");
  EXPECT_FALSE(cl->values["work-dir"].defaulted());
}

TEST_F(ConfigTest, UnknownCommandLineOption) {
  DaemonFlags f;
  auto cl = Parse(f, {"--bogus", "1"});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(cl.status().message(), HasSubstr("--bogus"));
}

TEST_F(ConfigTest, BadCommandLineValuesNameTheOption) {
  DaemonFlags f;
  auto cl = Parse(f, {"--cpus", "many"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("--cpus"));
  EXPECT_THAT(cl.status().message(), HasSubstr("many"));
  cl = Parse(f, {"--grace-period", "soon"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("--grace-period"));
  EXPECT_THAT(cl.status().message(), HasSubstr("not a duration"));
  cl = Parse(f, {"--cpus"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("--cpus"));
}

// Boost puts the value in place of "%value%" in its message while the message holds one: a value
// holding it itself never came back (the daemon hung at its start). It is refused like any other,
// its '%' shown as U+FF05; a single '%' as it is.
TEST_F(ConfigTest, AValueHoldingBoostsOwnPlaceholdersIsRefusedNotLoopedOn) {
  DaemonFlags f;
  const std::string fullwidth = "\uFF05";
  auto cl = Parse(f, {"--cpus", "%value%"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(),
              HasSubstr("('" + fullwidth + "value" + fullwidth + "') for option '--cpus'"));
  cl = Parse(f, {"--grace-period", "%canonical_option%"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("not a duration"));
  cl = Parse(f, {"--%option%"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("option"));
  cl = Parse(f, {"--cpus", "50%"});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("('50%')"));
  cl = Parse(f, {"--config", WriteFile("p.conf", "cpus = 1%value%2\n")});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("p.conf:1:"));
  EXPECT_THAT(cl.status().message(), HasSubstr("1" + fullwidth + "value" + fullwidth + "2"));
}

TEST_F(ConfigTest, UnknownOptionInFileNamesFileAndLine) {
  std::string path = WriteFile("bad.conf", "cpus = 2\n\ncpu = 3\n");
  DaemonFlags f;
  auto cl = Parse(f, {"--config", path});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(cl.status().message(), HasSubstr(path + ":3: unknown option 'cpu'"));
}

TEST_F(ConfigTest, BadValuesInFileNameFileLineAndOption) {
  // Each case: a config file's name and text, and what the error must say.
  struct Case {
    std::string file, text;
    std::vector<std::string> says;
  };
  const Case cases[] = {
      {"a.conf", "cpus = 2\ncpus2 = 1\n", {":2: unknown option 'cpus2'"}},
      {"b.conf", "work-dir = /x\ncpus = lots\n", {"b.conf:2:", "cpus"}},
      {"c.conf", "grace-period = 3 weeks\n", {"c.conf:1:", "grace-period"}},
      {"d.conf", "insecure = perhaps\n", {"d.conf:1:"}},
      {"e.conf", "cpus 4\n", {"e.conf:1: expected 'name = value'"}},
      {"f.conf", "cpus = 1\ncpus = 2\n", {"f.conf:2: option 'cpus' is given more than once"}},
      {"g.conf", "[log\nlevel = x\n", {"g.conf:1: unterminated section header"}},
  };
  DaemonFlags f;
  for (const Case& c : cases) {
    auto cl = Parse(f, {"--config", WriteFile(c.file, c.text)});
    ASSERT_FALSE(cl.ok()) << c.file;
    for (const std::string& part : c.says) EXPECT_THAT(cl.status().message(), HasSubstr(part));
  }
}

TEST_F(ConfigTest, UnreadableConfigFile) {
  DaemonFlags f;
  std::string missing = (dir_ / "missing.conf").string();
  auto cl = Parse(f, {"--config", missing});
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(cl.status().message(), HasSubstr(missing));
  // A directory opens but cannot be read as a file.
  cl = Parse(f, {"--config", dir_.string()});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr(dir_.string()));
}

TEST_F(ConfigTest, HelpPrintsUsageAndStops) {
  DaemonFlags f;
  std::ostringstream help;
  // --help wins even with a config file that does not exist.
  auto cl = Parse(f, {"--help", "--config", "/nonexistent/file"}, &help);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_TRUE(cl->help);
  EXPECT_THAT(help.str(), HasSubstr("usage: cohort-test [options]"));
  EXPECT_THAT(help.str(), HasSubstr("--grace-period"));
  EXPECT_THAT(help.str(), HasSubstr("(=30s)"));  // the default, as a duration
  EXPECT_THAT(help.str(), HasSubstr("--config"));
}

TEST_F(ConfigTest, DescriptionsWithTheirOwnHelpAndConfig) {
  std::string config;
  bool help = false;
  int n = 1;
  po::options_description d("own");
  d.add_options()("help,h", po::bool_switch(&help), "help")("config", po::value(&config),
                                                            "config file")("n", po::value(&n), "n");
  std::string path = WriteFile("own.conf", "n = 5\n");
  std::vector<const char*> argv = {"x", "--config", path.c_str()};
  std::ostringstream out;
  auto cl = ParseFlags(3, argv.data(), d, "usage: x", &out);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_FALSE(cl->help);
  EXPECT_EQ(n, 5);
  EXPECT_EQ(config, path);

  std::vector<const char*> argv2 = {"x", "-h"};
  cl = ParseFlags(2, argv2.data(), d, "usage: x", &out);
  ASSERT_TRUE(cl.ok());
  EXPECT_TRUE(cl->help);
  EXPECT_THAT(out.str(), HasSubstr("usage: x"));
}

TEST_F(ConfigTest, RequiredOptionsAndPositionals) {
  std::string coordinator;
  std::vector<std::string> files;
  po::options_description d("tool");
  d.add_options()("coordinator", po::value(&coordinator)->required(), "endpoint")(
      "file", po::value(&files), "input files");
  po::positional_options_description pos;
  pos.add("file", -1);
  std::vector<const char*> argv = {"tool", "a.yaml", "b.yaml"};
  auto cl = ParseFlags(3, argv.data(), d, "usage: tool", nullptr, &pos);
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(cl.status().message(), HasSubstr("coordinator"));

  std::string path = WriteFile("tool.conf", "coordinator = tcp://c:1\n");
  std::vector<const char*> argv2 = {"tool", "a.yaml", "--config", path.c_str(), "b.yaml"};
  cl = ParseFlags(5, argv2.data(), d, "usage: tool", nullptr, &pos);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_EQ(coordinator, "tcp://c:1");  // a required option may come from the file
  EXPECT_EQ(files, (std::vector<std::string>{"a.yaml", "b.yaml"}));
}

TEST_F(ConfigTest, ParseConfigTextDirectly) {
  int a = 0;
  po::options_description d;
  d.add_options()("a", po::value(&a), "a");
  po::variables_map vm;
  ASSERT_TRUE(ParseConfigText("a = 7", "inline", d, &vm).ok());  // no trailing newline
  po::notify(vm);
  EXPECT_EQ(a, 7);
  po::variables_map vm2;
  Status st = ParseConfigText("\n\nb = 1\n", "inline", d, &vm2);
  EXPECT_THAT(st.message(), HasSubstr("inline:3: unknown option 'b'"));
  po::variables_map vm3;
  EXPECT_TRUE(ParseConfigText("", "empty", d, &vm3).ok());
}

TEST(FlagDurationTest, FormatDuration) {
  using namespace std::chrono;
  EXPECT_EQ(FormatDuration(seconds(10)), "10s");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(minutes(30)), "30m");
  EXPECT_EQ(FormatDuration(hours(12)), "12h");
  EXPECT_EQ(FormatDuration(hours(24 * 7)), "7d");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(seconds(90)), "90s");
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

TEST(IntFromEnvironmentTest, ParsesFallsBackAndNamesTheVariable) {
  setenv("COHORT_TEST_INT", "42", 1);
  EXPECT_EQ(*IntFromEnvironment("COHORT_TEST_INT", std::nullopt), 42);
  setenv("COHORT_TEST_INT", "", 1);
  EXPECT_EQ(*IntFromEnvironment("COHORT_TEST_INT", 7), 7);
  auto missing = IntFromEnvironment("COHORT_TEST_INT", std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "environment variable COHORT_TEST_INT is not set");
  for (const char* bad : {"-1", "12x", "x", "99999999999"}) {
    setenv("COHORT_TEST_INT", bad, 1);
    auto parsed = IntFromEnvironment("COHORT_TEST_INT", 7);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(std::string("COHORT_TEST_INT='") + bad + "'"),
              std::string::npos);
  }
  unsetenv("COHORT_TEST_INT");
}

}  // namespace
}  // namespace cohort
