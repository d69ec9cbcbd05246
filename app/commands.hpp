#pragma once
// Subcommands of the fabricsim CLI. Each lives in its own app/cmd_<name>.cpp and registers
// itself in app/main.cpp's table: add_<name>(app) declares options and returns the action run
// after parsing (on every MPI process; print only on rank 0). Actions throw
// engine::InputError for bad input (exit 2).
#include <CLI/CLI.hpp>
#include <functional>

namespace fabricsim::app {

/// What a subcommand does once parsed; returns the exit code.
using Action = std::function<int()>;

/// True on MPI rank 0 of MPI_COMM_WORLD (the one that prints).
bool is_root();

Action add_run(CLI::App& app);
Action add_validate(CLI::App& app);
Action add_describe(CLI::App& app);
Action add_kernels(CLI::App& app);
Action add_generate(CLI::App& app);
Action add_nccl_tests(CLI::App& app);
Action add_plan(CLI::App& app);
Action add_sweep(CLI::App& app);
Action add_regress(CLI::App& app);
Action add_report(CLI::App& app);
Action add_compare(CLI::App& app);
Action add_ladder(CLI::App& app);
Action add_topo(CLI::App& app);

}  // namespace fabricsim::app
