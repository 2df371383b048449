#include "sim/device/timing.h"

namespace gpusim {

SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d, const KernelModel& model) {
  if (e.recorded_duration.ns() >= 0) return e.recorded_duration;
  return model.Duration(e, d);
}

SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d) {
  return EventDuration(e, d, KernelModelOf(d));
}

}  // namespace gpusim
