#include "agent/oci_launcher.h"

#include <linux/magic.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/captured_command.h"
#include "agent/cgroup.h"
#include "agent/container_replica.h"
#include "agent/inventory.h"
#include "agent/replica_env.h"
#include "common/file_util.h"
#include "common/gpu_visibility.h"
#include "common/logging.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string FindExecutable(const std::string& name) {
  std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  if (const char* env = std::getenv("PATH")) path = std::string(env) + ":" + path;
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A host device node to expose in the container, if it exists as a character device.
std::optional<json> DeviceNode(const std::string& host_path, const std::string& container_path) {
  struct stat st;
  if (::stat(host_path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return std::nullopt;
  return json{{"path", container_path},
              {"type", "c"},
              {"major", major(st.st_rdev)},
              {"minor", minor(st.st_rdev)},
              {"fileMode", 0666},
              {"uid", 0},
              {"gid", 0}};
}

// The limits a container gets of the agent's own, soft and hard alike at the agent's hard limit
// (systemd raises them: LimitNOFILE, LimitMEMLOCK=infinity). A runtime's defaults (a memlock of
// 64 KiB or 8 MiB) would fail NCCL's and UCX's RDMA memory registration.
struct HostLimit {
  const char* oci;     // the bundle's rlimits type
  const char* docker;  // docker's and podman's --ulimit name
  int resource;
};
constexpr HostLimit kHostLimits[] = {{"RLIMIT_NOFILE", "nofile", RLIMIT_NOFILE},
                                     {"RLIMIT_MEMLOCK", "memlock", RLIMIT_MEMLOCK}};

// The agent's hard limit of `resource`; UINT64_MAX: unlimited.
uint64_t HardLimit(int resource) {
  struct rlimit limit;
  ::getrlimit(resource, &limit);
  return limit.rlim_max == RLIM_INFINITY ? UINT64_MAX : limit.rlim_max;
}

json HostRlimits() {
  json rlimits = json::array();
  for (const HostLimit& l : kHostLimits) {
    const uint64_t hard = HardLimit(l.resource);
    rlimits.push_back({{"type", l.oci}, {"hard", hard}, {"soft", hard}});
  }
  return rlimits;
}

bool HasCdiGpuSpec() {
  for (const char* dir : {"/etc/cdi", "/var/run/cdi"}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("nvidia.com/gpu") != std::string::npos) return true;
    }
  }
  return false;
}

// The names of the pinned GPUs (a MIG device's UUID), and their device nodes under /dev, as the
// agent gave them (LaunchRequest), else by index.
std::vector<std::string> VisibleNames(const LaunchRequest& request) {
  return request.visible_gpus.empty() ? VisibleGpuNames({}, request.gpus) : request.visible_gpus;
}
std::vector<std::string> GpuNodes(const LaunchRequest& request) {
  return request.gpu_device_nodes.empty() ? GpuDeviceNodes({}, request.gpus)
                                          : request.gpu_device_nodes;
}

// The replica's environment inside the container: the agent's rendering, with the visibility of
// the pinned GPUs, which also tells the NVIDIA container runtime what to mount.
std::map<std::string, std::string> ContainerEnv(const LaunchRequest& request) {
  std::map<std::string, std::string> env = request.env;
  SetGpuVisibility(VisibleNames(request), &env);
  return env;
}

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr uint64_t kMaxImageConfigBytes = 16 << 20;
constexpr char kImageCommandEntry[] = "cohort-image-command.json";

// The JSON object in `file` (`named` in errors); null where there is no such file. Read as root:
// a link (to a file of the node's), a FIFO or anything but a regular file is refused, as is a
// file over 16 MiB or one that is not a JSON object.
StatusOr<json> ReadJsonObjectFile(const fs::path& file, const std::string& named) {
  struct stat st {};
  StatusOr<int> opened = OpenRegularFile(file.string(), named, &st);
  if (opened.status().code() == StatusCode::kNotFound) return json();
  if (!opened.ok()) return FailedPrecondition(opened.status().message());
  UniqueFd fd(*opened);
  if (static_cast<uint64_t>(st.st_size) > kMaxImageConfigBytes) {
    return FailedPrecondition(named + " is larger than 16 MiB");
  }
  std::string text;
  COHORT_RETURN_IF_ERROR(ReadAt(fd.get(), 0, kMaxImageConfigBytes, &text, "read " + named));
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return FailedPrecondition(named + " is not a JSON object");
  }
  return parsed;
}

// The member `key` of `value` where it is an object holding one; null otherwise (what a hostile
// file holds in its place is never a reason to throw).
json Member(const json& value, const char* key) {
  if (!value.is_object()) return json();
  const auto it = value.find(key);
  return it == value.end() ? json() : *it;
}

// The strings of a JSON array (none for null, as an image config's absent Cmd is).
StatusOr<std::vector<std::string>> StringArray(const json& value, const std::string& named) {
  std::vector<std::string> strings;
  if (value.is_null()) return strings;
  if (!value.is_array()) return FailedPrecondition(named + " is not an array");
  for (const json& item : value) {
    const std::string* text = item.get_ptr<const std::string*>();
    if (text == nullptr) {
      return FailedPrecondition(named + " holds " + item.dump().substr(0, 80) + ", not a string");
    }
    strings.push_back(*text);
  }
  return strings;
}

