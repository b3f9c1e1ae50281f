// Hugging Face ViT files (ViTForImageClassification): config.json <-> meshflow's ViT sizes, and the
// weight files' tensors under meshflow's parameter names (which are Hugging Face's: a plain
// mapping; a ViTModel file's pooler, which the classifier does not use, dropped).
#pragma once
#include <string>

#include "meshflow/io/hf_files.h"
#include "meshflow/models/vit/config.h"
#include "meshflow/nn/module.h"

namespace mf::models {

// config.json -> sizes; num_labels from id2label (or num_labels). Throws naming the file and the
// key for what meshflow's ViT does not compute the same way (an activation other than gelu, no
// q/k/v biases, another encoder stride).
VitConfig vit_config_from_hf(const std::string& config_json_path);
// config.json text for these sizes, torch_dtype `dtype`.
std::string vit_config_to_hf(const VitConfig& c, DType dtype);
// The weight files' tensors under the model's parameter names of `c`; dtypes kept.
nn::NamedTensors read_hf_vit_tensors(const io::HfModelFiles& files, const VitConfig& c);

}  // namespace mf::models
