// A family's Hugging Face weight files read onto its parameters (models/*/hf.cpp): every file's
// tensors in file order, renamed to the model's names, each checked to be a parameter, and the
// copies Hugging Face ties to a parameter (a tied head, T5's embed_tokens) checked bit for bit
// equal to it and dropped. Dtypes are kept.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>

#include "meshflow/io/hf_files.h"
#include "meshflow/nn/module.h"

namespace mf::models {

class Model;

// A copy of a parameter in the files: the parameter, and how a message names it ("" : "<the
// parameter>, to which Hugging Face ties it").
struct HfTie {
  std::string parameter;
  std::string words;
};

struct HfWeightRules {
  // A file's tensor name -> the model's ("" : not a parameter, dropped: a buffer, another task's
  // head). Null: the name itself.
  std::function<std::string(const std::string& stored)> rename;
  // Whether a (renamed) name is a parameter.
  std::function<bool(const std::string& name)> known;
  // Copies by their (renamed) names. Where the files lack the parameter itself, the first copy
  // read stands for it.
  std::map<std::string, HfTie> tied;
  std::string model;  // for messages: "GPT-NeoX: layers 2, hidden 64, ..."
};

// Throws naming the file for a tensor that is not a parameter, and for a copy that differs.
nn::NamedTensors read_hf_weights(const io::HfModelFiles& files, const HfWeightRules& rules);

// The parameter names of a (shape-only) model: HfWeightRules::known.
std::function<bool(const std::string&)> parameter_of(const Model& model);

}  // namespace mf::models
