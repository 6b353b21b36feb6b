// Files and processes for tests: the test's runfiles and scratch folder, whole-file reads and
// writes, and running a built binary the way a user's shell would.
//
//   using namespace tdp::test_util;
//   write_file(temp_path("in.json"), R"({"observation": [[0, 0, 0, 0]]})");
//   CommandResult r = run_command(runfile("sdk/cli/tdp"), {"run", spec, "--input=" + temp_path("in.json")});
//   EXPECT_EQ(r.exit_code, 0) << r.err;
//   EXPECT_THAT(r.out, HasSubstr("action"));
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tdp::test_util {

// A file of this workspace among the test's runfiles (a `data` dependency).
inline std::string runfile(const std::string& path) {
  const char* root = std::getenv("TEST_SRCDIR");
  return std::string(root != nullptr ? root : ".") + "/tdpolicy/" + path;
}

// A path in the test's own scratch folder.
inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  EXPECT_TRUE(out.good()) << "cannot write " << path;
}

// `arg` as one shell word.
inline std::string shell_quoted(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  std::string out;
  std::string err;
};

// Runs `binary` with `args` through the shell, feeding `stdin_text`; `env` is prepended to the
// command line ("NAME=value ").
inline CommandResult run_command(const std::string& binary, const std::vector<std::string>& args,
                                 const std::string& stdin_text = "", const std::string& env = "") {
  const std::string in = temp_path("stdin"), out = temp_path("stdout"), err = temp_path("stderr");
  write_file(in, stdin_text);
  std::string command = env + shell_quoted(binary);
  for (const std::string& arg : args) command += " " + shell_quoted(arg);
  command += " <" + shell_quoted(in) + " >" + shell_quoted(out) + " 2>" + shell_quoted(err);
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = read_file(out);
  result.err = read_file(err);
  return result;
}

}  // namespace tdp::test_util
