#include "engine/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/errors.hpp"
#include "engine/rng.hpp"

namespace fabricsim::engine {
namespace {

constexpr char kMagic[8] = {'F', 'S', 'I', 'M', 'C', 'K', 'P', 'T'};
// Byte offsets of the header fields (little or big endian as the host: see state_io.hpp).
constexpr std::size_t kOffVersion = 8, kOffKind = 12, kOffPart = 16, kOffProcs = 20, kOffThreads = 24,
                      kOffBuildHash = 32, kOffRunHash = 40, kOffTime = 48, kOffEvents = 56, kOffPayBytes = 64,
                      kOffPaySum = 72, kOffBuild = 80, kOffHeadSum = 120;
static_assert(kOffBuild + kCheckpointBuildChars == kOffHeadSum && kOffHeadSum + 8 == kCheckpointHeaderBytes);

template <class T>
T load_at(std::span<const std::byte> b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}
template <class T>
void store_at(std::vector<std::byte>& b, std::size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}

std::string cut_build(const std::string& s) { return s.substr(0, kCheckpointBuildChars); }

std::uint64_t build_hash(const std::string& build) {
  return checkpoint_checksum(std::as_bytes(std::span(build.data(), build.size())));
}

/// Collective: when any process has a message, every process throws the lowest one's.
void agree(MPI_Comm comm, const std::string& local) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = local.empty() ? size : rank, first = mine;
  if (size > 1) MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return;
  std::string msg = local;
  if (size > 1) {
    int len = static_cast<int>(msg.size());
    MPI_Bcast(&len, 1, MPI_INT, first, comm);
    msg.resize(static_cast<std::size_t>(len));
    MPI_Bcast(msg.data(), len, MPI_CHAR, first, comm);
  }
  throw InputError(InputError::Whole{}, msg);
}

/// Writes `bytes` to `path` atomically (temp file in the same directory, fsync, rename).
/// @returns "" or the error line.
std::string write_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  const std::string tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return path.string() + ": cannot be created: " + std::strerror(errno) + "; check --checkpoint-dir";
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;  // a signal (SIGTERM/SIGUSR1 handler) interrupted the write
      const std::string e = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return path.string() + ": write failed: " + e + "; free disk space or choose another --checkpoint-dir";
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return path.string() + ": write failed: " + std::strerror(errno) + "; choose another --checkpoint-dir";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = std::strerror(errno);
    ::unlink(tmp.c_str());
    return path.string() + ": rename failed: " + e;
  }
  return {};
}

/// Reads a whole file; "" in `err` or the error line.
std::vector<std::byte> read_all(const std::string& path, std::string& err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = path + ": checkpoint: cannot be opened; give the directory a checkpoint run wrote (--checkpoint-dir)";
    return {};
  }
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

/// Checks the header and payload of one file; "" or the error line. Fills `h` and `payload`.
std::string check_file(const std::string& file, const std::vector<std::byte>& bytes, CheckpointHeader& h,
                       std::span<const std::byte>& payload) {
  try {
    h = parse_checkpoint_header(bytes, file);
  } catch (const InputError& e) {
    return e.what();
  }
  const std::size_t have = bytes.size() - kCheckpointHeaderBytes;
  if (h.payload_bytes != have) {
    return file + ": payload: " + std::to_string(have) + " bytes after the header, the header says " +
           std::to_string(h.payload_bytes) + " (truncated or extended file); use an intact checkpoint";
  }
  payload = std::span<const std::byte>(bytes).subspan(kCheckpointHeaderBytes);
  if (checkpoint_checksum(payload) != h.payload_checksum) {
    return file + ": payload: checksum does not match (corrupt file); use an intact checkpoint";
  }
  return {};
}

std::string identity_error(const CheckpointHeader& h, const CheckpointIdentity& id, const std::string& file) {
  try {
    check_checkpoint_identity(h, id, file);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

std::uint64_t checkpoint_checksum(std::span<const std::byte> bytes) {
  std::uint64_t h = mix64(0x6A09E667F3BCC909ull ^ bytes.size());
  const std::size_t words = bytes.size() / 8;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, bytes.data() + 8 * i, 8);
    h = mix64(h ^ w) + 0x9E3779B97F4A7C15ull;
  }
  std::uint64_t tail = 0;
  if (bytes.size() > 8 * words) std::memcpy(&tail, bytes.data() + 8 * words, bytes.size() - 8 * words);
  return mix64(h ^ tail ^ (bytes.size() - 8 * words));
}

