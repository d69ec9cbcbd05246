#include "models/cc/none.hpp"

namespace fabricsim::models::cc {

ParamDecls None::decls() { return {}; }

}  // namespace fabricsim::models::cc
