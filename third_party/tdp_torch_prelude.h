// LibTorch's headers that most of this project's files include, precompiled once per
// configuration by //third_party:torch_prelude (third_party/torch_prelude.bzl) and read
// first by the files of the targets that use TORCH_PRELUDE_COPTS. Nothing of this project's own:
// every file still includes what it uses.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