// The JSON object an image layout holds under `digest` ("sha256:<hex>"): its
// blobs/<algorithm>/<hex>.
StatusOr<json> ReadLayoutBlob(const std::string& layout_dir, const json& digest) {
  const std::string* text = digest.get_ptr<const std::string*>();
  const size_t colon = text == nullptr ? std::string::npos : text->find(':');
  auto plain = [](const std::string& part) {
    return !part.empty() && part.front() != '.' &&
           std::all_of(part.begin(), part.end(), [](char c) {
             return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '.' ||
                    c == '_' || c == '-' || c == '=';
           });
  };
  if (colon == std::string::npos || !plain(text->substr(0, colon)) ||
      !plain(text->substr(colon + 1))) {
    return FailedPrecondition("image layout " + layout_dir + ": digest " +
                              digest.dump().substr(0, 80) + " is not algorithm:hex");
  }
  const fs::path blob =
      fs::path(layout_dir) / "blobs" / text->substr(0, colon) / text->substr(colon + 1);
  COHORT_ASSIGN_OR_RETURN(
      json parsed, ReadJsonObjectFile(blob, "image layout " + layout_dir + ": blob " + *text));
  if (parsed.is_null()) {
    return FailedPrecondition("image layout " + layout_dir + " lacks the blob " + *text);
  }
  return parsed;
}

// WriteImageCommand, a failure said in the log: the image's process.args then all count as CMD.
void SplitImageCommand(const std::string& image, const std::string& layout_dir,
                       const std::string& bundle) {
  if (Status split = WriteImageCommand(layout_dir, bundle); !split.ok()) {
    spdlog::warn(
        "image {}: its ENTRYPOINT and CMD are not told apart, so container.args alone "
        "replace both: {}",
        image, split.message());
  }
}

std::vector<std::string> Joined(std::vector<std::string> first,
                                const std::vector<std::string>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

// OCI process.user: the run_as account's uid, gid and groups; root without one.
json ProcessUser(const std::optional<RunAs>& run_as) {
  if (!run_as) return {{"uid", 0}, {"gid", 0}};
  json user = {{"uid", run_as->uid}, {"gid", run_as->gid}};
  json groups = json::array();
  for (gid_t g : run_as->groups) {
    if (g != run_as->gid) groups.push_back(g);
  }
  if (!groups.empty()) user["additionalGids"] = groups;
  return user;
}

// The job's output directory: the parent of AIP_MODEL_DIR ("<base>[/<trial>]/model/").
std::string OutputDir(const std::map<std::string, std::string>& env) {
  auto it = env.find("AIP_MODEL_DIR");
  if (it == env.end() || it->second.empty()) return "";
  fs::path model(it->second);
  if (!model.has_filename()) model = model.parent_path();
  return model.parent_path().string();
}

}  // namespace

StatusOr<ImageConfig> ReadImageConfig(const std::string& rootfs) {
  ImageConfig image;
  const fs::path root(rootfs);
  if (root.filename() != "rootfs") return image;  // a bare root filesystem: no config
  const fs::path file = root.parent_path() / "config.json";
  const std::string named = "the image's " + file.string();
  COHORT_ASSIGN_OR_RETURN(const json config, ReadJsonObjectFile(file, named));
  const auto process = config.find("process");
  if (process == config.end() || !process->is_object()) return image;
  if (const auto cwd = process->find("cwd"); cwd != process->end()) {
    const std::string* dir = cwd->get_ptr<const std::string*>();
    if (dir == nullptr || dir->empty() || dir->front() != '/' ||
        dir->find_first_of(",:\\") != std::string::npos || dir->find("/../") != std::string::npos ||
        (dir->size() >= 3 && dir->compare(dir->size() - 3, 3, "/..") == 0)) {
      return FailedPrecondition(named + ": process.cwd " + cwd->dump().substr(0, 80) +
                                " is not an absolute path without ',', ':' or '..'");
    }
    if (*dir != "/") image.cwd = *dir;
  }
  if (const auto args = process->find("args"); args != process->end()) {
    COHORT_ASSIGN_OR_RETURN(image.cmd, StringArray(*args, named + ": process.args"));
  }
  // ENTRYPOINT and CMD apart, where the launcher read them from the image's layout.
  const fs::path split_file = root.parent_path() / kImageCommandEntry;
  const std::string split_named = "the image's " + split_file.string();
  COHORT_ASSIGN_OR_RETURN(const json split, ReadJsonObjectFile(split_file, split_named));
  if (!split.is_null()) {
    COHORT_ASSIGN_OR_RETURN(std::vector<std::string> entrypoint,
                            StringArray(Member(split, "entrypoint"), split_named + ": entrypoint"));
    COHORT_ASSIGN_OR_RETURN(std::vector<std::string> cmd,
                            StringArray(Member(split, "cmd"), split_named + ": cmd"));
    // Else the config was rewritten since: all of it is CMD.
    if (Joined(entrypoint, cmd) == image.cmd) {
      image.entrypoint = std::move(entrypoint);
      image.cmd = std::move(cmd);
    }
  }
  const auto vars = process->find("env");
  if (vars == process->end()) return image;
  if (!vars->is_array()) return FailedPrecondition(named + ": process.env is not an array");
  for (const json& var : *vars) {
    const std::string* text_var = var.get_ptr<const std::string*>();
    const size_t eq = text_var == nullptr ? std::string::npos : text_var->find('=');
    if (eq == std::string::npos || eq == 0) {
      return FailedPrecondition(named + ": process.env holds " + var.dump().substr(0, 80) +
                                ", not a KEY=VALUE string");
    }
    image.env[text_var->substr(0, eq)] = text_var->substr(eq + 1);
  }
  return image;
}

