#pragma once
/// @file table.hpp
/// A small column table (strings, integers, doubles) written as CSV and as one HDF5 compound
/// dataset. Used for the sweep aggregate and the regression report; written serially by one
/// process (the tables have one row per design point or metric, not per packet).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace fabricsim::jobs {

/// One column: a name and one value per row, all of one type.
struct TableColumn {
  std::string name;  ///< column name (CSV header, HDF5 compound member name)
  std::variant<std::vector<std::string>, std::vector<std::int64_t>, std::vector<double>> values;
};

/// Rows are the common length of all columns. Missing numeric values are written as empty CSV
/// cells and as NaN (double) or -1 (integer) in HDF5.
class Table {
 public:
  /// Adds (or returns) a string column; existing rows get "".
  std::vector<std::string>& strings(const std::string& name);
  /// Adds (or returns) an integer column; existing rows get -1.
  std::vector<std::int64_t>& ints(const std::string& name);
  /// Adds (or returns) a double column; existing rows get NaN.
  std::vector<double>& doubles(const std::string& name);
  /// Appends one empty row to every column (strings "", ints -1, doubles NaN) and returns its index.
  std::size_t add_row();
  /// Number of rows.
  std::size_t rows() const { return rows_; }
  /// The columns in insertion order.
  const std::vector<TableColumn>& columns() const { return cols_; }
  /// Index of a column by name, or -1.
  int find(const std::string& name) const;

  /// The table as RFC 4180 CSV (header line, fields with , " or newline quoted).
  std::string to_csv() const;
  /// Writes to_csv() to `path` atomically (temporary file + rename).
  /// @throws engine::InputError if the file cannot be written.
  void write_csv(const std::string& path) const;
  /// Writes the table as one compound dataset `dataset` (e.g. "/points") of a new HDF5 file at
  /// `path` (written to a temporary name and renamed). Strings are fixed-length, NUL-padded, as
  /// long as the longest value (at least 1). `attrs` become string attributes of the dataset.
  /// Serial HDF5 on the calling process only.
  /// @throws engine::InternalError if HDF5 fails; engine::InputError if the path is not writable.
  void write_h5(const std::string& path, const std::string& dataset,
                const std::vector<std::pair<std::string, std::string>>& attrs) const;

 private:
  template <class T>
  std::vector<T>& column(const std::string& name, const T& fill);
  std::vector<TableColumn> cols_;
  std::size_t rows_ = 0;
};

}  // namespace fabricsim::jobs
