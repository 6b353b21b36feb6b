// tdp::nn in one include: tensordict modules and their helpers (TorchScript support is
// separate, in scripted_module.h, to keep TorchScript's headers out of most builds).
//
//   #include "sdk/nn/nn.h"
//   tdp::nn::TensorDictModule actor(torch::nn::Linear(17, 6),
//                                   tdp::nn::TensorDictModuleOptions({"observation"}, {"action"}));
//   tdp::nn::TensorDictSequential policy({actor});
//   policy(td);
#pragma once

#include "sdk/nn/as_tensordict_module.h"
#include "sdk/nn/biased_softplus.h"
#include "sdk/nn/dispatch.h"
#include "sdk/nn/layers.h"
#include "sdk/nn/mappings.h"
#include "sdk/nn/networks.h"
#include "sdk/nn/normal_param_extractor.h"
#include "sdk/nn/rand_one_hot.h"
#include "sdk/nn/skip_existing.h"
#include "sdk/nn/tensordict_module.h"
#include "sdk/nn/tensordict_module_base.h"
#include "sdk/nn/tensordict_module_wrapper.h"
#include "sdk/nn/tensordict_sequential.h"
#include "sdk/nn/wrap_module.h"