Status WriteImageCommand(const std::string& layout_dir, const std::string& bundle) {
  const fs::path unpacked_file = fs::path(bundle) / "umoci.json";
  COHORT_ASSIGN_OR_RETURN(const json unpacked,
                          ReadJsonObjectFile(unpacked_file, unpacked_file.string()));
  if (unpacked.is_null()) return FailedPrecondition(unpacked_file.string() + " is missing");
  const json walk = Member(Member(unpacked, "from_descriptor_path"), "descriptor_walk");
  if (!walk.is_array() || walk.empty() || !walk.back().is_object()) {
    return FailedPrecondition(unpacked_file.string() + " names no manifest");
  }
  COHORT_ASSIGN_OR_RETURN(const json manifest,
                          ReadLayoutBlob(layout_dir, Member(walk.back(), "digest")));
  COHORT_ASSIGN_OR_RETURN(const json image,
                          ReadLayoutBlob(layout_dir, Member(Member(manifest, "config"), "digest")));
  const std::string named = "the image config of " + layout_dir;
  const json process = Member(image, "config");
  if (!process.is_null() && !process.is_object()) {
    return FailedPrecondition(named + ": config is not an object");
  }
  auto field = [&](const char* name) {
    return StringArray(Member(process, name), named + ": config." + name);
  };
  COHORT_ASSIGN_OR_RETURN(const std::vector<std::string> entrypoint, field("Entrypoint"));
  COHORT_ASSIGN_OR_RETURN(const std::vector<std::string> cmd, field("Cmd"));
  const json split = {{"entrypoint", entrypoint}, {"cmd", cmd}};
  return ReplaceFile((fs::path(bundle) / kImageCommandEntry).string(), split.dump());
}

StatusOr<std::vector<std::string>> ContainerArgv(const LaunchRequest& request,
                                                 const ImageConfig& image) {
  std::vector<std::string> argv;
  if (!request.container_command) {
    // An older coordinator's: the job's command and args joined, or neither for the image's.
    argv = request.argv.empty() ? Joined(image.entrypoint, image.cmd) : request.argv;
  } else if (const auto& given = *request.container_command; !given.command.empty()) {
    argv = Joined(given.command, given.args);
  } else {
    argv = Joined(image.entrypoint, given.args.empty() ? image.cmd : given.args);
  }
  if (argv.empty()) {
    return InvalidArgument("container.command is required: the image " + request.image +
                           " names no ENTRYPOINT or CMD");
  }
  return argv;
}

bool CanBeOverlayUpper(const std::string& dir) {
  constexpr decltype(statfs::f_type) kOverlayfsMagic = 0x794c7630;
  struct statfs fs_info {};
  return ::statfs(dir.c_str(), &fs_info) != 0 || fs_info.f_type != kOverlayfsMagic;
}

Status MakeImageWorkdir(const LaunchRequest& request, const ImageConfig& image) {
  if (image.cwd.empty() || request.working_dir.empty()) return Status::Ok();
  const std::string upper = request.working_dir + "/" + kImageWorkdirEntry;
  COHORT_RETURN_IF_ERROR(MakeDirs(upper));
  COHORT_RETURN_IF_ERROR(MakeDirs(request.working_dir + "/" + kOverlayWorkEntry));
  if (request.run_as && ::chown(upper.c_str(), request.run_as->uid, request.run_as->gid) != 0) {
    return ErrnoStatus("chown " + upper + " to " + request.run_as->account, errno);
  }
  return Status::Ok();
}

bool HostHasHybridCgroups() {
  std::ifstream mounts("/proc/self/mounts");
  std::string device, mount_point, type, rest;
  bool v1 = false, v2_nested = false;
  while (mounts >> device >> mount_point >> type && std::getline(mounts, rest)) {
    if (type == "cgroup") v1 = true;
    if (type == "cgroup2" && mount_point != "/sys/fs/cgroup") v2_nested = true;
  }
  return v1 && v2_nested;
}

int HostCgroupVersion() {
  struct statfs fs;
  return ::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC ? 2 : 1;
}

std::string ContainerIdPrefix(const std::string& tag) {
  return "cohort-" + (tag.empty() ? "" : tag + "-");
}

std::string ContainerId(const std::string& tag, const std::string& job, const std::string& replica,
                        int attempt) {
  std::string id = ContainerIdPrefix(tag) + job + "-" + replica + "-" + std::to_string(attempt);
  for (char& c : id) {
    if (!ContainerIdChar(c)) c = '_';
  }
  return id;
}

