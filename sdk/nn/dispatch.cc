#include "sdk/nn/dispatch.h"

#include <algorithm>
#include <stdexcept>

namespace tdp::nn {
namespace {

std::vector<int64_t> common_leading_shape(const std::vector<std::pair<NestedKey, Entry>>& items) {
  std::vector<int64_t> shape;
  bool first = true;
  for (const auto& item : items) {
    const auto sizes = item.second.tensor().sizes();
    if (first) {
      shape.assign(sizes.begin(), sizes.end());
      first = false;
      continue;
    }
    size_t n = 0;
    while (n < shape.size() && n < sizes.size() && shape[n] == sizes[n]) ++n;
    shape.resize(n);
  }
  return shape;
}

std::vector<at::Tensor> run(const TensorDictFunction& function, const std::string& who,
                            const std::vector<NestedKey>& source,
                            const std::vector<NestedKey>& dest, std::vector<at::Tensor> args,
                            NamedTensors kwargs, const DispatchOptions& options) {
  std::vector<std::pair<NestedKey, Entry>> items;
  std::vector<bool> used(kwargs.size(), false);
  std::vector<NestedKey> names;
  size_t next_arg = 0;
  for (const NestedKey& key : source) {
    const std::string name = key.join(options.separator());
    names.emplace_back(name);
    auto it = std::find_if(kwargs.begin(), kwargs.end(),
                           [&](const auto& kwarg) { return kwarg.first == name; });
    if (next_arg < args.size()) {
      if (it != kwargs.end()) {
        throw std::invalid_argument(who + ": Duplicated argument in args and kwargs: '" + name +
                                    "' is given by position and by name.");
      }
      items.emplace_back(key, args[next_arg++]);
    } else if (it != kwargs.end()) {
      used[static_cast<size_t>(it - kwargs.begin())] = true;
      items.emplace_back(key, it->second);
    }
  }
  if (next_arg < args.size()) {
    throw std::invalid_argument(who + ": got " + std::to_string(args.size()) +
                                " positional tensor(s) but the source keys are " +
                                keys_to_string(source) + ".");
  }
  for (size_t i = 0; i < kwargs.size(); ++i) {
    if (!used[i]) {
      throw std::invalid_argument(who + ": unexpected named tensor '" + kwargs[i].first +
                                  "'; the accepted names are " + keys_to_string(names) + ".");
    }
  }
  std::vector<int64_t> batch_size;
  if (options.auto_batch_size()) batch_size = common_leading_shape(items);
  TensorDict result = function(TensorDict(items, batch_size));
  std::vector<at::Tensor> outputs;
  outputs.reserve(dest.size());
  for (const NestedKey& key : dest) outputs.push_back(result.get(key));
  return outputs;
}

}  // namespace

std::vector<at::Tensor> dispatch(TensorDictModuleBase& module, std::vector<at::Tensor> args,
                                 NamedTensors kwargs, DispatchOptions options) {
  const std::vector<NestedKey> source = options.source().value_or(module.in_keys());
  const std::vector<NestedKey> dest = options.dest().value_or(module.out_keys());
  return run([&module](TensorDict td) { return module.forward(td); },
             "dispatch(" + module.type_name() + ")", source, dest, std::move(args),
             std::move(kwargs), options);
}

std::vector<at::Tensor> dispatch(const TensorDictFunction& function, std::vector<at::Tensor> args,
                                 NamedTensors kwargs, DispatchOptions options) {
  if (!options.source().has_value() || !options.dest().has_value()) {
    throw std::invalid_argument(
        "dispatch: a function has no in_keys or out_keys; set DispatchOptions source and dest.");
  }
  return run(function, "dispatch", *options.source(), *options.dest(), std::move(args),
             std::move(kwargs), options);
}

}  // namespace tdp::nn
