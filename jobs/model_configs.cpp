#include "jobs/model_configs.hpp"

#include <algorithm>
#include <cctype>
#include <tuple>

#include "engine/errors.hpp"

namespace fabricsim::jobs {

std::uint64_t ModelConfig::attention_params() const {
  const std::uint64_t h = hidden;
  if (attn == AttnType::kMla) {
    // W_dq (h x q_lora), W_uq (q_lora x heads·(nope+rope)), W_dkv (h x (kv_lora + rope)),
    // W_ukv (kv_lora x heads·(nope + v)), W_o (heads·v x h): DeepSeek-V2/V3 MLA.
    const std::uint64_t qk = qk_head_dim();
    return h * q_lora_rank + std::uint64_t(q_lora_rank) * heads * qk + h * (kv_lora_rank + qk_rope_dim) +
           std::uint64_t(kv_lora_rank) * heads * (qk_nope_dim + head_dim) + std::uint64_t(heads) * head_dim * h;
  }
  // QKV (h x (heads + 2 kv_heads)·d) and output projection (heads·d x h).
  return h * (std::uint64_t(heads) + 2ull * kv_heads) * head_dim + std::uint64_t(heads) * head_dim * h;
}

double ModelConfig::total_params() const {
  double p = double(vocab) * double(hidden) * (tied_embeddings ? 1.0 : 2.0);
  for (std::uint32_t l = 0; l < layers; ++l) {
    p += double(attention_params()) + 2.0 * double(hidden);  // + two norms
    if (moe_layer(l)) {
      p += double(experts + shared_experts) * double(ffn_params(expert_ffn_hidden)) + double(hidden) * experts;
    } else {
      p += double(ffn_params(ffn_hidden));
    }
  }
  return p + double(hidden);  // final norm
}

double ModelConfig::active_params() const {
  double p = double(vocab) * double(hidden) * (tied_embeddings ? 1.0 : 2.0);
  for (std::uint32_t l = 0; l < layers; ++l) {
    p += double(attention_params());
    p += moe_layer(l) ? double(top_k + shared_experts) * double(ffn_params(expert_ffn_hidden))
                      : double(ffn_params(ffn_hidden));
  }
  return p;
}

const std::vector<ModelConfig>& builtin_models() {
  static const std::vector<ModelConfig> models = [] {
    std::vector<ModelConfig> m;
    auto dense = [&](const char* name, const char* src, std::uint32_t L, std::uint64_t h, std::uint32_t heads,
                     std::uint32_t kv, std::uint64_t ffn, FfnType ft, std::uint64_t vocab, bool tied, bool ln,
                     double params_b) {
      ModelConfig c;
      c.name = name;
      c.source = src;
      c.layers = L;
      c.hidden = h;
      c.heads = heads;
      c.kv_heads = kv;
      c.head_dim = static_cast<std::uint32_t>(h / heads);
      c.ffn_hidden = ffn;
      c.ffn = ft;
      c.vocab = vocab;
      c.tied_embeddings = tied;
      c.layernorm = ln;
      // Every RMSNorm model of this table uses rotary embeddings (LLaMA: Touvron et al. 2023
      // Sec. 2.2; Llama 2/3 and Mixtral: the same block; DeepSeek-V3: decoupled RoPE, report
      // Sec. 2.1.2); the LayerNorm ones (GPT-3) learned absolute positions (Brown et al. 2020).
      c.rope = !ln;
      c.reported_params_b = params_b;
      m.push_back(c);
      return &m.back();
    };
    // GPT-3: Brown et al. 2020 Table 2.1; Megatron pads the 50257-token vocabulary to 51200 and
    // ties input/output embeddings. 13B uses h=5120, 40 heads as Megatron/aicb do (paper: 5140).
    dense("gpt3-13b", "Brown et al. 2020 Table 2.1 (h=5120 as in Megatron/aicb)", 40, 5120, 40, 40, 20480,
          FfnType::kGelu, 51200, true, true, 13);
    dense("gpt3-175b", "Brown et al. 2020 Table 2.1; MLPerf GPT-3 config", 96, 12288, 96, 96, 49152,
          FfnType::kGelu, 51200, true, true, 175);
    dense("llama-65b", "Touvron et al. 2023 'LLaMA' Table 2; HF config (intermediate 22016)", 80, 8192, 64, 64,
          22016, FfnType::kSwiglu, 32000, false, false, 65.2);
    dense("llama2-70b", "Touvron et al. 2023 'Llama 2'; HF meta-llama/Llama-2-70b-hf config.json", 80, 8192, 64, 8,
          28672, FfnType::kSwiglu, 32000, false, false, 69);
    dense("llama3-8b", "Llama Team 2024 arXiv:2407.21783 Table 3", 32, 4096, 32, 8, 14336, FfnType::kSwiglu,
          128256, false, false, 8.0);
    dense("llama3-70b", "Llama Team 2024 arXiv:2407.21783 Table 3", 80, 8192, 64, 8, 28672, FfnType::kSwiglu,
          128256, false, false, 70.6);
    dense("llama3-405b", "Llama Team 2024 arXiv:2407.21783 Table 3", 126, 16384, 128, 8, 53248,
          FfnType::kSwiglu, 128256, false, false, 405);
    // Nemotron (NVIDIA/NeMo nemo/collections/llm/gpt/model/nemotron.py, NemotronConfig and its
    // Nemotron3Config8B/22B, Nemotron4Config15B/340B; Nemotron-4 15B: Parmar et al. 2024
    // arXiv:2402.16819 Table 1): squared-ReLU MLP without gate, LayerNorm, RoPE on half of each
    // head (rotary_percent 0.5), untied output layer, 256,000-token vocabulary. Published totals:
    // Nemotron-4 15B 15.6B (arXiv:2402.16819 Sec. 2), 340B (arXiv:2406.11704); the Nemotron-3
    // sizes are published only as size classes ("8B", "22B"), so no total is checked for them (0).
    for (auto [name, L, h, heads, kv, ffn, pb] :
         {std::tuple{"nemotron3-8b", 32u, std::uint64_t{4096}, 32u, 32u, std::uint64_t{16384}, 0.0},
          std::tuple{"nemotron3-22b", 40u, std::uint64_t{6144}, 48u, 48u, std::uint64_t{24576}, 0.0},
          std::tuple{"nemotron4-15b", 32u, std::uint64_t{6144}, 48u, 8u, std::uint64_t{24576}, 15.6},
          std::tuple{"nemotron4-340b", 96u, std::uint64_t{18432}, 96u, 8u, std::uint64_t{73728}, 340.0}}) {
      ModelConfig* c = dense(name, "NVIDIA/NeMo nemotron.py (Nemotron3Config8B/22B, Nemotron4Config15B/340B); arXiv:2402.16819 Table 1",
                             L, h, heads, kv, ffn, FfnType::kSquaredRelu, 256000, false, true, pb);
      c->rope = true;
      c->rope_fraction = 0.5;
    }
    {
      ModelConfig* c = dense("mixtral-8x7b", "Jiang et al. 2024 arXiv:2401.04088 Table 1; HF config.json", 32, 4096,
                             32, 8, 14336, FfnType::kSwiglu, 32000, false, false, 46.7);
      c->experts = 8;
      c->top_k = 2;
      c->expert_ffn_hidden = 14336;
    }
    {
      ModelConfig* c = dense("deepseek-v3", "DeepSeek-V3 report arXiv:2412.19437 Sec 4.2; HF config.json", 61, 7168,
                             128, 128, 18432, FfnType::kSwiglu, 129280, false, false, 671);
      c->attn = AttnType::kMla;
      c->head_dim = 128;  // v head dim
      c->q_lora_rank = 1536;
      c->kv_lora_rank = 512;
      c->qk_rope_dim = 64;
      c->qk_nope_dim = 128;
      c->experts = 256;
      c->shared_experts = 1;
      c->top_k = 8;
      c->expert_ffn_hidden = 2048;
      c->first_dense_layers = 3;
    }
    {
      // Qwen3-235B-A22B (HF Qwen/Qwen3-235B-A22B config.json; the same shape in THUDM/slime
      // scripts/models/qwen3-235B-A22B.sh): 94 layers, every one MoE (no dense, no shared
      // experts), GQA with 4 KV heads and head_dim 128 (not hidden/heads = 64), q/k RMSNorm,
      // 128 experts of inner size 1536, top-8, untied output layer, vocabulary 151,936.
      ModelConfig* c = dense("qwen3-235b-a22b", "HF Qwen/Qwen3-235B-A22B config.json (Qwen3 report arXiv:2505.09388 Table 2)",
                             94, 4096, 64, 4, 12288, FfnType::kSwiglu, 151936, false, false, 235);
      c->head_dim = 128;
      c->qk_norm = true;
      c->experts = 128;
      c->top_k = 8;
      c->expert_ffn_hidden = 1536;
    }
    return m;
  }();
  return models;
}

namespace {
std::string norm_name(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '_' || c == '.' || c == ' ') c = '-';
    o += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return o;
}
}  // namespace

const ModelConfig& find_model(const std::string& name, const std::string& file, const std::string& field) {
  const std::string n = norm_name(name);
  for (const auto& m : builtin_models()) {
    if (norm_name(m.name) == n) return m;
  }
  // A few spellings people use: "llama3.1-405b", "gpt-3-175b".
  for (const auto& m : builtin_models()) {
    std::string a = norm_name(m.name), b = n;
    a.erase(std::remove(a.begin(), a.end(), '-'), a.end());
    b.erase(std::remove(b.begin(), b.end(), '-'), b.end());
    if (a == b || (b == "llama31405b" && a == "llama3405b")) return m;
  }
  std::string known;
  for (const auto& m : builtin_models()) known += (known.empty() ? "" : ", ") + m.name;
  throw engine::InputError(file, field, "unknown model '" + name + "'",
                           "use one of " + known + ", or model: custom with workload.generator.layers/hidden/...");
}

}  // namespace fabricsim::jobs
