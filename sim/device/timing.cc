#include "sim/device/timing.h"

#include <cmath>

namespace gpusim {

SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d, const KernelModel& model) {
  if (e.recorded_duration.ns() >= 0) return e.recorded_duration;
  return model.Duration(e, d);
}

SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d) {
  return EventDuration(e, d, KernelModelOf(d));
}

SimTime HostIssueTime(const TraceEvent& e, const DeviceSpec& d) {
  if (e.host_ops == 0 && e.host_modules == 0) return SimTime(0);
  return SimTime(std::llround(e.host_ops * static_cast<double>(d.host_op_cost.ns()))) +
         d.host_module_cost * e.host_modules;
}

}  // namespace gpusim
