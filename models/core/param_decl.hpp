#pragma once
/// @file param_decl.hpp
/// A model's spec parameters, declared beside the model (as SST declares a component's
/// parameters next to it). The spec key table (jobs/spec.cpp), `fabricsim describe spec` and
/// docs/config.md (scripts/gen_config_doc.sh) are built from these declarations, so a plug-in
/// (a congestion control, a topology builder) adds its keys by declaring them here and nowhere
/// else.
#include <span>

namespace fabricsim::models {

/// One spec key of a model: its dotted path, value type, default, unit and meaning, and the
/// source of the default (paper section, spec, vendor document). Plain constant data.
struct ParamDecl {
  const char* path;          ///< dotted spec path, e.g. "cc.timely_t_low"
  const char* type;          ///< "string" | "int" | "uint" | "auto-int" | "rate" | "time" | "bytes" | "double" | "bool" | "enum"
  const char* default_text;  ///< default as the spec would write it
  const char* help;          ///< meaning, with the unit where the type does not carry one
  const char* source;        ///< where the default comes from ("" when it is a fabricsim choice)
};

/// A model family's declarations, in documentation order.
using ParamDecls = std::span<const ParamDecl>;

}  // namespace fabricsim::models
