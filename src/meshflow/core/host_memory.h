// The memory this process can use, for checks that refuse, with one line, a run the host cannot
// hold (a model's state, a dataset's index) before the kernel kills the process mid-way.
#pragma once
#include <string>

namespace mf {

// Physical memory plus swap, or the control group's limit plus swap when that is lower. `what`
// says which, in GB ("23.4 GB of memory and 0.0 GB of swap").
struct HostMemory {
  double bytes = 0;
  std::string what;
};
HostMemory host_memory();

// "12.3 GB": bytes in GB (10^9) with one decimal.
std::string gigabytes(double bytes);

// Throws "<need><bytes in GB>; this host has <host_memory().what><advice>" when `bytes` exceed
// host_memory(): an index or table refused before minutes of filling it or the kernel's OOM killer.
void check_host_holds(double bytes, const std::string& need, const std::string& advice);

}  // namespace mf
