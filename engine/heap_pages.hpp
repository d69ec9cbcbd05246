// Transparent huge pages for the heap: the decision app/main.cpp takes at startup (run itself
// again with glibc.malloc.hugetlb=1 under the kernel's THP mode "madvise") and the note the
// `run` info line prints about it. Results never depend on it; only speed and memory do.
#pragma once

#include <optional>
#include <string>

namespace fabricsim::engine {

/// The name of the environment variable that carries this process's command name (comm, at most
/// 15 characters) across its own re-exec: its presence also means "already executed again", so
/// the exec happens at most once whatever glibc does with GLIBC_TUNABLES.
inline constexpr const char* kHugePagesReexecVar = "FABRICSIM_HUGEPAGES_REEXEC";

/// The value the GLIBC_TUNABLES string `tunables` (colon-separated name=value pairs; may be null)
/// gives glibc.malloc.hugetlb ("1": transparent huge pages; the last setting wins, as in glibc's
/// parser), or nullopt when it does not set it.
std::optional<std::string> tunables_hugetlb_value(const char* tunables);

/// Why this process must not run itself again for huge pages, or "" when it may: the user turned
/// it off (FABRICSIM_HUGEPAGES=0, off, false or no), a library is preloaded (LD_PRELOAD: valgrind, an allocator),
/// malloc is not glibc's (heaptrack removes itself from LD_PRELOAD; jemalloc; a sanitizer: the
/// tunable would do nothing and the tool would lose the run), secure execution (set-user/group-ID
/// or file capabilities, AT_SECURE: glibc ignores and erases the tunable), the program was started
/// by running the dynamic loader explicitly (/proc/self/exe is then the loader, AT_BASE 0), or a
/// debugger or tracer is attached (TracerPid: gdb would stop twice in main).
std::string huge_pages_skip_reason();

/// Under THP mode "madvise", when huge_pages_skip_reason() is "" and GLIBC_TUNABLES does not
/// mention glibc.malloc.hugetlb: executes /proc/self/exe again (same pid, arguments, descriptors)
/// with glibc.malloc.hugetlb=1 appended to GLIBC_TUNABLES (the user's tunables kept). At most
/// once. In the new image it restores the command name (ps, pgrep, killall see the name the user
/// started, not "exe") and removes kHugePagesReexecVar. Call first thing in main, before MPI is
/// initialized. Never throws; if the exec fails the process goes on with the environment as it was.
void reexec_with_huge_pages(char** argv);

/// One phrase for the `run` info line: how this process's heap is paged, and why when huge pages
/// were not requested.
std::string heap_pages_note();

}  // namespace fabricsim::engine
