#include "sdk/env/env_library.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/mutex.h>
#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

namespace tdp::env {
namespace {

struct Loaded {
  std::string path;  // as the library was found (canonical)
  const EnvLibraryInfo* info;
};

struct Registry {
  absl::Mutex mutex;
  std::map<std::string, Loaded> by_name;  // environment name -> its library
  std::map<std::string, std::vector<std::string>> by_path;  // canonical path -> names
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: libraries stay loaded
  return *r;
}

absl::Status check_info(const std::string& path, const EnvLibraryInfo* info) {
  if (info == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": tdp_env_library() returned null"));
  if (info->abi != kEnvLibraryAbi) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": compiled against env library ABI ", info->abi,
                                                      ", this program reads ABI ", kEnvLibraryAbi,
                                                      " (rebuild it against this SDK's headers)"));
  }
  if (info->torch_major != TORCH_VERSION_MAJOR || info->torch_minor != TORCH_VERSION_MINOR) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": compiled against LibTorch ", info->torch_major, ".",
                                                      info->torch_minor, ", this program runs LibTorch ",
                                                      TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR));
  }
  if (info->cxx11_abi != _GLIBCXX_USE_CXX11_ABI) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": compiled with _GLIBCXX_USE_CXX11_ABI=", info->cxx11_abi,
                                                      ", LibTorch and this program use ", _GLIBCXX_USE_CXX11_ABI));
  }
  if (info->make == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": no make function"));
  if (info->names == nullptr || info->names[0] == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": TDP_ENV_LIBRARY names no environment"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> load_env_library(const std::string& path) {
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::canonical(path, error);
  if (error) return absl::NotFoundError(absl::StrCat(path, ": ", error.message()));
  const std::string file = canonical.string();

  Registry& r = registry();
  absl::MutexLock lock(&r.mutex);
  if (r.by_path.count(file) != 0) return std::vector<std::string>{};

  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be loaded as a shared library: ",
                                                   why != nullptr ? why : "unknown error"));
  }
  using Entry = const EnvLibraryInfo* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "tdp_env_library"));
  if (entry == nullptr) {
    dlclose(handle);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": declares no environments (no symbol tdp_env_library; declare them with TDP_ENV_LIBRARY "
              "from sdk/env/env_library.h)"));
  }
  const EnvLibraryInfo* info = entry();
  if (absl::Status status = check_info(path, info); !status.ok()) {
    dlclose(handle);
    return status;
  }
  std::vector<std::string> names;
  for (const char* const* name = info->names; *name != nullptr; ++name) {
    const std::string n = *name;
    std::string problem;
    if (n.empty()) problem = "an empty environment name";
    else if (n != absl::AsciiStrToLower(n)) problem = absl::StrCat("environment name \"", n, "\" is not lower-case");
    else if (auto taken = r.by_name.find(n); taken != r.by_name.end()) {
      problem = absl::StrCat("environment name \"", n, "\" is already taken by ", taken->second.path);
    } else if (std::find(names.begin(), names.end(), n) != names.end()) {
      problem = absl::StrCat("environment name \"", n, "\" is declared twice");
    }
    if (!problem.empty()) {
      dlclose(handle);
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
    }
    names.push_back(n);
  }
  for (const std::string& n : names) r.by_name.emplace(n, Loaded{file, info});
  r.by_path.emplace(file, names);
  return names;
}

std::vector<std::string> library_env_names() {
  Registry& r = registry();
  absl::MutexLock lock(&r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, loaded] : r.by_name) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<BatchedEnv>> make_library_env(const std::string& name, const EnvOptions& options) {
  Loaded loaded;
  {
    Registry& r = registry();
    absl::MutexLock lock(&r.mutex);
    auto found = r.by_name.find(name);
    if (found == r.by_name.end()) return absl::NotFoundError(absl::StrCat("no loaded env library declares \"", name, "\""));
    loaded = found->second;
  }
  try {
    std::unique_ptr<BatchedEnv> env = loaded.info->make(name, options);
    if (env == nullptr) {
      return absl::InternalError(absl::StrCat("environment \"", name, "\" (", loaded.path, "): make returned null"));
    }
    return env;
  } catch (const std::invalid_argument& error) {
    return absl::InvalidArgumentError(absl::StrCat("environment \"", name, "\" (", loaded.path, "): ", error.what()));
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("environment \"", name, "\" (", loaded.path, "): ", error.what()));
  }
}

}  // namespace tdp::env
