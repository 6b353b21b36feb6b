#include "sdk/nn/aoti_package.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tdp::nn {
namespace {

// One tensor of the package's signature, as tdpolicy.export records it: "Float[4,3]".
struct TensorSpec {
  std::string dtype;         // c10's name of the scalar type ("Float", "Long")
  std::vector<int64_t> row;  // the shape after the batch dim
};

std::string row_string(const std::vector<int64_t>& row) { return absl::StrCat("[", absl::StrJoin(row, ","), "]"); }

// "Float[4];Long[]" -> specs; "" -> none. Throws naming the package and the entry.
std::vector<TensorSpec> parse_specs(const std::string& text, const std::string& source, const char* entry) {
  std::vector<TensorSpec> specs;
  if (text.empty()) return specs;
  for (absl::string_view item : absl::StrSplit(text, ';')) {
    const size_t open = item.find('[');
    if (open == absl::string_view::npos || open == 0 || item.back() != ']') {
      throw std::invalid_argument(
          absl::StrCat(source, ": the metadata ", entry, " holds '", item, "'; expected dtype[dims], as Float[4]"));
    }
    TensorSpec spec{std::string(item.substr(0, open)), {}};
    const absl::string_view dims = item.substr(open + 1, item.size() - open - 2);
    for (absl::string_view dim : absl::StrSplit(dims, ',', absl::SkipEmpty())) {
      int64_t size = 0;
      if (!absl::SimpleAtoi(dim, &size) || size < 0) {
        throw std::invalid_argument(absl::StrCat(source, ": the metadata ", entry, " holds the size '", dim, "'"));
      }
      spec.row.push_back(size);
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

// The package's bytes in a private temporary file for as long as LibTorch reads it: the loader
// takes a path, and what it loads must be the bytes the caller checked, not the file as it is now.
class TemporaryPackage {
 public:
  explicit TemporaryPackage(const std::string& bytes) {
    std::string pattern = (std::filesystem::temp_directory_path() / "tdpolicy_aoti_XXXXXX.pt2").string();
    const int fd = mkstemps(pattern.data(), 4);
    if (fd < 0) throw std::runtime_error("cannot create a temporary file in " + pattern);
    path_ = pattern;
    size_t written = 0;
    while (written < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
      if (n <= 0) {
        ::close(fd);
        std::remove(path_.c_str());
        throw std::runtime_error("cannot write the temporary file " + path_);
      }
      written += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~TemporaryPackage() { std::remove(path_.c_str()); }
  TemporaryPackage(const TemporaryPackage&) = delete;
  TemporaryPackage& operator=(const TemporaryPackage&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// LibTorch's errors carry a C++ backtrace; the first line says what went wrong.
std::string first_line(const c10::Error& error) {
  const std::string message = error.what_without_backtrace();
  return message.substr(0, message.find('\n'));
}

// A package's compiled code names libtorch.so among the libraries it needs, with no search path.
// The SDK links only libtorch_cpu and libc10, because the wheel's libtorch.so pulls in
// libtorch_cuda and the CUDA libraries, a third of every CPU process's start even where no package
// is ever loaded. So the first package loads libtorch.so from libtorch_cpu.so's folder, once; after
// that the dynamic loader finds it by name. Empty, or what went wrong.
const std::string& load_libtorch_for_packages() {
  static const std::string error = []() -> std::string {
    if (dlopen("libtorch.so", RTLD_NOW | RTLD_NOLOAD) != nullptr) return "";
    // Beside libtorch_cpu.so, else wherever the dynamic loader looks (LD_LIBRARY_PATH).
    void* cpu = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
    char folder[PATH_MAX] = "";
    const std::string path = cpu != nullptr && dlinfo(cpu, RTLD_DI_ORIGIN, folder) == 0
                                 ? absl::StrCat(folder, "/libtorch.so")
                                 : std::string("libtorch.so");
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = dlerror();
      return absl::StrCat("an AOTInductor package needs LibTorch's libtorch.so, which did not load: ",
                          why != nullptr ? why : path);
    }
    return "";
  }();
  return error;
}

class AotiPackageImpl : public torch::nn::Module {
 public:
  AotiPackageImpl(std::string bytes, std::string source, c10::DeviceType device, size_t n_in, size_t n_out)
      : torch::nn::Module("AotiPackage"), bytes_(std::move(bytes)), source_(std::move(source)), device_(device) {
    std::unordered_map<std::string, std::string> metadata;
    {
      TemporaryPackage file(bytes_);
      try {
        metadata = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(file.path(), "model");
      } catch (const c10::Error& error) {
        throw std::invalid_argument(absl::StrCat(source_, ": not an AOTInductor package: ", first_line(error)));
      }
    }
    // AOTInductor records the device type the package was compiled for.
    if (auto it = metadata.find("AOTI_DEVICE_KEY"); it != metadata.end()) {
      const std::string wanted = c10::DeviceTypeName(device_, /*lower_case=*/true);
      if (it->second != wanted) {
        throw std::invalid_argument(absl::StrCat(source_, ": the package was compiled for ", it->second, ", not for ",
                                                 wanted, " as the spec's device says"));
      }
    }
    if (auto it = metadata.find("tdpolicy.inputs"); it != metadata.end()) {
      inputs_ = parse_specs(it->second, source_, "tdpolicy.inputs");
      if (inputs_->size() != n_in) {
        throw std::invalid_argument(absl::StrCat(source_, ": the package takes ", inputs_->size(),
                                                 " inputs; the module has ", n_in, " in_keys"));
      }
    }
    if (auto it = metadata.find("tdpolicy.outputs"); it != metadata.end()) {
      outputs_ = parse_specs(it->second, source_, "tdpolicy.outputs");
      if (outputs_->size() != n_out) {
        throw std::invalid_argument(absl::StrCat(source_, ": the package returns ", outputs_->size(),
                                                 " outputs; the module has ", n_out, " out_keys"));
      }
    }
    if (device_ == c10::kCPU) open_on(-1);
  }

  // A package cannot move: it loads on the device type it was compiled for.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking) override {
    move_to(device);
    torch::nn::Module::to(device, dtype, non_blocking);
  }
  void to(torch::Device device, bool non_blocking) override {
    move_to(device);
    torch::nn::Module::to(device, non_blocking);
  }

  void pretty_print(std::ostream& stream) const override {
    stream << "AotiPackage(" << source_ << ", " << c10::DeviceTypeName(device_, /*lower_case=*/true) << ")";
  }

  TensorList run(TensorList& inputs) {
    torch::inductor::AOTIModelPackageLoader* loader = loader_.get();
    if (loader == nullptr) {
      throw std::invalid_argument(absl::StrCat(source_, ": a package compiled for ",
                                               c10::DeviceTypeName(device_, /*lower_case=*/true),
                                               " runs once the module is moved to that device (a CUDA actor)"));
    }
    if (!inputs_ || inputs_->empty()) return checked_outputs(loader->run(inputs), std::nullopt);
    // The program has one dynamic batch dim: leading batch dims are flattened into it.
    std::optional<std::vector<int64_t>> batch;
    std::vector<at::Tensor> flat;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorSpec& spec = (*inputs_)[i];
      const at::Tensor& input = inputs[i];
      if (!input.defined()) throw std::invalid_argument(absl::StrCat(source_, ": input ", i, " is missing"));
      const int64_t row_dims = static_cast<int64_t>(spec.row.size());
      const std::string dtype = c10::toString(input.scalar_type());
      const bool row_matches =
          input.dim() > row_dims && std::equal(spec.row.begin(), spec.row.end(), input.sizes().end() - row_dims);
      if (dtype != spec.dtype || !row_matches) {
        throw std::invalid_argument(absl::StrCat(source_, ": input ", i, " is ", dtype, " ",
                                                 row_string(input.sizes().vec()), "; the package takes ", spec.dtype,
                                                 " [batch..., ", absl::StrJoin(spec.row, ","), "]"));
      }
      std::vector<int64_t> leading(input.sizes().begin(), input.sizes().end() - row_dims);
      if (batch && leading != *batch) {
        throw std::invalid_argument(absl::StrCat(source_, ": input ", i, " has the batch dims ", row_string(leading),
                                                 ", input 0 has ", row_string(*batch)));
      }
      batch = leading;
      std::vector<int64_t> shape{-1};
      shape.insert(shape.end(), spec.row.begin(), spec.row.end());
      flat.push_back(input.reshape(shape).contiguous());
    }
    const int64_t rows = c10::multiply_integers(*batch);
    if (rows == 0 && outputs_) {
      TensorList empty;
      for (const TensorSpec& spec : *outputs_) {
        std::vector<int64_t> shape = *batch;
        shape.insert(shape.end(), spec.row.begin(), spec.row.end());
        const auto type = scalar_type(spec.dtype);
        empty.push_back(at::empty(shape, flat.front().options().dtype(type)));
      }
      return empty;
    }
    return checked_outputs(loader->run(flat), batch);
  }

 private:
  void move_to(const torch::Device& device) {
    if (device.type() != device_) {
      throw std::invalid_argument(absl::StrCat(
          source_, ": the package was compiled for ", c10::DeviceTypeName(device_, /*lower_case=*/true),
          " and cannot move to ", device.str(), " (compile one for that device: tdpolicy.export's aoti_device)"));
    }
    if (device_ != c10::kCPU && (!loader_ || loaded_index_ != device.index())) open_on(device.index());
  }

  // Loads the package on device `index` (-1 on the CPU). Not `load`, which would hide
  // torch::nn::Module::load(InputArchive&).
  void open_on(c10::DeviceIndex index) {
    if (const std::string& error = load_libtorch_for_packages(); !error.empty()) {
      throw std::invalid_argument(absl::StrCat(source_, ": ", error));
    }
    TemporaryPackage file(bytes_);
    try {
      loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(file.path(), "model",
                                                                          /*run_single_threaded=*/false,
                                                                          /*num_runners=*/1, index);
    } catch (const c10::Error& error) {
      throw std::invalid_argument(absl::StrCat(source_, ": cannot load the AOTInductor package: ", first_line(error)));
    }
    loaded_index_ = index;
  }

  static at::ScalarType scalar_type(const std::string& name) {
    for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i) {
      const auto type = static_cast<at::ScalarType>(i);
      if (name == c10::toString(type)) return type;
    }
    throw std::invalid_argument("unknown dtype " + name);
  }

  TensorList checked_outputs(std::vector<at::Tensor> outputs, const std::optional<std::vector<int64_t>>& batch) const {
    if (outputs_ && outputs.size() != outputs_->size()) {
      throw std::invalid_argument(absl::StrCat(source_, ": the package returned ", outputs.size(),
                                               " tensors; its metadata lists ", outputs_->size()));
    }
    if (!batch || !outputs_) return outputs;
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::vector<int64_t> shape = *batch;
      shape.insert(shape.end(), (*outputs_)[i].row.begin(), (*outputs_)[i].row.end());
      outputs[i] = outputs[i].reshape(shape);
    }
    return outputs;
  }

  std::string bytes_;
  std::string source_;
  c10::DeviceType device_;
  std::optional<std::vector<TensorSpec>> inputs_;
  std::optional<std::vector<TensorSpec>> outputs_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  c10::DeviceIndex loaded_index_ = -1;
};

}  // namespace

TensorDictModule aoti_package(std::string bytes, const std::string& source, TensorDictModuleOptions options,
                              c10::DeviceType device) {
  if (!options.in_keys_map().empty()) {
    throw std::invalid_argument(source + ": an AOTInductor package takes its inputs by position: give in_keys");
  }
  if (device != c10::kCPU && device != c10::kCUDA) {
    throw std::invalid_argument(absl::StrCat(source, ": AOTInductor packages run on cpu or cuda, not ",
                                             c10::DeviceTypeName(device, /*lower_case=*/true)));
  }
  auto package = std::make_shared<AotiPackageImpl>(std::move(bytes), source, device, options.in_keys().size(),
                                                   options.out_keys().size());
  TensorFunction function = [package](TensorList& inputs) { return package->run(inputs); };
  return TensorDictModule(std::move(package), std::move(function), std::move(options), "AotiPackage");
}

TensorDictModule load_aoti_package(const std::string& path, TensorDictModuleOptions options, c10::DeviceType device) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::invalid_argument(path + ": cannot open the AOTInductor package");
  std::ostringstream bytes;
  bytes << file.rdbuf();
  return aoti_package(std::move(bytes).str(), path, std::move(options), device);
}

}  // namespace tdp::nn
