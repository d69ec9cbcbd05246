#include "models/cc/registry.hpp"

#include "engine/errors.hpp"

namespace fabricsim::models {

const char* cc_name(CcKind k) {
  switch (k) {
#define FABRICSIM_CC_NAME(name, Class) \
  case CcKind::k##Class: return cc::Class::kName;
    FABRICSIM_CC_LIST(FABRICSIM_CC_NAME)
#undef FABRICSIM_CC_NAME
  }
  return "?";
}

namespace {

constexpr CcKind kKinds[] = {
#define FABRICSIM_CC_KIND(name, Class) CcKind::k##Class,
    FABRICSIM_CC_LIST(FABRICSIM_CC_KIND)
#undef FABRICSIM_CC_KIND
};

/// "a, b or c" over the registered names (with their summaries when `summaries`).
std::string name_list(bool summaries) {
  const char* const texts[] = {
#define FABRICSIM_CC_TEXT(name, Class) cc::Class::kName, cc::Class::kSummary,
      FABRICSIM_CC_LIST(FABRICSIM_CC_TEXT)
#undef FABRICSIM_CC_TEXT
  };
  const std::size_t n = sizeof(texts) / sizeof(texts[0]) / 2;
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += i + 1 == n ? " or " : ", ";
    out += texts[2 * i + (summaries ? 1 : 0)];
  }
  return out;
}

}  // namespace

CcKind parse_cc(const std::string& v, const std::string& file, const std::string& field) {
  for (const CcKind k : kKinds) {
    if (v == cc_name(k)) return k;
  }
  throw engine::InputError(file, field, "'" + v + "' is not a congestion control", "use " + name_list(false));
}

namespace cc {

const std::string& kind_help() {
  static const std::string help = "congestion control: " + name_list(true);
  return help;
}

const std::vector<ParamDecl>& param_decls() {
  static const std::vector<ParamDecl> all = [] {
    std::vector<ParamDecl> d;
#define FABRICSIM_CC_DECLS(name, Class) \
  for (const ParamDecl& p : Class::decls()) d.push_back(p);
    FABRICSIM_CC_LIST(FABRICSIM_CC_DECLS)
#undef FABRICSIM_CC_DECLS
    return d;
  }();
  return all;
}

void parse_params(const SpecReader& r, CcParams& p) {
#define FABRICSIM_CC_PARSE(name, Class) Class::parse(r, p.name);
  FABRICSIM_CC_LIST(FABRICSIM_CC_PARSE)
#undef FABRICSIM_CC_PARSE
}

void validate_params(const CcParams& p, const SpecReader& r) {
#define FABRICSIM_CC_VALIDATE(name, Class) Class::validate(p.name, r);
  FABRICSIM_CC_LIST(FABRICSIM_CC_VALIDATE)
#undef FABRICSIM_CC_VALIDATE
}

}  // namespace cc
}  // namespace fabricsim::models
