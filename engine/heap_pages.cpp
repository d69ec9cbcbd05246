#include "engine/heap_pages.hpp"

#include <cctype>

#include <dlfcn.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

namespace fabricsim::engine {

namespace {

/// The kernel's THP mode line ("always [madvise] never"), "" when it cannot be read. The stream
/// is closed on return: it used to stay open across the exec (libstdc++ does not open with
/// O_CLOEXEC) and every fabricsim, and every child it spawned, held the sysfs file as fd 3.
std::string thp_mode_line() {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(mode, line)) return "";
  return line;
}

/// Whether `malloc` resolves to the C library's (the object that also defines `execv`): not when
/// a preloaded library or the executable itself defines it (heaptrack, jemalloc, a sanitizer).
/// dlsym, not the address of malloc: in a non-PIE executable that would be its own PLT entry.
bool malloc_is_glibcs() {
  void* const m_sym = dlsym(RTLD_DEFAULT, "malloc");
  void* const c_sym = dlsym(RTLD_DEFAULT, "execv");
  Dl_info m{};
  Dl_info c{};
  if (m_sym == nullptr || c_sym == nullptr || dladdr(m_sym, &m) == 0 || dladdr(c_sym, &c) == 0) return false;
  return m.dli_fbase == c.dli_fbase;
}

/// Whether a debugger or tracer (gdb, strace) is attached: TracerPid in /proc/self/status.
bool traced() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("TracerPid:", 0) == 0) return std::strtol(line.c_str() + 10, nullptr, 10) != 0;
  }
  return false;
}

}  // namespace

std::optional<std::string> tunables_hugetlb_value(const char* tunables) {
  if (tunables == nullptr) return std::nullopt;
  const std::string s = tunables;
  const std::string key = "glibc.malloc.hugetlb=";
  std::optional<std::string> value;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(':', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    if (item.rfind(key, 0) == 0) value = item.substr(key.size());
    pos = end + 1;
  }
  return value;
}

std::string huge_pages_skip_reason() {
  const char* off = std::getenv("FABRICSIM_HUGEPAGES");
  if (off != nullptr) {
    // 0, off, false, no (any case) turn it off; other values leave it on.
    std::string v(off);
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (v == "0" || v == "off" || v == "false" || v == "no") return std::string("FABRICSIM_HUGEPAGES=") + off;
  }
  // Under valgrind (its vgpreload library) the process image is valgrind's tool, and an exec of
  // /proc/self/exe would run that without valgrind's launcher; a profiler's or allocator's
  // preload would start over in the new image.
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload != nullptr && preload[0] != '\0') return "LD_PRELOAD is set";
  // heaptrack's library takes itself out of LD_PRELOAD when it loads: the new image would run
  // without it and the profile would end at main.
  if (!malloc_is_glibcs()) return "malloc is not glibc's";
  // glibc ignores glibc.malloc.hugetlb in secure execution and erases it from the environment,
  // so the new image would not see it and would run itself again without end.
  if (getauxval(AT_SECURE) != 0) return "secure execution (set-user/group-ID or capabilities)";
  // `ld.so fabricsim ...`: the kernel ran the loader, so /proc/self/exe is the loader, and
  // running it with our arguments would load a program named after the first argument.
  if (getauxval(AT_BASE) == 0) return "started through the dynamic loader";
  if (traced()) return "under a debugger or tracer";
  return "";
}

void reexec_with_huge_pages(char** argv) {
  if (const char* comm = std::getenv(kHugePagesReexecVar); comm != nullptr) {
    // The new image: give the process back the name it was started with (an exec of
    // /proc/self/exe names it "exe"), and never run again.
    if (comm[0] != '\0') prctl(PR_SET_NAME, comm, 0, 0, 0);
    unsetenv(kHugePagesReexecVar);
    return;
  }
  const char* tun = std::getenv("GLIBC_TUNABLES");
  const std::string tunables = tun == nullptr ? "" : tun;
  if (tunables.find("glibc.malloc.hugetlb") != std::string::npos) return;  // set by the user
  if (thp_mode_line().find("[madvise]") == std::string::npos) return;       // always / never: nothing to ask
  if (!huge_pages_skip_reason().empty()) return;
  char comm[17] = {};
  if (prctl(PR_GET_NAME, comm, 0, 0, 0) != 0) comm[0] = '\0';
  const std::string value = tunables.empty() ? "glibc.malloc.hugetlb=1" : tunables + ":glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  if (setenv(kHugePagesReexecVar, comm, 1) != 0) {
    if (tun == nullptr) unsetenv("GLIBC_TUNABLES");
    else setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
    return;
  }
  execv("/proc/self/exe", argv);
  // Not reached unless the exec failed: run without huge pages, the environment as it was.
  unsetenv(kHugePagesReexecVar);
  if (tun == nullptr) unsetenv("GLIBC_TUNABLES");
  else setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
}

std::string heap_pages_note() {
  const std::string line = thp_mode_line();
  if (line.empty()) return "4 KiB (no transparent huge pages)";
  if (line.find("[always]") != std::string::npos) return "huge (kernel THP always)";
  if (line.find("[never]") != std::string::npos) return "4 KiB (kernel THP never)";
  const auto value = tunables_hugetlb_value(std::getenv("GLIBC_TUNABLES"));
  if (value == "1") return "huge (THP madvise, glibc.malloc.hugetlb=1)";
  if (value == "0") return "4 KiB (THP madvise, GLIBC_TUNABLES has glibc.malloc.hugetlb=0)";
  if (value) return "as GLIBC_TUNABLES says (THP madvise, glibc.malloc.hugetlb=" + *value + ")";
  if (const char* tun = std::getenv("GLIBC_TUNABLES"); tun != nullptr && std::strstr(tun, "glibc.malloc.hugetlb") != nullptr) {
    return "not requested (THP madvise, GLIBC_TUNABLES names glibc.malloc.hugetlb without a value)";
  }
  const std::string why = huge_pages_skip_reason();
  if (why.rfind("FABRICSIM_HUGEPAGES=", 0) == 0) return "4 KiB (THP madvise, " + why + ")";
  return "not requested (THP madvise, " + (why.empty() ? std::string("the re-exec failed") : why) + ")";
}

}  // namespace fabricsim::engine
