#pragma once
/// @file fabric_spec.hpp
/// Spec keys of the packet fabric (sections `switch:`, `nic:`, `cc:`; models/core/fabric_params.hpp).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jobs/spec.hpp"
#include "models/core/fabric_params.hpp"

namespace fabricsim::jobs {

/// The fabric's keys with type, default and meaning (merged into spec_keys()).
const std::vector<SpecKey>& fabric_spec_keys();

/// Reads the fabric keys. `get(key)` returns the key's text if present; `file_of(key)` the file
/// (or "<cli>") it came from. @throws engine::InputError naming file, key and a fix.
void parse_fabric_keys(const std::function<std::optional<std::string>(const std::string&)>& get,
                       const std::function<std::string(const std::string&)>& file_of,
                       models::FabricParams& out);

}  // namespace fabricsim::jobs
