// `fabricsim kernels lookup|scale|profile-plan|gpus`: the kernel database and roofline scaling.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "jobs/generators.hpp"
#include "jobs/spec.hpp"
#include "kernels/kernel_db.hpp"

namespace {
// CLI11's PositiveNumber / NonNegativeNumber print their range up to DBL_MAX (300 digits).
const CLI::Validator kPositive(
    [](std::string& v) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      return (end != v.c_str() && *end == '\0' && std::isfinite(x) && x > 0) ? std::string() : "'" + v + "' must be a finite number > 0";
    },
    "POSITIVE");
const CLI::Validator kNonNegative(
    [](std::string& v) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      return (end != v.c_str() && *end == '\0' && std::isfinite(x) && x >= 0) ? std::string() : "'" + v + "' must be a finite number >= 0";
    },
    "NON-NEGATIVE");
}  // namespace

namespace fabricsim::app {
namespace {

struct KernelsOpts {
  std::string db, gpu = "H100", op = "gemm", dtype = "bf16", from, to, spec, out;
  double m = 0, n = 0, k = 0, flops = 0, bytes = 0, time_us = 0;
  bool no_model = false;
  std::vector<std::string> sets;
};

/// FLOPs/bytes of the query: --m/--n/--k give a GEMM (2mnk; (mk+kn+mn)·dtype bytes).
void work_of(const KernelsOpts& o, kernels::Dtype d, double& flops, double& bytes) {
  flops = o.flops;
  bytes = o.bytes;
  if (o.m > 0 || o.n > 0 || o.k > 0) {
    if (!(o.m > 0 && o.n > 0 && o.k > 0)) {
      throw engine::InputError("<cli>", "--m/--n/--k", "a GEMM needs all three dimensions", "give --m, --n and --k");
    }
    if (o.flops > 0) {
      throw engine::InputError("<cli>", "--flops", "given together with --m/--n/--k, which already define the FLOPs",
                               "give either --m/--n/--k or --flops");
    }
    flops = 2 * o.m * o.n * o.k;
    bytes = (o.m * o.k + o.k * o.n + o.m * o.n) * kernels::dtype_bytes(d);
  }
}

}  // namespace

Action add_kernels(CLI::App& app) {
  auto o = std::make_shared<KernelsOpts>();
  CLI::App* sub = app.add_subcommand("kernels", "kernel database: lookup, roofline scaling, profiling plans, GPU table");
  sub->require_subcommand(1);
  CLI::App* lookup = sub->add_subcommand("lookup", "time of one kernel call on a GPU (measured, interpolated, scaled or modelled)");
  lookup->add_option("--db", o->db, "kernel database CSV (default kernels/data/kernels.csv)");
  lookup->add_option("--gpu", o->gpu, "GPU type (fabricsim kernels gpus)");
  lookup->add_option("--op", o->op, "kernel kind: gemm, flash_attn_fwd, layernorm, rmsnorm, gelu, embedding, adam, ...");
  lookup->add_option("--dtype", o->dtype, "bf16, fp16, fp8, tf32 or fp32");
  lookup->add_option("--m", o->m, "GEMM rows")->check(kPositive);
  lookup->add_option("--n", o->n, "GEMM columns")->check(kPositive);
  lookup->add_option("--k", o->k, "GEMM inner dimension")->check(kPositive);
  lookup->add_option("--flops", o->flops, "FLOPs of the call (instead of --m/--n/--k)")->check(kNonNegative);
  lookup->add_option("--bytes", o->bytes, "HBM bytes of the call")->check(kNonNegative);
  lookup->add_flag("--no-model", o->no_model, "fail instead of extrapolating or using the analytic roofline");
  CLI::App* scale = sub->add_subcommand("scale", "roofline-scale a measured time from one GPU to another");
  scale->add_option("--from", o->from, "GPU the time was measured on")->required();
  scale->add_option("--to", o->to, "target GPU")->required();
  scale->add_option("--time-us", o->time_us, "measured time (us)")->required()->check(kPositive);
  scale->add_option("--op", o->op,
                    "kernel kind: sets the roofline class (gemm, attention: compute-bound; layernorm, gelu, "
                    "adam, ...: memory-bound); required unless --flops/--bytes or --m/--n/--k give the work");
  scale->add_option("--dtype", o->dtype, "dtype of the math");
  scale->add_option("--m", o->m, "GEMM rows")->check(kPositive);
  scale->add_option("--n", o->n, "GEMM columns")->check(kPositive);
  scale->add_option("--k", o->k, "GEMM inner dimension")->check(kPositive);
  scale->add_option("--flops", o->flops, "FLOPs of the call")->check(kNonNegative);
  scale->add_option("--bytes", o->bytes, "HBM bytes of the call")->check(kNonNegative);
  CLI::App* plan = sub->add_subcommand("profile-plan", "the distinct kernels a generator spec needs (input of kernels/profile)");
  plan->add_option("spec", o->spec, "spec with a workload.generator section")->check(CLI::ExistingFile);
  plan->add_option("--set", o->sets, "override a spec key (repeatable)");
  plan->add_option("-o,--output", o->out, "write the plan CSV here (default: stdout)");
  CLI::App* gpus = sub->add_subcommand("gpus", "the GPU specification table with sources");
  return [sub, lookup, scale, plan, gpus, o]() -> int {
    if (!*sub) return -1;
    const bool root = is_root();
    const kernels::Dtype d = kernels::parse_dtype(o->dtype, "<cli>", "--dtype");
    if (*lookup) {
      const auto db = kernels::KernelDb::load(o->db.empty() ? kernels::KernelDb::default_path() : o->db);
      const auto& g = kernels::find_gpu(o->gpu, "<cli>", "--gpu");
      double f = 0, b = 0;
      work_of(*o, d, f, b);
      if (!(f > 0) && !(b > 0)) {
        throw engine::InputError("<cli>", "kernels lookup", "no work given (the call would take 0 us)",
                                 "give --m/--n/--k for a GEMM, or --flops and/or --bytes");
      }
      const kernels::KernelShape shape =
          o->m > 0 ? kernels::KernelShape::gemm(o->m, o->n, o->k) : kernels::KernelShape{};
      const auto e = db.estimate(g, o->op, d, f, b, o->no_model ? kernels::Fallback::kNone : kernels::Fallback::kRoofline,
                                 kernels::RooflineEfficiency{}, shape);
      if (root) {
        std::printf("%s %s on %s: %.3f us (%s, %s-bound", o->op.c_str(), kernels::dtype_name(d), g.name.c_str(), e.time_us,
                    e.how.c_str(), kernels::kernel_class_name(e.cls));
        if (f > 0 && b > 0) std::printf(", intensity %.1f FLOP/B, ridge %.1f", f / b, g.ridge_flops_per_byte(d));
        std::printf(")\n");
        if (f > 0) std::printf("achieved %.1f TFLOP/s (%.1f%% of dense peak)\n", f / e.time_us / 1e6, 100 * f / (e.time_us * 1e-6) / g.peak_flops(d));
      }
      return 0;
    }
    if (*scale) {
      const auto& from = kernels::find_gpu(o->from, "<cli>", "--from");
      const auto& to = kernels::find_gpu(o->to, "<cli>", "--to");
      double f = 0, b = 0;
      work_of(*o, d, f, b);
      // Without the work or a kind the class would be a guess, and the two differ by the ratio
      // of the GPUs' FLOP/s to their HBM bandwidths (A100 -> H100: x0.32 compute, x0.61 memory).
      if (!(f > 0) && !(b > 0) && scale->count("--op") == 0) {
        throw engine::InputError("<cli>", "kernels scale",
                                 "the kernel's roofline class (compute- or memory-bound) is not given",
                                 "give --op KIND (gemm or attention: compute-bound; layernorm, gelu, embedding or "
                                 "adam: memory-bound), or the work: --flops and --bytes, or --m/--n/--k");
      }
      if (!(f > 0) && !(b > 0) && !kernels::known_kind(o->op)) {
        throw engine::InputError("<cli>", "--op " + o->op,
                                 "is not a known kernel kind, so its roofline class (compute or memory) is unknown",
                                 "give --flops and --bytes (or --m/--n/--k), or a kind such as gemm, attention, "
                                 "layernorm, gelu, embedding, adam");
      }
      const auto cls = kernels::classify(o->op, f, b, from, d);
      const double t = kernels::roofline_scale_us(o->time_us, cls, from, to, d);
      if (root) {
        std::printf("%.3f us on %s -> %.3f us on %s (%s-bound: %s)\n", o->time_us, from.name.c_str(), t, to.name.c_str(),
                    kernels::kernel_class_name(cls),
                    cls == kernels::KernelClass::kCompute
                        ? fmt::format("x {:.4g}/{:.4g} TFLOP/s", from.peak_flops(d) / 1e12, to.peak_flops(d) / 1e12).c_str()
                        : fmt::format("x {:.4g}/{:.4g} TB/s", from.hbm_tbps, to.hbm_tbps).c_str());
      }
      return 0;
    }
    if (*plan) {
      const jobs::Spec spec = jobs::load_spec(o->spec, o->sets);
      const auto cfg = jobs::train_config_from_spec(spec);
      const auto needs = jobs::kernel_plan(cfg);
      std::ostringstream s;
      s << "op,dtype,shape,flops,bytes,calls_per_iteration_rank0\n";
      for (const auto& n : needs) {
        s << fmt::format("{},{},\"{}\",{:.17g},{:.17g},{}\n", n.op, kernels::dtype_name(n.dtype), n.shape, n.flops, n.bytes,
                         n.calls);
      }
      if (root) {
        if (o->out.empty()) {
          std::fputs(s.str().c_str(), stdout);
        } else {
          std::ofstream f(o->out);
          if (!f) throw engine::InputError("<cli>", "-o " + o->out, "cannot write", "check the directory");
          f << s.str();
          std::printf("wrote %zu kernels to %s; measure them with: kernel_profile --plan %s -o measured.csv\n", needs.size(),
                      o->out.c_str(), o->out.c_str());
        }
      }
      return 0;
    }
    if (*gpus && root) {
      std::printf("%-7s %-16s %9s %9s %9s %8s %7s %9s %6s  %s\n", "gpu", "datasheet name", "bf16 TF", "fp8 TF", "tf32 TF",
                  "HBM GB", "HBM TB/s", "NVL GB/s", "domain", "source");
      for (const auto& g : kernels::gpu_specs()) {
        std::printf("%-7s %-16s %9.1f %9.1f %9.1f %8.0f %7.3f %9.0f %6u  %s\n", g.name.c_str(), g.full_name.c_str(),
                    g.bf16_tflops, g.fp8_tflops, g.tf32_tflops, g.hbm_gb, g.hbm_tbps, g.scaleup_gbps_bidir, g.scaleup_domain,
                    g.source.c_str());
      }
    }
    return 0;
  };
}

}  // namespace fabricsim::app
