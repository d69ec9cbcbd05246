// `fabricsim generate SPEC -o PREFIX`: builds the workload of a spec's workload.generator section
// and writes it as Chakra ET files PREFIX.<rank>.et (+ PREFIX.comm_groups.json).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "io/chakra_writer.hpp"
#include "jobs/generators.hpp"
#include "jobs/spec.hpp"

namespace fabricsim::app {

Action add_generate(CLI::App& app) {
  struct Opts {
    std::string spec, prefix;
    std::vector<std::string> sets;
    bool memory = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("generate", "generate a Megatron-style training (or inference) workload and write it as Chakra ET");
  sub->add_option("spec", o->spec, "spec with a workload.generator section")->check(CLI::ExistingFile);
  sub->add_option("--set", o->sets, "override a spec key, e.g. --set workload.generator.model=gpt3-175b (repeatable)");
  sub->add_option("-o,--output", o->prefix, "write PREFIX.<rank>.et and PREFIX.comm_groups.json (default: only print)");
  sub->add_flag("--memory", o->memory,
                "only estimate the HBM per GPU, per pipeline rank (no DAG is built, so any size is instant; "
                "docs/generators.md \"Memory per GPU\")");
  return [sub, o]() -> int {
    if (!*sub) return -1;
    // `-o ''` (an unset shell variable) printed the summary and exited 0 without writing a trace.
    if (sub->count("-o") > 0 && o->prefix.empty()) {
      throw engine::InputError("<cli>", "-o", "the output prefix is empty",
                               "give a prefix, e.g. -o /tmp/l8b (writes /tmp/l8b.<rank>.et), or drop -o to only print");
    }
    const jobs::Spec spec = jobs::load_spec(o->spec, o->sets);
    const auto cfg = jobs::train_config_from_spec(spec);
    if (o->memory) {
      if (!o->prefix.empty()) throw engine::InputError("<cli>", "--memory", "writes no trace", "drop -o or --memory");
      jobs::validate_train(cfg);
      const jobs::MemoryEstimate m = cfg.inference ? jobs::estimate_inference_memory(cfg) : jobs::estimate_memory(cfg);
      if (!is_root()) return 0;
      std::printf("memory per GPU (estimate, lower bound; GB = 1e9 B) on %s (%.0f GB HBM):\n", cfg.gpu.c_str(),
                  m.capacity_bytes / 1e9);
      std::printf("%8s %12s %9s %9s %9s %11s %9s %9s\n", "pp_rank", "params", "weights", "grads", "optimizer",
                  "activations", "inflight", "total");
      for (const auto& st : m.stages) {
        std::printf("%8u %12.4g %9.2f %9.2f %9.2f %11.2f %9.3g %9.2f%s\n", st.pp_rank, st.params, st.weights_bytes / 1e9,
                    st.grads_bytes / 1e9, st.optimizer_bytes / 1e9, st.activation_bytes / 1e9, st.inflight,
                    st.total_bytes() / 1e9, st.pp_rank == m.peak_stage ? "  <- peak" : "");
      }
      const std::string w = cfg.inference ? jobs::inference_memory_warning(cfg, m) : jobs::memory_warning(cfg, m);
      if (!w.empty()) std::fprintf(stderr, "warning: %s\n", engine::printable(w).c_str());
      return 0;
    }
    const auto db = jobs::load_kernel_db(spec.generator.count("kernel_db") ? spec.generator.at("kernel_db") : "");
    const auto g = jobs::generate_training(cfg, db);
    if (!is_root()) return 0;
    std::string groups;
    if (!o->prefix.empty()) {
      if (o->prefix.back() == '/' || std::filesystem::is_directory(o->prefix)) {
        throw engine::InputError("<cli>", "-o " + o->prefix, "is a directory, not a file prefix",
                                 "give a prefix such as " + (std::filesystem::path(o->prefix) / "trace").string() +
                                     " (writes trace.<rank>.et)");
      }
      // A trace written earlier under this prefix with more ranks would stay behind and be read
      // together with the new files (the reader takes PREFIX.0.et .. PREFIX.<n-1>.et).
      const std::string stale = o->prefix + "." + std::to_string(g.workload.ranks) + ".et";
      if (std::filesystem::exists(stale)) {
        throw engine::InputError("<cli>", "-o " + o->prefix,
                                 stale + " exists: a trace with more ranks was written under this prefix",
                                 "remove " + o->prefix + ".*.et (and .comm_groups.json) or choose another prefix");
      }
      const auto dir = std::filesystem::absolute(o->prefix).parent_path();
      if (!std::filesystem::is_directory(dir)) {
        throw engine::InputError("<cli>", "-o " + o->prefix, "directory " + dir.string() + " does not exist", "create it first");
      }
      groups = io::write_chakra(g.workload, o->prefix);
    }
    const auto& s = g.stats;
    std::printf("workload: %s\n", g.workload.source.c_str());
    if (g.infer.used) {
      std::printf("ranks %u, communicators %zu, nodes %llu\n", g.workload.ranks, g.workload.groups.size(),
                  static_cast<unsigned long long>(s.nodes));
      std::printf("model: %.4g parameters, %.4g tokens through the model (prompts + decode steps, all replicas)\n",
                  s.params, s.tokens);
    } else {
      std::printf("ranks %u, communicators %zu, nodes %llu, micro-batches per DP rank %u\n", g.workload.ranks,
                  g.workload.groups.size(), static_cast<unsigned long long>(s.nodes), s.microbatches);
      std::printf("model: %.4g parameters, %.4g tokens per iteration\n", s.params, s.tokens);
    }
    if (g.infer.used) {
      // Per phase, all replicas: the generated kernels' FLOPs beside the closed form.
      double pre_cf = 0, dec = 0, dec_cf = 0;
      pre_cf = cfg.dp * jobs::closed_form_inference_flops(cfg.model, cfg.batch, cfg.prompt_tokens, 0);
      for (std::uint32_t k = 1; k < cfg.output_tokens; ++k) {
        dec += g.infer.phase_flops[k];
        dec_cf += cfg.dp * jobs::closed_form_inference_flops(cfg.model, cfg.batch, cfg.prompt_tokens, k);
      }
      std::printf("inference: batch %u per replica, %u replica(s), prompt %u, output %u tokens (%u decode steps)\n",
                  cfg.batch, cfg.dp, cfg.prompt_tokens, cfg.output_tokens, cfg.output_tokens - 1);
      std::printf("FLOPs: prefill %.4g (closed form %.4g), decode %.4g (closed form %.4g)\n", g.infer.phase_flops[0],
                  pre_cf, dec, dec_cf);
      std::printf("KV cache read by rank 0's decode attention: %.4g bytes\n", g.infer.kv_read_bytes_rank0);
    } else {
      std::printf("FLOPs per iteration: model %.4g (closed form %.4g), with recompute %.4g\n", s.model_flops,
                  jobs::closed_form_model_flops(cfg.model, s.tokens, cfg.seq_len), s.hw_flops);
    }
    std::printf("kernels: %llu measured/interpolated, %llu roofline-scaled from another GPU, %llu modelled\n",
                static_cast<unsigned long long>(s.kernels_measured), static_cast<unsigned long long>(s.kernels_scaled),
                static_cast<unsigned long long>(s.kernels_modelled));
    if (!s.memory.stages.empty()) {
      const auto& pk = s.memory.peak();
      std::printf("memory per GPU (estimate, lower bound): %.1f GB on pipeline rank %u (weights %.1f, gradients %.1f, "
                  "optimizer %.1f, activations %.1f GB) of %.0f GB HBM\n",
                  pk.total_bytes() / 1e9, pk.pp_rank, pk.weights_bytes / 1e9, pk.grads_bytes / 1e9,
                  pk.optimizer_bytes / 1e9, pk.activation_bytes / 1e9, s.memory.capacity_bytes / 1e9);
    }
    for (const auto& w : g.workload.warnings) std::fprintf(stderr, "warning: %s\n", engine::printable(w).c_str());
    std::printf("rank 0 compute: %s %s\n",
                engine::format_time(static_cast<engine::SimTime>(s.compute_ps_rank0 / cfg.iterations)).c_str(),
                g.infer.used ? "(prefill + decode)" : "per iteration");
    if (!o->prefix.empty()) {
      std::printf("wrote %s.0.et .. %s.%u.et%s\n", o->prefix.c_str(), o->prefix.c_str(), g.workload.ranks - 1,
                  groups.empty() ? "" : fmt::format(" and {} (pass it as workload.comm_groups)", groups).c_str());
    }
    return 0;
  };
}

}  // namespace fabricsim::app
