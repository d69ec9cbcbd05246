/// @file spec_config.cpp
/// TrainConfig from a spec's workload.generator.* keys (train_config_from_spec).
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "jobs/generators.hpp"
#include "jobs/spec.hpp"
#include "kernels/efficiency_model.hpp"

namespace fabricsim::jobs {

using engine::InputError;

namespace {

/// Upper bound of the 64-bit size keys (hidden, ffn_hidden, vocab, expert_ffn_hidden,
/// bucket_params): 2^40, far above any model and exact in the double arithmetic of the generator.
constexpr std::uint64_t kMaxShape = 1ull << 40;

struct SpecReader {
  const Spec& spec;
  std::string where(const std::string& k) const {
    const auto it = spec.generator_file.find(k);
    return it == spec.generator_file.end() ? spec.file : it->second;
  }
  /// Where a check on `k` that also involves `related` keys comes from: "<cli>" when any of them
  /// was given with --set (the value that made the combination invalid may be that one).
  std::string where(const std::string& k, std::initializer_list<const char*> related) const {
    for (const char* o : related) {
      const auto it = spec.generator_file.find(o);
      if (it != spec.generator_file.end() && it->second == "<cli>") return it->second;
    }
    return where(k);
  }
  std::optional<std::string> get(const std::string& k) const {
    const auto it = spec.generator.find(k);
    if (it == spec.generator.end()) return std::nullopt;
    return it->second;
  }
  /// A whole number in [min_v, max_v]; max_v defaults to the largest value a 32-bit field holds.
  /// Throws InputError (naming the key) for anything else, so no value wraps.
  std::uint64_t uint(const std::string& k, std::uint64_t def, std::uint64_t min_v = 1,
                     std::uint64_t max_v = 0xFFFFFFFFull) const {
    const auto v = get(k);
    if (!v) return def;
    std::size_t pos = 0;
    long long x = -1;
    try {
      x = std::stoll(*v, &pos);
    } catch (...) {
      pos = 0;
    }
    if (pos != v->size() || v->empty() || x < static_cast<long long>(min_v)) {
      throw InputError(where(k), "workload.generator." + k, "'" + *v + "' is not a whole number >= " + std::to_string(min_v),
                       "give a whole number");
    }
    if (static_cast<std::uint64_t>(x) > max_v) {
      throw InputError(where(k), "workload.generator." + k, "'" + *v + "' is above " + std::to_string(max_v),
                       "give a whole number <= " + std::to_string(max_v));
    }
    return static_cast<std::uint64_t>(x);
  }
  bool boolean(const std::string& k, bool def) const {
    const auto v = get(k);
    if (!v) return def;
    return engine::parse_bool(*v, where(k), "workload.generator." + k);
  }
  double real(const std::string& k, double def) const {
    const auto v = get(k);
    if (!v) return def;
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(x > 0) || x > 1) {
      throw InputError(where(k), "workload.generator." + k, "'" + *v + "' must be a number in (0, 1]", "e.g. 0.7");
    }
    return x;
  }
};

/// `pipeline_layout`: transformer layers per virtual pipeline stage, comma-separated, each entry
/// a whole number or `N*K` (N layers on each of K consecutive stages), e.g. "4*15,1". Length and
/// sum are checked against PP·VP and the layer count in validate_train. @throws
/// engine::InputError naming the key for anything else.
std::vector<std::uint32_t> parse_pipeline_layout(const SpecReader& r, const std::string& v) {
  std::vector<std::uint32_t> out;
  auto fail = [&](const std::string& part) {
    throw InputError(r.where("pipeline_layout"), "workload.generator.pipeline_layout",
                     "'" + part + "' is not a layer count (whole number, or N*K for K stages of N layers)",
                     "write the layers of each virtual stage in order, e.g. \"4*15,1\"");
  };
  auto number = [&](const std::string& t, const std::string& part) -> std::uint64_t {
    std::size_t pos = 0;
    long long x = -1;
    try {
      x = std::stoll(t, &pos);
    } catch (...) {
      pos = 0;
    }
    if (t.empty() || pos != t.size() || x < 0 || x > 1'000'000) fail(part);
    return static_cast<std::uint64_t>(x);
  };
  std::size_t start = 0;
  while (start <= v.size()) {
    const std::size_t comma = v.find(',', start);
    std::string part = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    const std::size_t star = part.find('*');
    const std::uint64_t n = number(part.substr(0, star), part);
    const std::uint64_t k = star == std::string::npos ? 1 : number(part.substr(star + 1), part);
    if (k == 0 || out.size() + k > 1'000'000) fail(part);
    out.insert(out.end(), k, static_cast<std::uint32_t>(n));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// Model shape keys: a built-in `model` (name marked "[modified:...]" when shape keys change
/// it) or `model: custom` with layers, hidden, heads and vocab. @throws engine::InputError.
void read_model(const SpecReader& r, const std::string& model_name, TrainConfig& c) {
  if (model_name == "custom") {
    ModelConfig m;
    m.name = "custom";
    m.source = "user-defined in " + r.spec.file;
    for (const char* k : {"layers", "hidden", "heads", "vocab"}) {
      if (!r.get(k)) {
        throw InputError(r.spec.file, std::string("workload.generator.") + k, "missing for model: custom",
                         "give layers, hidden, heads and vocab (and optionally kv_heads, ffn_hidden, ffn, experts, top_k)");
      }
    }
    m.ffn = FfnType::kGelu;
    m.layernorm = true;
    m.tied_embeddings = true;
    c.model = m;
  } else {
    c.model = find_model(model_name, r.where("model"), "workload.generator.model");
  }
  ModelConfig& m = c.model;
  const ModelConfig builtin = m;  // before the shape keys
  m.layers = static_cast<std::uint32_t>(r.uint("layers", m.layers));
  const std::uint64_t old_hidden = m.hidden;
  const std::uint32_t old_heads = m.heads;
  m.hidden = r.uint("hidden", m.hidden, 1, kMaxShape);
  m.heads = static_cast<std::uint32_t>(r.uint("heads", m.heads));
  // A multi-head model (kv_heads == heads) given another head count stays multi-head.
  const bool mha = m.kv_heads == 0 || m.kv_heads == old_heads;
  m.kv_heads = static_cast<std::uint32_t>(r.uint("kv_heads", mha ? m.heads : m.kv_heads));
  const std::uint32_t old_head_dim = m.head_dim;
  if (m.attn == AttnType::kGqa && (m.hidden != old_hidden || r.get("heads"))) m.head_dim = static_cast<std::uint32_t>(m.hidden / m.heads);
  if (r.get("head_dim")) {
    if (m.attn != AttnType::kGqa) {
      throw InputError(r.where("head_dim"), "workload.generator.head_dim", "'" + m.name + "' uses latent attention (MLA), whose head dims are fixed",
                       "remove head_dim");
    }
    m.head_dim = static_cast<std::uint32_t>(r.uint("head_dim", m.head_dim, 1, 4096));
  }
  m.qk_norm = r.boolean("qk_norm", m.qk_norm);
  m.ffn_hidden = r.uint("ffn_hidden", m.ffn_hidden ? m.ffn_hidden : 4 * m.hidden, 1, kMaxShape);
  if (auto v = r.get("ffn")) {
    if (*v == "gelu") m.ffn = FfnType::kGelu;
    else if (*v == "swiglu") {
      m.ffn = FfnType::kSwiglu;
      m.layernorm = false;
      m.tied_embeddings = false;
      m.rope = true;  // the LLaMA-style block: RMSNorm, SwiGLU, rotary embeddings, untied output
    } else if (*v == "squared_relu") {
      m.ffn = FfnType::kSquaredRelu;  // the FFN only: norm, embeddings and rope stay as they are
    } else {
      throw InputError(r.where("ffn"), "workload.generator.ffn", "'" + *v + "' is not an FFN kind",
                       "use gelu, swiglu or squared_relu");
    }
  }
  m.vocab = r.uint("vocab", m.vocab, 1, kMaxShape);
  m.experts = static_cast<std::uint32_t>(r.uint("experts", m.experts, 0));
  m.top_k = static_cast<std::uint32_t>(r.uint("top_k", m.top_k ? m.top_k : (m.experts ? 2 : 0), 0));
  m.expert_ffn_hidden = r.uint("expert_ffn_hidden", m.expert_ffn_hidden ? m.expert_ffn_hidden : m.ffn_hidden, 0, kMaxShape);
  if (m.experts > 0 && (m.top_k == 0 || m.top_k > m.experts)) {
    throw InputError(r.where("top_k", {"experts", "model"}), "workload.generator.top_k", "must be between 1 and the expert count",
                     "set top_k, e.g. 2");
  }
  if (model_name != "custom") {
    // A built-in model whose shape keys change it is no longer that model: say so in its name (the
    // workload source, run summary and HDF5 meta carry it). Keys restating the built-in value
    // leave the name alone.
    const std::pair<const char*, bool> changed[] = {
        {"layers", m.layers != builtin.layers},          {"hidden", m.hidden != builtin.hidden},
        {"heads", m.heads != builtin.heads},             {"kv_heads", m.kv_heads != builtin.kv_heads},
        {"ffn_hidden", m.ffn_hidden != builtin.ffn_hidden}, {"ffn", m.ffn != builtin.ffn},
        {"vocab", m.vocab != builtin.vocab},             {"experts", m.experts != builtin.experts},
        {"top_k", m.top_k != builtin.top_k},             {"head_dim", m.head_dim != old_head_dim},
        {"qk_norm", m.qk_norm != builtin.qk_norm},
        {"expert_ffn_hidden", m.experts > 0 && m.expert_ffn_hidden != builtin.expert_ffn_hidden}};
    std::string mods;
    for (const auto& [k, diff] : changed) {
      if (diff && r.get(k)) mods += fmt::format("{}{}={}", mods.empty() ? "" : ",", k, *r.get(k));
    }
    if (!mods.empty()) {
      m.name += "[modified:" + mods + "]";
      m.source += " (shape keys changed: " + mods + ")";
    }
  }
  if (!r.get("head_dim") && (m.heads == 0 || m.hidden % m.heads != 0)) {
    if (m.attn == AttnType::kGqa) {
      throw InputError(r.where("hidden", {"heads", "model"}), "workload.generator.hidden", "hidden size not divisible by the head count",
                       "choose hidden = heads * head_dim, or give head_dim");
    }
  }
}

/// Hardware, parallelism, batch, precision, recompute, attention, DP and kernel-model keys.
/// @throws engine::InputError.
void read_training(const SpecReader& r, TrainConfig& c) {
  c.gpu = r.get("gpu").value_or("H100");
  kernels::find_gpu(c.gpu, r.where("gpu"), "workload.generator.gpu");
  c.tp = static_cast<std::uint32_t>(r.uint("tp", 1));
  c.pp = static_cast<std::uint32_t>(r.uint("pp", 1));
  c.dp = static_cast<std::uint32_t>(r.uint("dp", 1));
  c.ep = static_cast<std::uint32_t>(r.uint("ep", 1));
  c.cp = static_cast<std::uint32_t>(r.uint("cp", 1));
  c.vp = static_cast<std::uint32_t>(r.uint("vp", 1));
  c.expected_gpus = static_cast<std::uint32_t>(r.uint("gpus", 0, 0));
  c.sequence_parallel = r.boolean("sequence_parallel", true);
  c.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
  c.pp_split_embedding = r.boolean("account_for_embedding_in_pipeline_split", false);
  c.pp_split_loss = r.boolean("account_for_loss_in_pipeline_split", false);
  if (auto v = r.get("pipeline_layout")) c.pipeline_layout = parse_pipeline_layout(r, *v);
  c.tp_comm_overlap_rs_sms = static_cast<std::uint32_t>(r.uint("tp_comm_overlap_rs_sms", 24, 0));
  if (r.get("tp_comm_overlap_rs_sms") && !c.tp_comm_overlap) {
    throw InputError(r.where("tp_comm_overlap_rs_sms", {"tp_comm_overlap"}), "workload.generator.tp_comm_overlap_rs_sms",
                     "is set but tp_comm_overlap is false (the margin belongs to the overlapped reduce-scatter)",
                     "set tp_comm_overlap: true or drop tp_comm_overlap_rs_sms");
  }
  c.micro_batch = static_cast<std::uint32_t>(r.uint("micro_batch", 1));
  c.global_batch = static_cast<std::uint32_t>(r.uint("global_batch", 0, 0));
  c.seq_len = static_cast<std::uint32_t>(r.uint("seq_len", 2048));
  if (auto v = r.get("dtype")) c.dtype = kernels::parse_dtype(*v, r.where("dtype"), "workload.generator.dtype");
  if (c.dtype == kernels::Dtype::kFp32 || c.dtype == kernels::Dtype::kTf32) {
    throw InputError(r.where("dtype"), "workload.generator.dtype", "fp32/tf32 training is not modelled", "use bf16, fp16 or fp8");
  }
  c.zero = static_cast<std::uint32_t>(r.uint("zero", 0, 0));
  if (auto v = r.get("recompute")) {
    if (*v == "none") c.recompute = Recompute::kNone;
    else if (*v == "selective") c.recompute = Recompute::kSelective;
    else if (*v == "full") c.recompute = Recompute::kFull;
    else throw InputError(r.where("recompute"), "workload.generator.recompute", "'" + *v + "' is not a mode", "use none, selective or full");
  }
  if (auto v = r.get("attention")) {
    if (*v == "flash") c.flash_attention = true;
    else if (*v == "flash2") c.flash_attention = c.flash2 = true;
    else if (*v == "unfused") c.flash_attention = false;
    else throw InputError(r.where("attention"), "workload.generator.attention", "'" + *v + "' is not an attention kind", "use flash, flash2 or unfused");
  }
  if (auto v = r.get("kernel_model")) {
    if (*v == "shape") c.efficiency.shape_model = true;
    else if (*v == "flat") c.efficiency.shape_model = false;
    else throw InputError(r.where("kernel_model"), "workload.generator.kernel_model", "'" + *v + "' is not a kernel model", "use shape or flat");
  }
  if (auto v = r.get("clock")) {
    if (*v == "sustained") c.efficiency.sustained_tables = true;
    else if (*v == "burst") c.efficiency.sustained_tables = false;
    else throw InputError(r.where("clock"), "workload.generator.clock", "'" + *v + "' is not a clock", "use sustained or burst");
  }
  c.overlap_grad_reduce = r.boolean("overlap_grad_reduce", true);
  c.bucket_params = r.uint("bucket_params", 0, 0, kMaxShape);
  c.grad_bytes = static_cast<std::uint32_t>(r.uint("grad_bytes", 2));
  c.iterations = static_cast<std::uint32_t>(r.uint("iterations", 1));
  if (auto v = r.get("fallback")) {
    if (*v == "roofline") c.fallback = kernels::Fallback::kRoofline;
    else if (*v == "none") c.fallback = kernels::Fallback::kNone;
    else throw InputError(r.where("fallback"), "workload.generator.fallback", "'" + *v + "' is not a fallback", "use roofline or none");
  }
  if (auto v = r.get("kernels")) {
    if (*v == "measured") c.measured_kernels = true;
    else if (*v == "model") c.measured_kernels = false;
    else throw InputError(r.where("kernels"), "workload.generator.kernels", "'" + *v + "' is not a kernel source", "use measured or model");
  }
  c.efficiency.compute = r.real("compute_efficiency", c.efficiency.compute);
  c.efficiency.memory = r.real("memory_efficiency", c.efficiency.memory);
}

/// `mode` and the inference keys (batch, prompt_tokens, output_tokens); training-only keys are
/// refused with mode: inference and inference keys without it. @throws engine::InputError.
void read_mode(const SpecReader& r, TrainConfig& c) {
  // Inference (docs/generators.md "Inference"): its own keys, and the training-only ones refused.
  if (auto v = r.get("mode")) {
    if (*v == "training") c.inference = false;
    else if (*v == "inference") c.inference = true;
    else throw InputError(r.where("mode"), "workload.generator.mode", "'" + *v + "' is not a mode", "use training or inference");
  }
  static const char* const kInferenceKeys[] = {"prompt_tokens", "output_tokens", "batch"};
  static const char* const kTrainingKeys[] = {"micro_batch", "global_batch", "seq_len", "recompute", "zero", "vp",
                                              "sequence_parallel", "tp_comm_overlap", "tp_comm_overlap_rs_sms",
                                              "overlap_grad_reduce", "bucket_params", "grad_bytes", "iterations",
                                              "account_for_embedding_in_pipeline_split",
                                              "account_for_loss_in_pipeline_split", "pipeline_layout"};
  if (c.inference) {
    for (const char* k : kTrainingKeys) {
      if (r.get(k)) {
        throw InputError(r.where(k, {"mode"}), std::string("workload.generator.") + k,
                         "is a training key but mode is inference",
                         "drop it (inference takes batch, prompt_tokens and output_tokens)");
      }
    }
    for (const char* k : kInferenceKeys) {
      if (!r.get(k)) {
        throw InputError(r.where("mode"), std::string("workload.generator.") + k, "missing for mode: inference",
                         "give batch, prompt_tokens and output_tokens (e.g. 16, 2048, 128)");
      }
    }
    c.prompt_tokens = static_cast<std::uint32_t>(r.uint("prompt_tokens", 0));
    c.output_tokens = static_cast<std::uint32_t>(r.uint("output_tokens", 0));
    c.batch = static_cast<std::uint32_t>(r.uint("batch", 0));
    c.sequence_parallel = false;  // activations replicated over TP (no SP in serving engines)
  } else {
    for (const char* k : kInferenceKeys) {
      if (r.get(k)) {
        throw InputError(r.where(k, {"mode"}), std::string("workload.generator.") + k,
                         "is an inference key but mode is training (the default)",
                         "set mode: inference, or drop it");
      }
    }
  }
}

}  // namespace

TrainConfig train_config_from_spec(const Spec& spec) {
  const SpecReader r{spec};
  TrainConfig c;
  const auto model = r.get("model");
  if (!model) {
    throw InputError(spec.file == "<spec>" ? std::string("<cli>") : spec.file, "workload.generator.model", "missing",
                     "name a model, e.g. --set workload.generator.model=gpt3-175b, or custom");
  }
  c.file = spec.file;
  for (const auto& [k, f] : spec.generator_file) {
    if (f == "<cli>") c.cli_fields.push_back(k);
  }
  read_model(r, *model, c);
  read_training(r, c);
  read_mode(r, c);
  return c;
}

}  // namespace fabricsim::jobs
