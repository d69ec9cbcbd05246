/// @file model_shapes.cpp
/// Per-rank layer parameters, the pipeline split of layers, closed-form model FLOPs and the
/// kernel database loader.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs {

double closed_form_model_flops(const ModelConfig& m, double tokens, std::uint32_t seq_len) {
  double matrix = double(m.vocab) * double(m.hidden);  // logits
  double attn = 0;
  for (std::uint32_t l = 0; l < m.layers; ++l) {
    matrix += double(m.attention_params());
    if (m.moe_layer(l)) {
      matrix += double(m.top_k + m.shared_experts) * double(m.ffn_params(m.expert_ffn_hidden)) +
                double(m.hidden) * m.experts;
    } else {
      matrix += double(m.ffn_params(m.ffn_hidden));
    }
    attn += 2.0 * seq_len * m.heads * double(m.qk_head_dim() + m.head_dim);
  }
  return 6.0 * matrix * tokens + 3.0 * attn * tokens;
}

LayerParams rank_layer_params(const TrainConfig& c, std::uint32_t l) {
  const ModelConfig& m = c.model;
  LayerParams r;
  r.dense = double(m.attention_params()) / c.tp + 2.0 * double(m.hidden);
  if (m.moe_layer(l)) {
    r.dense += double(m.hidden) * m.experts + double(m.shared_experts) * double(m.ffn_params(m.expert_ffn_hidden));
    r.expert = double(m.experts / c.ep) * double(m.ffn_params(m.expert_ffn_hidden));
  } else {
    r.dense += double(m.ffn_params(m.ffn_hidden)) / c.tp;
  }
  return r;
}

std::pair<std::uint32_t, std::uint32_t> chunk_layers(const TrainConfig& c, std::uint32_t v) {
  if (!c.pipeline_layout.empty()) {
    std::uint32_t begin = 0;
    for (std::uint32_t i = 0; i < v && i < c.pipeline_layout.size(); ++i) begin += c.pipeline_layout[i];
    const std::uint32_t n = v < c.pipeline_layout.size() ? c.pipeline_layout[v] : 0;
    return {std::min(begin, c.model.layers), std::min(begin + n, c.model.layers)};
  }
  const std::uint32_t e = c.pp_split_embedding ? 1 : 0, lo = c.pp_split_loss ? 1 : 0;
  const std::uint32_t per = (c.model.layers + e + lo) / (c.pp * c.vp);
  const std::uint32_t begin = v * per > e ? v * per - e : 0;
  const std::uint32_t end = std::min(c.model.layers, (v + 1) * per - e);
  return {begin, std::max(begin, end)};
}

kernels::KernelDb load_kernel_db(const std::string& path) {
  auto db = kernels::KernelDb::load(path.empty() ? kernels::KernelDb::default_path() : path);
  db.use_tables(&kernels::MeasuredTables::shipped());
  return db;
}

}  // namespace fabricsim::jobs