CheckpointHeader parse_checkpoint_header(std::span<const std::byte> b, const std::string& file) {
  const auto bad = [&](const std::string& problem, const std::string& fix) -> InputError {
    return InputError(file, "header", problem, fix);
  };
  if (b.size() < kCheckpointHeaderBytes) {
    throw bad(std::to_string(b.size()) + " bytes, fewer than the " + std::to_string(kCheckpointHeaderBytes) +
                  "-byte checkpoint header (truncated file)",
              "use an intact checkpoint");
  }
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) {
    throw bad("not a fabricsim checkpoint (wrong magic)", "give a checkpoint directory written by fabricsim run");
  }
  if (load_at<std::uint64_t>(b, kOffHeadSum) != checkpoint_checksum(b.first(kOffHeadSum))) {
    throw bad("header checksum does not match (corrupt file)", "use an intact checkpoint");
  }
  CheckpointHeader h;
  h.format_version = load_at<std::uint32_t>(b, kOffVersion);
  if (h.format_version != kCheckpointFormatVersion) {
    throw bad("format version " + std::to_string(h.format_version) + ", this fabricsim reads version " +
                  std::to_string(kCheckpointFormatVersion),
              "restart with the fabricsim build that wrote it");
  }
  const auto kind = load_at<std::uint32_t>(b, kOffKind);
  if (kind != CheckpointHeader::kPart && kind != CheckpointHeader::kManifest) {
    throw bad("unknown file kind " + std::to_string(kind), "use an intact checkpoint");
  }
  h.kind = static_cast<CheckpointHeader::Kind>(kind);
  h.part = load_at<std::uint32_t>(b, kOffPart);
  h.processes = load_at<std::uint32_t>(b, kOffProcs);
  h.threads = load_at<std::uint32_t>(b, kOffThreads);
  h.build_hash = load_at<std::uint64_t>(b, kOffBuildHash);
  h.run_hash = load_at<std::uint64_t>(b, kOffRunHash);
  h.time_ps = load_at<SimTime>(b, kOffTime);
  h.events = load_at<std::uint64_t>(b, kOffEvents);
  h.payload_bytes = load_at<std::uint64_t>(b, kOffPayBytes);
  h.payload_checksum = load_at<std::uint64_t>(b, kOffPaySum);
  const char* s = reinterpret_cast<const char*>(b.data() + kOffBuild);
  h.build.assign(s, strnlen(s, kCheckpointBuildChars));
  if (h.processes == 0 || h.threads == 0 || h.part >= h.processes || h.time_ps < 0) {
    throw bad("inconsistent fields (part " + std::to_string(h.part) + " of " + std::to_string(h.processes) +
                  " processes, " + std::to_string(h.threads) + " threads, t=" + std::to_string(h.time_ps) + " ps)",
              "use an intact checkpoint");
  }
  return h;
}

std::vector<std::byte> encode_checkpoint(CheckpointHeader h, std::span<const std::byte> payload) {
  std::vector<std::byte> b(kCheckpointHeaderBytes + payload.size(), std::byte{0});
  std::memcpy(b.data(), kMagic, sizeof kMagic);
  store_at<std::uint32_t>(b, kOffVersion, h.format_version);
  store_at<std::uint32_t>(b, kOffKind, h.kind);
  store_at<std::uint32_t>(b, kOffPart, h.part);
  store_at<std::uint32_t>(b, kOffProcs, h.processes);
  store_at<std::uint32_t>(b, kOffThreads, h.threads);
  store_at<std::uint64_t>(b, kOffBuildHash, h.build_hash);
  store_at<std::uint64_t>(b, kOffRunHash, h.run_hash);
  store_at<SimTime>(b, kOffTime, h.time_ps);
  store_at<std::uint64_t>(b, kOffEvents, h.events);
  store_at<std::uint64_t>(b, kOffPayBytes, payload.size());
  store_at<std::uint64_t>(b, kOffPaySum, checkpoint_checksum(payload));
  const std::string build = cut_build(h.build);
  std::memcpy(b.data() + kOffBuild, build.data(), build.size());
  store_at<std::uint64_t>(b, kOffHeadSum, checkpoint_checksum(std::span<const std::byte>(b).first(kOffHeadSum)));
  if (!payload.empty()) std::memcpy(b.data() + kCheckpointHeaderBytes, payload.data(), payload.size());
  return b;
}

void check_checkpoint_identity(const CheckpointHeader& h, const CheckpointIdentity& id, const std::string& file) {
  if (h.build_hash != build_hash(id.build)) {
    throw InputError(file, "build", "written by fabricsim " + h.build + ", this is fabricsim " + cut_build(id.build),
                     "restart with the build that wrote it");
  }
  if (h.run_hash != id.run_hash) {
    throw InputError(file, "spec",
                     "written for another spec or seed (run hash " + std::to_string(h.run_hash) + ", this run's is " +
                         std::to_string(id.run_hash) + ")",
                     "restart with the same spec, --set options, workload and seed");
  }
  if (h.processes != id.processes) {
    throw InputError(file, "processes",
                     "written by " + std::to_string(h.processes) + " MPI process(es), this run has " +
                         std::to_string(id.processes),
                     "restart with mpiexec -n " + std::to_string(h.processes));
  }
  if (h.threads != id.threads) {
    throw InputError(file, "threads",
                     "written with " + std::to_string(h.threads) + " engine thread(s) per process, this run has " +
                         std::to_string(id.threads),
                     "restart with --threads " + std::to_string(h.threads));
  }
}

