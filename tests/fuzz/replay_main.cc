// The main() a fuzz entry point links without libFuzzer (the default gcc build): it replays every
// file given, or every file in a folder given (one level), through LLVMFuzzerTestOneInput, the
// way `fuzzer FILE...` does. //tests/fuzz:*_replay_test run the seed corpus and the crashers
// kept in tests/fuzz/regressions/ this way, so `bazel test //...` replays them without clang.
// Fails when nothing was replayed (a folder that went missing from the runfiles).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool is_dir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> files_of(const std::string& path) {
  if (!is_dir(path)) return {path};
  std::vector<std::string> files;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name == "." || name == ".." || name == "README.md" || name == "BUILD.bazel") continue;
      const std::string full = path + "/" + name;
      if (!is_dir(full)) files.push_back(full);
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::vector<std::string> files = files_of(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "replay: %s holds no files\n", argv[i]);
      return 1;
    }
    for (const std::string& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
        return 1;
      }
      std::stringstream buffer;
      buffer << in.rdbuf();
      const std::string bytes = buffer.str();
      std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  std::fprintf(stderr, "replay: %d inputs, none crashed\n", replayed);
  return replayed > 0 ? 0 : 1;
}
