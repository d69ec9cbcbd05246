#pragma once
// Workload-generator configurations the generator tests start from. Header-only because it needs
// fabricsim_jobs, which only the tests that include it link.
#include <cstdint>
#include <string>

#include "jobs/generators.hpp"

namespace fabricsim::testing {

/// A generator config of built-in model `model` (e.g. "gpt3-175b") on GPU type `gpu` with
/// tensor parallelism `tp` and sequence length `seq_len` tokens; every other field keeps its
/// default (PP = DP = 1, training). Throws engine::InputError for an unknown model.
inline jobs::TrainConfig train_config(const std::string& model, const std::string& gpu, std::uint32_t tp,
                                      std::uint32_t seq_len) {
  jobs::TrainConfig c;
  c.model = jobs::find_model(model, "<test>", "model");
  c.gpu = gpu;
  c.tp = tp;
  c.seq_len = seq_len;
  return c;
}

}  // namespace fabricsim::testing
