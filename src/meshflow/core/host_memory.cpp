#include "meshflow/core/host_memory.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "meshflow/core/error.h"

namespace mf {

namespace {

// A control group's memory limit (cgroup v2 memory.max, v1 memory.limit_in_bytes); 0: none.
double cgroup_limit_bytes() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(path);
    std::string v;
    if (!(f >> v) || v == "max") continue;
    try {
      return std::stod(v);  // v1 writes a page-rounded INT64_MAX when unlimited: larger than any host
    } catch (const std::exception&) {
    }
  }
  return 0;
}

}  // namespace

std::string gigabytes(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}

HostMemory host_memory() {
  struct sysinfo si {};
  const double unit = sysinfo(&si) == 0 ? static_cast<double>(si.mem_unit) : 0.0;
  const double swap = static_cast<double>(si.totalswap) * unit;
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  HostMemory h{physical + swap, gigabytes(physical) + " of memory and " + gigabytes(swap) + " of swap"};
  const double limit = cgroup_limit_bytes();
  if (limit > 0 && limit < physical)
    h = {limit + swap, "the control group's limit of " + gigabytes(limit) + " and " + gigabytes(swap) + " of swap"};
  return h;
}

void check_host_holds(double bytes, const std::string& need, const std::string& advice) {
  const HostMemory host = host_memory();
  MF_CHECK(bytes <= host.bytes, need, gigabytes(bytes), "; this host has ", host.what, advice);
}

}  // namespace mf
