#include "jobs/table.hpp"

#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "jobs/output_path.hpp"

namespace fabricsim::jobs {

namespace fs = std::filesystem;

template <class T>
std::vector<T>& Table::column(const std::string& name, const T& fill) {
  const int i = find(name);
  if (i >= 0) return std::get<std::vector<T>>(cols_[static_cast<std::size_t>(i)].values);
  cols_.push_back({name, std::vector<T>(rows_, fill)});
  return std::get<std::vector<T>>(cols_.back().values);
}

std::vector<std::string>& Table::strings(const std::string& name) { return column<std::string>(name, ""); }
std::vector<std::int64_t>& Table::ints(const std::string& name) { return column<std::int64_t>(name, -1); }
std::vector<double>& Table::doubles(const std::string& name) {
  return column<double>(name, std::numeric_limits<double>::quiet_NaN());
}

int Table::find(const std::string& name) const {
  for (std::size_t i = 0; i < cols_.size(); ++i) {
    if (cols_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::size_t Table::add_row() {
  for (auto& c : cols_) {
    std::visit(
        [](auto& v) {
          using T = typename std::decay_t<decltype(v)>::value_type;
          if constexpr (std::is_same_v<T, std::string>) v.emplace_back();
          else if constexpr (std::is_same_v<T, std::int64_t>) v.push_back(-1);
          else v.push_back(std::numeric_limits<double>::quiet_NaN());
        },
        c.values);
  }
  return rows_++;
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + "\"";
}

void write_text_atomic(const std::string& path_in, const std::string& text) {
  const std::string path = resolve_output_file(path_in, path_in);
  if (is_null_device(path)) return;  // discarded, as writing to it would
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw engine::InputError(path, "<file>", "cannot write", "check the directory exists and is writable");
    out << text;
    if (!out) throw engine::InputError(path, "<file>", "write failed", "check free disk space");
  }
  fs::rename(tmp, path);
}

}  // namespace

std::string Table::to_csv() const {
  std::ostringstream out;
  for (std::size_t c = 0; c < cols_.size(); ++c) out << (c ? "," : "") << csv_field(cols_[c].name);
  out << "\n";
  for (std::size_t r = 0; r < rows_; ++r) {
    for (std::size_t c = 0; c < cols_.size(); ++c) {
      if (c) out << ",";
      std::visit(
          [&](const auto& v) {
            using T = typename std::decay_t<decltype(v)>::value_type;
            if constexpr (std::is_same_v<T, std::string>) out << csv_field(v[r]);
            else if constexpr (std::is_same_v<T, std::int64_t>) {
              if (v[r] >= 0) out << v[r];
            } else if (std::isfinite(v[r])) {
              out << fmt::format("{:.10g}", v[r]);
            }
          },
          cols_[c].values);
    }
    out << "\n";
  }
  return out.str();
}

void Table::write_csv(const std::string& path) const { write_text_atomic(path, to_csv()); }

void Table::write_h5(const std::string& path, const std::string& dataset,
                     const std::vector<std::pair<std::string, std::string>>& attrs) const {
  // Row layout: members packed in column order.
  std::vector<std::size_t> offset(cols_.size()), width(cols_.size());
  std::size_t row_bytes = 0;
  for (std::size_t c = 0; c < cols_.size(); ++c) {
    std::size_t w = 8;
    if (const auto* s = std::get_if<std::vector<std::string>>(&cols_[c].values)) {
      w = 1;
      for (const auto& v : *s) w = std::max(w, v.size());
    }
    offset[c] = row_bytes;
    width[c] = w;
    row_bytes += w;
  }
  std::vector<char> buf(std::max<std::size_t>(1, row_bytes * rows_), 0);
  for (std::size_t r = 0; r < rows_; ++r) {
    char* row = buf.data() + r * row_bytes;
    for (std::size_t c = 0; c < cols_.size(); ++c) {
      std::visit(
          [&](const auto& v) {
            using T = typename std::decay_t<decltype(v)>::value_type;
            if constexpr (std::is_same_v<T, std::string>) std::memcpy(row + offset[c], v[r].data(), v[r].size());
            else std::memcpy(row + offset[c], &v[r], sizeof(T));
          },
          cols_[c].values);
    }
  }
  const std::string target = resolve_output_file(path, path);
  if (is_null_device(target)) return;  // discarded, as writing to it would
  const std::string tmp = target + ".tmp";
  std::vector<hid_t> strtypes;
  hid_t file = -1, type = -1, space = -1, dset = -1;
  auto cleanup = [&] {
    if (dset >= 0) H5Dclose(dset);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    for (hid_t t : strtypes) H5Tclose(t);
    if (file >= 0) H5Fclose(file);
    dset = space = type = file = -1;
    strtypes.clear();
  };
  auto fail = [&](const std::string& what) {
    cleanup();
    std::error_code ec;
    fs::remove(tmp, ec);
    throw engine::InternalError("HDF5: " + what + " (" + path + ")");
  };
  if (!fs::is_directory(fs::absolute(path).parent_path())) {
    throw engine::InputError(path, "<file>", "its directory does not exist", "create it first");
  }
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  file = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) throw engine::InputError(path, "<file>", "cannot create the HDF5 file", "check the directory is writable");
  type = H5Tcreate(H5T_COMPOUND, std::max<std::size_t>(1, row_bytes));
  for (std::size_t c = 0; c < cols_.size(); ++c) {
    hid_t mt = -1;
    if (std::holds_alternative<std::vector<std::string>>(cols_[c].values)) {
      mt = H5Tcopy(H5T_C_S1);
      H5Tset_size(mt, width[c]);
      H5Tset_strpad(mt, H5T_STR_NULLPAD);
      strtypes.push_back(mt);
    } else if (std::holds_alternative<std::vector<std::int64_t>>(cols_[c].values)) {
      mt = H5T_NATIVE_INT64;
    } else {
      mt = H5T_NATIVE_DOUBLE;
    }
    if (H5Tinsert(type, cols_[c].name.c_str(), offset[c], mt) < 0) fail("cannot add member " + cols_[c].name);
  }
  const hsize_t dims[1] = {rows_};
  space = H5Screate_simple(1, dims, nullptr);
  const std::string name = dataset.empty() ? "/table" : dataset;
  dset = H5Dcreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (dset < 0) fail("cannot create dataset " + name);
  if (rows_ > 0 && H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) fail("write failed");
  for (const auto& [k, v] : attrs) {
    hid_t at = H5Tcopy(H5T_C_S1);
    H5Tset_size(at, std::max<std::size_t>(1, v.size()));
    hid_t as = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(dset, k.c_str(), at, as, H5P_DEFAULT, H5P_DEFAULT);
    const std::string val = v.empty() ? std::string(1, '\0') : v;
    const herr_t rc = a >= 0 ? H5Awrite(a, at, val.data()) : -1;
    if (a >= 0) H5Aclose(a);
    H5Sclose(as);
    H5Tclose(at);
    if (rc < 0) fail("cannot write attribute " + k);
  }
  cleanup();
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) fail("rename failed: " + ec.message());
}

}  // namespace fabricsim::jobs
