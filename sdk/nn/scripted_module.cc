#include "sdk/nn/scripted_module.h"

#include <torch/script.h>

#include <memory>
#include <ostream>
#include <stdexcept>
#include <utility>

namespace tdp::nn {
namespace {

// Registers the TorchScript module's own parameters and buffers, then mirrors its children.
void mirror(torch::nn::Module& target, const torch::jit::Module& source) {
  for (const auto& item : source.named_parameters(/*recurse=*/false)) {
    target.register_parameter(item.name, item.value, item.value.requires_grad());
  }
  for (const auto& item : source.named_buffers(/*recurse=*/false)) {
    target.register_buffer(item.name, item.value);
  }
  for (const auto& child : source.named_children()) {
    auto mirrored = std::make_shared<torch::nn::Module>(child.name);
    mirror(*mirrored, child.value);
    target.register_module(child.name, mirrored);
  }
}

class ScriptedModuleImpl : public torch::nn::Module {
 public:
  ScriptedModuleImpl(torch::jit::Module module, torch::jit::Method method)
      : torch::nn::Module("TorchScript"), module_(std::move(module)), method_(std::move(method)) {
    mirror(*this, module_);
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

  void pretty_print(std::ostream& stream) const override {
    stream << "TorchScript(" << module_.type()->name()->qualifiedName()
           << ", method=" << method_.name() << ")";
  }

  c10::IValue call(std::vector<c10::IValue> stack, const torch::jit::Kwargs& kwargs) {
    return method_(std::move(stack), kwargs);
  }

 private:
  torch::jit::Module module_;
  torch::jit::Method method_;
};

at::Tensor tensor_of(const c10::IValue& value, const char* what) {
  if (!value.isTensor()) {
    throw std::invalid_argument(std::string("the TorchScript method returned ") + what +
                                " holding a " + value.tagKind() + "; expected Tensors.");
  }
  return value.toTensor();
}

TensorList outputs_of(const c10::IValue& out, const std::vector<NestedKey>& out_keys) {
  if (out.isNone()) return {};
  if (out.isTensor()) return {out.toTensor()};
  TensorList tensors;
  if (out.isTuple()) {
    for (const c10::IValue& element : out.toTupleRef().elements()) {
      tensors.push_back(tensor_of(element, "a tuple"));
    }
    return tensors;
  }
  if (out.isTensorList()) return out.toTensorVector();
  if (out.isList()) {
    for (const c10::IValue& element : out.toListRef()) tensors.push_back(tensor_of(element, "a list"));
    return tensors;
  }
  if (out.isGenericDict()) {
    const auto dict = out.toGenericDict();
    std::vector<NestedKey> names;
    for (const auto& entry : dict) {
      if (entry.key().isString()) names.emplace_back(entry.key().toStringRef());
    }
    for (const NestedKey& key : out_keys) {
      if (key == NestedKey("_")) {
        tensors.emplace_back();
        continue;
      }
      auto it = key.is_nested() ? dict.end() : dict.find(c10::IValue(key.leaf()));
      if (it == dict.end()) {
        throw KeyError("the TorchScript method returned a dict without the out_key " +
                       key.to_string() + "; it has keys " + keys_to_string(names) + ".");
      }
      tensors.push_back(tensor_of(it->value(), "a dict"));
    }
    return tensors;
  }
  throw std::invalid_argument("the TorchScript method returned a " + out.tagKind() +
                              "; expected a Tensor, a tuple or list of Tensors, a Dict[str, "
                              "Tensor] or None.");
}

}  // namespace

TensorDictModule scripted_module(const torch::jit::Module& module, TensorDictModuleOptions options,
                                 const std::string& method) {
  auto found = module.find_method(method);
  if (!found.has_value()) {
    std::vector<NestedKey> names;
    for (const auto& m : module.get_methods()) names.emplace_back(m.name());
    throw std::invalid_argument("scripted_module: the TorchScript module " +
                                module.type()->name()->qualifiedName() + " has no method '" +
                                method + "'; its methods are " + keys_to_string(names) + ".");
  }
  auto scripted = std::make_shared<ScriptedModuleImpl>(module, *found);
  // arg_names come from the options; parse them the way TensorDictModule does.
  std::vector<std::string> arg_names;
  if (!options.in_keys_map().empty()) {
    const bool out_to_in = options.out_to_in_map().value_or(true);
    for (const auto& [first, second] : options.in_keys_map()) {
      arg_names.push_back((out_to_in ? first : second).leaf());
    }
  }
  const std::vector<NestedKey> out_keys = options.out_keys();
  TensorFunction function = [scripted, arg_names, out_keys](TensorList& inputs) {
    std::vector<c10::IValue> stack;
    torch::jit::Kwargs kwargs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      c10::IValue value = inputs[i].defined() ? c10::IValue(inputs[i]) : c10::IValue();
      if (arg_names.empty()) {
        stack.push_back(std::move(value));
      } else {
        kwargs.emplace(arg_names[i], std::move(value));
      }
    }
    return outputs_of(scripted->call(std::move(stack), kwargs), out_keys);
  };
  return TensorDictModule(std::move(scripted), std::move(function), std::move(options),
                          "TorchScript");
}

TensorDictModule load_scripted_module(const std::string& path, TensorDictModuleOptions options,
                                      const std::string& method,
                                      std::optional<c10::Device> device) {
  torch::jit::Module module = device.has_value() ? torch::jit::load(path, *device)
                                                 : torch::jit::load(path);
  return scripted_module(module, std::move(options), method);
}

}  // namespace tdp::nn