std::string write_checkpoint(MPI_Comm comm, const std::string& dir, const CheckpointIdentity& id, SimTime time_ps,
                             std::uint64_t events, std::span<const std::byte> part) {
  namespace fs = std::filesystem;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::string name = "ckpt-t" + std::to_string(time_ps) + "ps";
  const fs::path cdir = fs::path(dir) / name;
  std::string err;
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(cdir, ec);
    if (ec) err = cdir.string() + ": checkpoint: cannot create the directory: " + ec.message() + "; check --checkpoint-dir";
  }
  agree(comm, err);  // also the barrier: the directory exists for everybody
  CheckpointHeader h;
  h.kind = CheckpointHeader::kPart;
  h.part = static_cast<std::uint32_t>(rank);
  h.processes = id.processes;
  h.threads = id.threads;
  h.build_hash = build_hash(id.build);
  h.build = id.build;
  h.run_hash = id.run_hash;
  h.time_ps = time_ps;
  h.events = events;
  const auto bytes = encode_checkpoint(h, part);
  err = write_atomic(cdir / ("part-" + std::to_string(rank) + ".bin"), bytes);
  // The manifest lists every part's size and checksum, so a part replaced later is detected.
  std::uint64_t mine[3] = {part.size(), checkpoint_checksum(part), events};
  std::vector<std::uint64_t> all(3 * static_cast<std::size_t>(size));
  MPI_Gather(mine, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T, 0, comm);
  agree(comm, err);  // every part exists before the manifest is written
  if (rank == 0) {
    CheckpointHeader m = h;
    m.kind = CheckpointHeader::kManifest;
    m.part = 0;
    m.events = 0;
    for (int p = 0; p < size; ++p) m.events += all[3 * static_cast<std::size_t>(p) + 2];
    err = write_atomic(cdir / "manifest.bin", encode_checkpoint(m, std::as_bytes(std::span(all))));
    if (err.empty()) {
      const std::string latest = name + "\n";
      err = write_atomic(fs::path(dir) / "latest", std::as_bytes(std::span(latest.data(), latest.size())));
    }
  }
  agree(comm, err);
  return cdir.string();
}

std::string resolve_checkpoint_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(path) / "manifest.bin", ec)) return path;
  std::ifstream latest(fs::path(path) / "latest");
  std::string name;
  if (latest && std::getline(latest, name) && !name.empty() && name.find('/') == std::string::npos) {
    return (fs::path(path) / name).string();
  }
  return path;
}

LoadedCheckpoint read_checkpoint(MPI_Comm comm, const std::string& path, const CheckpointIdentity& expected) {
  namespace fs = std::filesystem;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  LoadedCheckpoint out;
  out.path = resolve_checkpoint_path(path);
  // The manifest: every process reads and checks it (a shared file system is assumed, as for the
  // spec), so that each can check its part against it.
  const std::string mfile = (fs::path(out.path) / "manifest.bin").string();
  std::string err;
  CheckpointHeader m;
  std::span<const std::byte> mpay;
  std::vector<std::byte> mbytes;
  std::error_code ec;
  if (!fs::exists(mfile, ec)) {
    err = mfile + ": checkpoint: missing (not a checkpoint directory, or an incomplete checkpoint whose writer was "
                  "interrupted); give a directory that holds manifest.bin, or the --checkpoint-dir with `latest`";
  } else {
    mbytes = read_all(mfile, err);
  }
  if (err.empty()) err = check_file(mfile, mbytes, m, mpay);
  if (err.empty() && m.kind != CheckpointHeader::kManifest) err = mfile + ": header: not a manifest; use an intact checkpoint";
  if (err.empty()) err = identity_error(m, expected, mfile);
  if (err.empty() && mpay.size() != 3 * 8 * static_cast<std::size_t>(m.processes)) {
    err = mfile + ": payload: wrong size for " + std::to_string(m.processes) + " parts; use an intact checkpoint";
  }
  agree(comm, err);
  const std::string pfile = (fs::path(out.path) / ("part-" + std::to_string(rank) + ".bin")).string();
  std::vector<std::byte> pbytes = read_all(pfile, err);
  CheckpointHeader h;
  std::span<const std::byte> pay;
  if (err.empty()) err = check_file(pfile, pbytes, h, pay);
  if (err.empty()) err = identity_error(h, expected, pfile);
  if (err.empty()) {
    std::uint64_t want[3];
    std::memcpy(want, mpay.data() + 24 * static_cast<std::size_t>(rank), sizeof want);
    if (h.kind != CheckpointHeader::kPart || h.part != static_cast<std::uint32_t>(rank) || h.time_ps != m.time_ps ||
        want[0] != pay.size() || want[1] != checkpoint_checksum(pay)) {
      err = pfile + ": header: does not belong to " + mfile +
            " (another part, time or checkpoint); use an intact checkpoint";
    }
  }
  agree(comm, err);
  out.time_ps = m.time_ps;
  out.payload.assign(pay.begin(), pay.end());
  return out;
}

}  // namespace fabricsim::engine
