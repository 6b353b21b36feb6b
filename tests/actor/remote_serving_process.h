// ServingProcess: one `python -m tdpolicy.serving` (KServe's model server over the SDK) that a
// RemoteActor test or benchmark starts, kills, restarts and stops itself. It runs in its own
// process group, dies with the process that started it (PR_SET_PDEATHSIG), and writes its output
// to a log file under TEST_TMPDIR. Run inside a private network namespace (unshare -n): KServe
// listens on every address.
//
//   tdp::test_util::ServingProcess server("policies/cartpole_categorical.pbtxt", "cartpole", 18080, 18081);
//   if (absl::Status started = server.start(); !started.ok()) return fail(started);
//   auto actor = tdp::actor::RemoteActor::connect(server.target(), "cartpole");
//   server.kill_now();         // a crash
//   int code = server.stop();  // SIGTERM, as an operator stops it: 0 when it stopped cleanly
//
// Environment: TDP_SERVING_PYTHON (the serving venv's interpreter), and what the server reads:
// TDP_LIBRARY (libtdpolicy.so), PYTHONPATH (sdk/python).
#pragma once

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tdp::test_util {

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ServingProcess {
 public:
  ServingProcess(std::string spec, std::string model, int http_port, int grpc_port)
      : spec_(std::move(spec)), model_(std::move(model)), http_port_(http_port), grpc_port_(grpc_port) {}
  ~ServingProcess() { kill_now(); }
  ServingProcess(const ServingProcess&) = delete;
  ServingProcess& operator=(const ServingProcess&) = delete;

  std::string target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  std::string log() const { return read_text_file(log_path_); }

  // Starts the server and waits (up to `timeout`) for its ready line: both ports accept connections.
  absl::Status start(std::chrono::seconds timeout = std::chrono::seconds(150)) {
    const char* python = std::getenv("TDP_SERVING_PYTHON");
    if (!python || !*python) {
      return absl::FailedPreconditionError("TDP_SERVING_PYTHON is not set (the serving venv's python3)");
    }
    const char* tmp = std::getenv("TEST_TMPDIR");
    log_path_ = absl::StrCat(tmp ? tmp : "/tmp", "/serving_", model_, "_", getpid(), "_", ++starts_, ".log");
    std::ofstream(log_path_, std::ios::trunc).close();  // no ready line of an earlier run
    std::vector<std::string> args = {python,         "-m",   "tdpolicy.serving", "--spec", spec_,
                                     "--model-name", model_, "--http-port",      std::to_string(http_port_),
                                     "--grpc-port",  std::to_string(grpc_port_)};
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    if (pid_ == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      FILE* out = std::fopen(log_path_.c_str(), "a");
      if (!out) _exit(126);
      dup2(fileno(out), 1);
      dup2(fileno(out), 2);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(125);
    }
    setpgid(pid_, pid_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log().find("tdpolicy.serving: ready") != std::string::npos) return absl::OkStatus();
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return absl::InternalError(
            absl::StrCat("tdpolicy.serving exited (status ", status, ") before it was ready:\n", log()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill_now();
    return absl::DeadlineExceededError(
        absl::StrCat("tdpolicy.serving was not ready within ", timeout.count(), " s:\n", log()));
  }

  // SIGKILL to the whole group, as a crash; waits for it.
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // SIGTERM, as an operator stops it: its exit code (128 + signal when a signal ended it; -1 when
  // it had to be killed after 60 s).
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        ::kill(-pid_, SIGKILL);  // anything it left in its group
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill_now();
    return -1;
  }

 private:
  std::string spec_, model_;
  int http_port_, grpc_port_;
  std::string log_path_;
  int starts_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tdp::test_util
