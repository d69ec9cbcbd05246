#pragma once
/// @file model_configs.hpp
/// Transformer architectures for the workload generators: the built-in table
/// (../shared/reference/model-configs.csv, each entry citing its paper/config) and user-defined
/// models from the spec. Parameter counts are computed from the shapes, not copied.
#include <cstdint>
#include <string>
#include <vector>

namespace fabricsim::jobs {

/// Feed-forward kind: GELU MLP (h -> ffn -> h, two matrices), SwiGLU (h -> 2·ffn -> h), or the
/// squared-ReLU MLP of Nemotron (h -> ffn -> h, two matrices, activation relu(x)^2: So et al. 2021
/// "Primer", arXiv:2109.08668; NeMo nemotron.py `activation_func = squared_relu`).
enum class FfnType : std::uint8_t { kGelu, kSwiglu, kSquaredRelu };
/// Attention kind: MHA/GQA (kv_heads <= heads), or DeepSeek's multi-head latent attention.
enum class AttnType : std::uint8_t { kGqa, kMla };

/// One model architecture.
struct ModelConfig {
  std::string name;                 ///< e.g. "gpt3-175b"
  std::string source;               ///< paper / config it comes from
  std::uint32_t layers = 0;
  std::uint64_t hidden = 0;
  std::uint32_t heads = 0;
  std::uint32_t kv_heads = 0;       ///< = heads for MHA
  std::uint32_t head_dim = 0;       ///< per-head dim of q/k/v (MLA: v head dim)
  std::uint64_t ffn_hidden = 0;     ///< dense FFN inner size
  FfnType ffn = FfnType::kGelu;
  std::uint64_t vocab = 0;          ///< padded vocabulary used in training runs
  bool tied_embeddings = false;     ///< GPT: output layer shares the embedding matrix
  bool layernorm = true;            ///< LayerNorm (true) or RMSNorm (false)
  /// Rotary position embeddings applied to q and k in every layer (Su et al. 2021, RoFormer;
  /// LLaMA 1/2/3, Mixtral, DeepSeek-V3 on its decoupled rope dims); false: learned absolute
  /// positions added to the embedding (GPT-3), which cost no per-layer kernel.
  bool rope = false;
  /// Share of each q/k head's dimensions that are rotated (NeMo `rotary_percent`: Nemotron 0.5;
  /// 1.0 for every other model here). Scales the rope kernels' bytes.
  double rope_fraction = 1.0;
  /// RMSNorm over each q and k head before the rotation (Megatron-Core `--qk-layernorm`; Qwen3,
  /// Qwen3-MoE: HF Qwen3Attention q_norm / k_norm over head_dim). Adds `qk_norm` kernels.
  bool qk_norm = false;
  AttnType attn = AttnType::kGqa;
  // MLA (DeepSeek-V3, arXiv:2412.19437 Sec 2.1.1): low-rank q and kv projections.
  std::uint32_t q_lora_rank = 0, kv_lora_rank = 0, qk_rope_dim = 0, qk_nope_dim = 0;
  // MoE (0 experts = dense).
  std::uint32_t experts = 0;        ///< routed experts per MoE layer
  std::uint32_t shared_experts = 0; ///< always-active experts (DeepSeek)
  std::uint32_t top_k = 0;          ///< experts per token
  std::uint64_t expert_ffn_hidden = 0;
  std::uint32_t first_dense_layers = 0;  ///< leading layers with a dense FFN (DeepSeek-V3: 3)
  double reported_params_b = 0;     ///< total parameters as published (billions), for checks

  bool is_moe() const { return experts > 0; }
  /// True if layer `l` (0-based) has an MoE FFN.
  bool moe_layer(std::uint32_t l) const { return is_moe() && l >= first_dense_layers; }
  /// q/k head dim (MLA: nope + rope; else head_dim).
  std::uint32_t qk_head_dim() const { return attn == AttnType::kMla ? qk_nope_dim + qk_rope_dim : head_dim; }
  /// Parameters of one layer's attention block (weights only, no norms/biases).
  std::uint64_t attention_params() const;
  /// Parameters of one dense FFN with inner size `ffn`.
  std::uint64_t ffn_params(std::uint64_t ffn) const { return (ffn_type_mats()) * hidden * ffn; }
  /// 2 for GELU, 3 for SwiGLU (matrices of size hidden x ffn).
  std::uint64_t ffn_type_mats() const { return ffn == FfnType::kSwiglu ? 3 : 2; }
  /// Total parameters (embedding + output layer if untied + layers + norms), FFN experts all counted.
  double total_params() const;
  /// Parameters a token touches (top_k + shared experts only), as "active params".
  double active_params() const;
};

/// The built-in models: gpt3-13b, gpt3-175b, llama-65b, llama2-70b, llama3-8b, llama3-70b,
/// llama3-405b, mixtral-8x7b, deepseek-v3.
const std::vector<ModelConfig>& builtin_models();

/// Finds a built-in model by name (case-insensitive; "-" and "_" and "." equivalent).
/// @throws engine::InputError naming `file`/`field` and listing the names.
const ModelConfig& find_model(const std::string& name, const std::string& file, const std::string& field);

}  // namespace fabricsim::jobs