std::string OciLauncher::IdOf(const LaunchRequest& request) const {
  return ContainerId(options_.container_tag, request.job, request.replica, request.attempt);
}

StatusOr<std::unique_ptr<OciLauncher>> OciLauncher::Create(OciOptions options,
                                                           ProcessLauncher* processes) {
  bool hybrid = HostHasHybridCgroups();
  std::vector<std::string> candidates;
  if (options.runtime == "auto") {
    candidates = hybrid ? std::vector<std::string>{"runc", "crun"}
                        : std::vector<std::string>{"crun", "runc"};
  } else if (options.runtime == "runc" || options.runtime == "crun" ||
             options.runtime == "docker" || options.runtime == "podman") {
    candidates = {options.runtime};
  } else {
    return InvalidArgument("container runtime '" + options.runtime +
                           "' is not one of auto, runc, crun, docker, podman");
  }
  for (const auto& name : candidates) {
    std::string path = FindExecutable(name);
    if (path.empty()) continue;
    bool hide = name == "crun" && hybrid;
    if (hide) {
      spdlog::info("hybrid cgroups: running crun with the cgroup2 mount hidden");
    }
    std::string unshare = FindExecutable("unshare");
    if (hide && unshare.empty()) {
      return FailedPrecondition("crun on a hybrid-cgroup host needs unshare (util-linux)");
    }
    if (options.cgroup_version == 0) options.cgroup_version = HostCgroupVersion();
    return std::unique_ptr<OciLauncher>(
        new OciLauncher(std::move(options), processes, name, path, hide, unshare));
  }
  std::string names;
  for (const auto& n : candidates) names += (names.empty() ? "" : " or ") + n;
  return FailedPrecondition("no container runtime found: install " + names);
}

std::vector<std::string> OciLauncher::RuntimeArgv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv;
  if (hide_cgroup2_) {
    // A private mount namespace in which /sys/fs/cgroup/unified is unmounted: crun then sees a
    // pure cgroup v1 host. The mount is hidden only for this command.
    std::string command = "umount -l /sys/fs/cgroup/unified 2>/dev/null; exec \"$0\" \"$@\"";
    argv = {unshare_path_, "--mount", "--propagation", "private",
            "/bin/sh",     "-c",      command,         runtime_path_};
  } else {
    argv = {runtime_path_};
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

StatusOr<OciLauncher::ImageLocation> OciLauncher::LocateImage(const std::string& image) const {
  if (image.empty()) return InvalidArgument("container.image is empty");
  fs::path path(image);
  std::error_code ec;
  std::string tag;
  auto colon = image.rfind(':');
  if (!fs::exists(path, ec) && colon != std::string::npos) {
    tag = image.substr(colon + 1);
    path = image.substr(0, colon);
  }
  ImageLocation location;
  if (fs::exists(path / "index.json", ec) && fs::exists(path / "oci-layout", ec)) {
    // An OCI image layout: unpacked once per (layout, tag).
    std::string key =
        std::to_string(std::hash<std::string>{}(fs::absolute(path).string() + ":" + tag));
    location.layout = path.string() + (tag.empty() ? "" : ":" + tag);
    location.layout_dir = path.string();
    location.bundle = (fs::path(options_.cache_dir) / key).string();
    return location;
  }
  if (fs::is_directory(path / "rootfs", ec)) {
    location.rootfs = fs::absolute(path / "rootfs").string();
  } else if (fs::is_directory(path / "bin", ec) || fs::is_directory(path / "usr", ec)) {
    location.rootfs = fs::absolute(path).string();
  } else {
    return InvalidArgument("container.image " + image +
                           " is neither a root filesystem directory nor an OCI image layout");
  }
  return location;
}

StatusOr<std::string> OciLauncher::ResolveRootfs(const std::string& image) const {
  COHORT_ASSIGN_OR_RETURN(ImageLocation location, LocateImage(image));
  if (location.layout.empty()) return location.rootfs;
  std::error_code ec;
  fs::path rootfs = fs::path(location.bundle) / "rootfs";
  if (!fs::is_directory(rootfs, ec)) {
    return FailedPrecondition("image " + image + " is an OCI image layout not unpacked into " +
                              location.bundle);
  }
  return rootfs.string();
}

Status OciLauncher::Prepare(const LaunchRequest& request) {
  const std::string id = IdOf(request);
  std::vector<std::string> argv;
  if (cli()) {
    argv = CliRunArgv(request, id);  // the CLI pulls the image
  } else {
    COHORT_ASSIGN_OR_RETURN(ImageLocation location, LocateImage(request.image));
    if (!location.layout.empty()) COHORT_RETURN_IF_ERROR(Unpack(request.image, location));
    COHORT_ASSIGN_OR_RETURN(std::string rootfs, ResolveRootfs(request.image));
    COHORT_ASSIGN_OR_RETURN(ImageConfig image, ReadImageConfig(rootfs));
    COHORT_RETURN_IF_ERROR(MakeImageWorkdir(request, image));
    COHORT_ASSIGN_OR_RETURN(std::string config, BundleConfig(request, rootfs, std::move(image)));
    fs::path bundle = fs::path(request.working_dir) / kBundleEntry;
    std::error_code ec;
    fs::create_directories(bundle, ec);
    if (ec) return Internal("create bundle " + bundle.string() + ": " + ec.message());
    {
      std::ofstream out(bundle / "config.json", std::ios::trunc);
      out << config;
      if (!out) return Internal("write " + (bundle / "config.json").string());
    }
    argv = RuntimeArgv({"run", "--bundle", bundle.string(), id});
  }
  COHORT_RETURN_IF_ERROR(RemoveLeftover(id).status());
  std::lock_guard<std::mutex> lock(prepared_mu_);
  prepared_[id] = std::move(argv);
  return Status::Ok();
}

void OciLauncher::Forget(const LaunchRequest& request) {
  std::lock_guard<std::mutex> lock(prepared_mu_);
  prepared_.erase(IdOf(request));
}

size_t OciLauncher::prepared_count() {
  std::lock_guard<std::mutex> lock(prepared_mu_);
  return prepared_.size();
}

StatusOr<bool> OciLauncher::RemoveLeftover(const std::string& id) {
  // On the container's lane: after whatever an earlier Release of the same id queued.
  auto deleted = std::make_shared<std::promise<CapturedCommand>>();
  std::future<CapturedCommand> done = deleted->get_future();
  if (!commands_->Enqueue(
          id,
          RuntimeCommand(cli() ? std::vector<std::string>{"rm", "-f", id}
                               : std::vector<std::string>{"delete", "--force", id}),
          [deleted](const CapturedCommand& run) { deleted->set_value(run); },
          /*coalesce=*/false)) {
    return Cancelled("container " + id + ": the agent is shutting down");
  }
  while (done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    if (cancelled_) return Cancelled("container " + id + ": the agent is shutting down");
  }
  CapturedCommand run = done.get();
  if (run.cancelled) return Cancelled("container " + id + ": the agent is shutting down");
  // Not fatal: a container still there makes the run fail, naming it.
  if (run.exit_code != 0 && !RuntimeSaysGone(run.output)) {
    spdlog::warn("container {}: removing a leftover: {}{}", id, run.timed_out ? "timed out: " : "",
                 run.output);
    return false;
  }
  return true;
}

StatusOr<int> OciLauncher::SweepLeftovers(const std::set<std::string>& keep) {
  if (options_.container_tag.empty()) return 0;
  CaptureOptions list;
  list.timeout = options_.command_timeout;
  list.max_output = 16 << 20;
  const CapturedCommand listed = RunCaptured(
      RuntimeCommand(cli() ? std::vector<std::string>{"ps", "--all", "--format", "{{.Names}}"}
                           : std::vector<std::string>{"list", "--quiet"}),
      list);
  if (listed.exit_code != 0) {
    return Unavailable(runtime_ + (cli() ? " ps" : " list") + " " +
                       (listed.timed_out ? "timed out" : "failed") + ": " +
                       listed.output.substr(0, 400));
  }
  const std::string mine = ContainerIdPrefix(options_.container_tag);
  int removed = 0;
  std::istringstream ids(listed.output);
  for (std::string id; std::getline(ids, id);) {
    if (id.rfind(mine, 0) != 0 || keep.count(id) > 0) continue;
    COHORT_ASSIGN_OR_RETURN(bool gone, RemoveLeftover(id));
    if (!gone) continue;  // said why
    spdlog::warn("container {}: left by an earlier run of this agent; removed", id);
    ++removed;
  }
  return removed;
}

void OciLauncher::CancelPrepares() { cancelled_ = true; }

OciLauncher::~OciLauncher() { commands_->Shutdown(options_.shutdown_drain); }

Status OciLauncher::Unpack(const std::string& image, const ImageLocation& location) {
  std::shared_ptr<std::mutex> image_mu;
  {
    std::lock_guard<std::mutex> lock(unpacks_mu_);
    auto& slot = unpacks_[location.bundle];
    if (!slot) slot = std::make_shared<std::mutex>();
    image_mu = slot;
  }
  std::lock_guard<std::mutex> lock(*image_mu);  // a second attempt waits for the first's unpack
  std::error_code ec;
  if (fs::is_directory(fs::path(location.bundle) / "rootfs", ec)) {
    // Unpacked by an agent that did not yet read the ENTRYPOINT and CMD apart.
    if (!fs::exists(fs::path(location.bundle) / kImageCommandEntry, ec)) {
      SplitImageCommand(image, location.layout_dir, location.bundle);
    }
    return Status::Ok();
  }
  if (cancelled_) return Cancelled("image " + image + ": the agent is shutting down");
  std::string umoci = FindExecutable("umoci");
  if (umoci.empty()) {
    return FailedPrecondition("image " + image + " is an OCI image layout: install umoci");
  }
  fs::create_directories(options_.cache_dir, ec);
  std::string staging = location.bundle + ".tmp";
  fs::remove_all(staging, ec);
  spdlog::info("image {}: unpacking into {}", image, location.bundle);
  CaptureOptions options;
  options.hidden_from_reaper = true;  // this runs beside the agent loop, which reaps children
  options.cancel = &cancelled_;
  CapturedCommand unpacked =
      RunCaptured({umoci, "unpack", "--image", location.layout, staging}, options);
  if (unpacked.exit_code != 0 || unpacked.cancelled) {
    fs::remove_all(staging, ec);
    if (unpacked.cancelled)
      return Cancelled("umoci unpack " + image + ": the agent is shutting down");
    return FailedPrecondition("umoci unpack " + image + ": " + unpacked.output);
  }
  SplitImageCommand(image, location.layout_dir, staging);
  fs::rename(staging, location.bundle, ec);
  if (ec) {
    Status failed = Internal("rename " + staging + ": " + ec.message());
    fs::remove_all(staging, ec);
    return failed;
  }
  return Status::Ok();
}

StatusOr<std::string> OciLauncher::BundleConfig(const LaunchRequest& request,
                                                const std::string& rootfs) const {
  COHORT_ASSIGN_OR_RETURN(ImageConfig image, ReadImageConfig(rootfs));
  return BundleConfig(request, rootfs, std::move(image));
}

StatusOr<std::string> OciLauncher::BundleConfig(const LaunchRequest& request,
                                                const std::string& rootfs,
                                                ImageConfig image) const {
  COHORT_ASSIGN_OR_RETURN(const std::vector<std::string> argv, ContainerArgv(request, image));
  // The image's own environment (its ENV), under the replica's; a PATH when neither has one; the
  // agent's sitecustomize first on PYTHONPATH, above the image's or the job's.
  std::map<std::string, std::string> vars = std::move(image.env);
  for (auto& [key, value] : ContainerEnv(request)) vars[key] = std::move(value);
  vars.try_emplace("PATH", kDefaultPath);
  const auto opted_out = vars.find("COHORT_PYTHON_STACKS");
  const bool python_site =
      !request.python_site.empty() && (opted_out == vars.end() || opted_out->second != "0");
  if (python_site) {
    std::string& path = vars["PYTHONPATH"];
    path = path.empty() ? request.python_site : request.python_site + ":" + path;
  }
  json env = json::array();
  for (const auto& [key, value] : vars) env.push_back(key + "=" + value);

  json capabilities = {"CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FOWNER",
                       "CAP_FSETID",  "CAP_KILL",         "CAP_SETGID",
                       "CAP_SETUID",  "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE",
                       "CAP_NET_RAW", "CAP_SYS_CHROOT",   "CAP_AUDIT_WRITE",
                       "CAP_SETFCAP", "CAP_MKNOD"};
  json process = {
      {"terminal", false},
      {"user", ProcessUser(request.run_as)},
      {"args", argv},
      {"env", env},
      {"cwd", !image.cwd.empty()            ? image.cwd
              : request.working_dir.empty() ? "/"
                                            : request.working_dir},
      {"capabilities",
       {{"bounding", capabilities}, {"effective", capabilities}, {"permitted", capabilities}}},
      {"rlimits", HostRlimits()},
      {"noNewPrivileges", true},
  };

  json mounts = json::array();
  auto mount = [&mounts](const std::string& destination, const std::string& type,
                         const std::string& source, const std::vector<std::string>& options) {
    json entry = {{"destination", destination}, {"type", type}, {"source", source}};
    if (!options.empty()) entry["options"] = options;
    mounts.push_back(std::move(entry));
  };
  mount("/proc", "proc", "proc", {});
  mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"});
  mount("/dev/pts", "devpts", "devpts",
        {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"});
  mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=8g"});
  mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"});
  mount("/sys", "bind", "/sys", {"rbind", "nosuid", "noexec", "nodev", "ro"});
  mount("/tmp", "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=1777"});
  auto bind = [&mount](const std::string& path, bool read_only) {
    std::vector<std::string> options = {"rbind", "rprivate"};
    if (read_only) options.push_back("ro");
    mount(path, "bind", path, options);
  };
  std::error_code ec;
  for (const char* file : {"/etc/hosts", "/etc/resolv.conf"}) {
    if (fs::exists(file, ec)) bind(file, true);
  }
  std::string output_dir = OutputDir(request.env);
  if (!output_dir.empty()) {
    COHORT_RETURN_IF_ERROR(MakeOutputDirs(request.env, request.run_as));
    COHORT_RETURN_IF_ERROR(MakeDirsOwnedBy(output_dir, request.run_as));
    bind(output_dir, false);
  }
  if (!request.working_dir.empty() && request.working_dir != output_dir) {
    bind(request.working_dir, false);
  }
  if (python_site) bind(request.python_site, true);
  // The image's WORKDIR, writable as under docker: an overlay whose writes go to the attempt's
  // image-workdir (an empty one where the image lacks the directory).
  if (!image.cwd.empty() && !request.working_dir.empty()) {
    const std::string upper = request.working_dir + "/" + kImageWorkdirEntry;
    // Resolved on the host: a symbolic link in the image that leads out of its root (/app ->
    // /etc) must not show the node's files, so such a WORKDIR counts as missing.
    std::error_code ec;
    const fs::path real_root = fs::canonical(rootfs, ec);
    const fs::path real_lower = ec ? fs::path() : fs::canonical(rootfs + image.cwd, ec);
    const fs::path inside = real_lower.lexically_relative(real_root);
    const std::string lower = real_lower.string();
    if (!ec && !inside.empty() && *inside.begin() != ".." && fs::is_directory(real_lower, ec)) {
      if (!CanBeOverlayUpper(request.working_dir)) {
        // An agent whose work dir is itself on overlayfs (inside a container): the WORKDIR is
        // the cwd, read-only like the rest of the root.
        spdlog::warn(
            "{}: the image's WORKDIR {} stays read-only: {} is on overlayfs, which "
            "cannot hold an overlay's upper directory",
            request.job + "/" + request.replica, image.cwd, request.working_dir);
      } else if (lower.find_first_of(",:\\") != std::string::npos ||
                 upper.find_first_of(",:\\") != std::string::npos) {
        return FailedPrecondition("the image's root " + rootfs + " or the working directory " +
                                  request.working_dir + " holds ',', ':' or '\\'");
      } else {
        mount(image.cwd, "overlay", "overlay",
              {"lowerdir=" + lower, "upperdir=" + upper,
               "workdir=" + request.working_dir + "/" + kOverlayWorkEntry});
      }
    } else {
      mount(image.cwd, "bind", upper, {"rbind", "rprivate"});
    }
  }

  // GPUs: the pinned nodes and the control nodes; the node's RDMA devices; nothing else.
  json devices = json::array();
  json device_rules = json::array({{{"allow", false}, {"access", "rwm"}}});
  auto add_device = [&](const std::string& name) {
    auto node = DeviceNode(options_.device_dir + "/" + name, "/dev/" + name);
    if (!node) return false;
    device_rules.push_back({{"allow", true},
                            {"type", "c"},
                            {"major", (*node)["major"]},
                            {"minor", (*node)["minor"]},
                            {"access", "rwm"}});
    devices.push_back(std::move(*node));
    return true;
  };
  for (const std::string& gpu_node : GpuNodes(request)) {
    if (!add_device(gpu_node)) {
      spdlog::warn("container {}: no device node {} in {}", request.replica, gpu_node,
                   options_.device_dir);
    }
  }
  if (!request.gpus.empty()) {
    for (const char* control : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
      add_device(control);
    }
  }
  if (options_.rdma) {
    for (const std::string& rdma : RdmaDevices(options_.device_dir)) add_device(rdma);
  }

  json resources = {{"devices", device_rules}, {"pids", {{"limit", kReplicaPidsLimit}}}};
  if (request.memory_mb > 0) resources["memory"] = {{"limit", request.memory_mb << 20}};
  // Its weight (see "CPUs" in the header): v1's shares, or v2's cpu.weight as process replicas get.
  if (request.cpus > 0 && options_.cgroup_version == 2) {
    resources["unified"] = {{"cpu.weight", std::to_string(CpuWeight(request.cpus))}};
  } else if (request.cpus > 0) {
    resources["cpu"] = {{"shares", int64_t{request.cpus} * 1024}};
  }
  if (request.cpus > 0 && request.cpu_quota) {
    resources["cpu"]["quota"] = int64_t{request.cpus} * 100000;
    resources["cpu"]["period"] = 100000;
  }

  json config = {
      {"ociVersion", "1.0.2"},
      {"process", process},
      {"root", {{"path", rootfs}, {"readonly", true}}},
      {"hostname", "cohort"},
      {"mounts", mounts},
      {"linux",
       {{"namespaces",
         {{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}}},
        {"devices", devices},
        {"resources", resources},
        {"cgroupsPath", "/cohort/" + IdOf(request)},
        {"maskedPaths",
         {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}},
        {"readonlyPaths",
         {"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
          "/proc/sysrq-trigger"}}}},
  };
  try {
    return config.dump(2);
  } catch (const json::exception& e) {  // a path or value not UTF-8, which JSON cannot carry
    return FailedPrecondition("the container's OCI config cannot be written: " +
                              std::string(e.what()));
  }
}

std::vector<std::string> OciLauncher::CliRunArgv(const LaunchRequest& request,
                                                 const std::string& container_id) const {
  std::vector<std::string> argv = {runtime_path_, "run",  "--rm",  "--name", container_id,
                                   "--network",   "host", "--ipc", "host",   "--init"};
  for (const auto& [key, value] : ContainerEnv(request)) {
    argv.push_back("--env");
    argv.push_back(key + "=" + value);
  }
  if (request.run_as) {
    argv.push_back("--user");
    argv.push_back(std::to_string(request.run_as->uid) + ":" + std::to_string(request.run_as->gid));
    for (gid_t g : request.run_as->groups) {
      if (g != request.run_as->gid) argv.push_back("--group-add=" + std::to_string(g));
    }
  }
  std::string output_dir = OutputDir(request.env);
  if (!output_dir.empty()) {
    argv.push_back("--volume");
    argv.push_back(output_dir + ":" + output_dir);
  }
  // The attempt's files (flight recorder, error file) at the paths its environment names.
  if (!request.working_dir.empty() && request.working_dir != output_dir) {
    argv.push_back("--volume");
    argv.push_back(request.working_dir + ":" + request.working_dir);
  }
  if (request.memory_mb > 0) argv.push_back("--memory=" + std::to_string(request.memory_mb) + "m");
  // Its weight (see "CPUs" in the header): podman's crun would convert shares by its own curve.
  if (request.cpus > 0 && runtime_ == "podman" && options_.cgroup_version == 2) {
    argv.push_back("--cgroup-conf=cpu.weight=" + std::to_string(CpuWeight(request.cpus)));
  } else if (request.cpus > 0) {
    argv.push_back("--cpu-shares=" + std::to_string(request.cpus * 1024));
  }
  if (request.cpus > 0 && request.cpu_quota) {
    argv.push_back("--cpus=" + std::to_string(request.cpus));
  }
  // runc, crun and podman's conmon are the agent's children and pass the affinity they inherit
  // (LaunchRequest::cpu_affinity) on to the container; docker's daemon starts it, so it is told.
  if (!request.cpu_affinity.empty() && runtime_ == "docker") {
    argv.push_back("--cpuset-cpus=" + CpuListText(request.cpu_affinity));
  }
  argv.push_back("--pids-limit=" + std::to_string(kReplicaPidsLimit));
  for (const HostLimit& l : kHostLimits) {  // as the bundle's rlimits
    const uint64_t limit = HardLimit(l.resource);
    const std::string hard = limit == UINT64_MAX ? "-1" : std::to_string(limit);
    argv.push_back(std::string("--ulimit=") + l.docker + "=" + hard + ":" + hard);
  }
  if (!request.gpus.empty()) {
    if (HasCdiGpuSpec()) {
      // nvidia-ctk names a whole GPU by its index and, with --device-name-strategy=uuid (which
      // MIG devices need here), any device by its UUID.
      for (const std::string& name : VisibleNames(request)) {
        argv.push_back("--device=nvidia.com/gpu=" + name);
      }
    } else {
      for (const std::string& gpu_node : GpuNodes(request)) {
        argv.push_back("--device=" + options_.device_dir + "/" + gpu_node + ":/dev/" + gpu_node);
      }
      for (const char* control : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
        std::string node = options_.device_dir + "/" + control;
        if (DeviceNode(node, node)) argv.push_back("--device=" + node);
      }
    }
  }
  if (options_.rdma) {
    for (const std::string& rdma : RdmaDevices(options_.device_dir)) {
      argv.push_back("--device=" + options_.device_dir + "/" + rdma + ":/dev/" + rdma);
    }
  }
  // The CLI lays the job's command and args over the image's ENTRYPOINT and CMD as ContainerArgv
  // does: --entrypoint clears the CMD too. An older coordinator's argv goes in place of the CMD.
  std::vector<std::string> after_image = request.argv;
  if (request.container_command) {
    const auto& given = *request.container_command;
    after_image = given.args;
    if (!given.command.empty()) {
      argv.push_back("--entrypoint");
      argv.push_back(given.command.front());
      after_image = Joined({given.command.begin() + 1, given.command.end()}, given.args);
    }
  }
  argv.push_back(request.image);
  argv.insert(argv.end(), after_image.begin(), after_image.end());
  return argv;
}

StatusOr<std::unique_ptr<ReplicaProcess>> OciLauncher::Launch(const LaunchRequest& request) {
  std::string id = IdOf(request);
  LaunchRequest runtime_request = request;
  {
    std::lock_guard<std::mutex> lock(prepared_mu_);
    auto prepared = prepared_.find(id);
    if (prepared == prepared_.end()) {
      return FailedPrecondition("container " + id +
                                ": not prepared (Prepare did not run or failed)");
    }
    runtime_request.argv = std::move(prepared->second);
    prepared_.erase(prepared);
  }
  // The container gets its environment from config.json or --env; the runtime process needs
  // only a PATH.
  runtime_request.env = {{"PATH", kDefaultPath}};
  runtime_request.gpus.clear();
  runtime_request.pid_namespace = false;  // the runtime gives the container one of its own
  // The runtime runs as the agent; the container's process as process.user / --user.
  runtime_request.run_as.reset();
  COHORT_ASSIGN_OR_RETURN(auto process, processes_->Launch(runtime_request));
  return std::unique_ptr<ReplicaProcess>(
      new ContainerReplica(std::move(process), id, RuntimeCommand({}), cli(), commands_));
}

StatusOr<std::unique_ptr<ReplicaProcess>> OciLauncher::Adopt(const HandedOverAttempt& handed) {
  COHORT_ASSIGN_OR_RETURN(auto process, processes_->Adopt(handed));
  return std::unique_ptr<ReplicaProcess>(new ContainerReplica(
      std::move(process),
      handed.container_id.empty() ? ContainerId("", handed.job, handed.replica, handed.attempt)
                                  : handed.container_id,
      RuntimeCommand({}), cli(), commands_));
}

std::vector<std::string> OciLauncher::RuntimeCommand(const std::vector<std::string>& args) const {
  if (!cli()) return RuntimeArgv(args);
  std::vector<std::string> argv = {runtime_path_};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace cohort::agent
