// Device timing: how long one trace event takes on a device. The entry point
// the engine calls; the model itself is a KernelModel (kernel_model.h):
// by default the tiled roofline (impl/tiled.h) with ring α–β collectives
// (collective_model.h).
#ifndef GPUSIM_SIM_DEVICE_TIMING_H_
#define GPUSIM_SIM_DEVICE_TIMING_H_

#include <string>
#include <string_view>

#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/device/kernel_model.h"
#include "sim/trace/trace.h"

namespace gpusim {

// The framework op of a timed event: its `op` (traces/FORMAT.md 1.2) when
// recorded, else its name's last "module.path:" component up to the first
// blank (the PyTorch recorder names compute events
// "transformer.h.0.mlp.act:mul" and "mul_ (remat)"). What the kernel model's
// ATen-kernel rules and SimResult::time_by_op key on.
std::string EventOpName(const TraceEvent& e);
// The same name as a view into `e`'s op or name: no string made (the
// kernel model asks per event, per device).
std::string_view EventOpNameView(const TraceEvent& e);

// A recorded duration when the trace has one, else `model`'s.
// REQUIRES: e is a timed event (compute, copy or collective).
SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d, const KernelModel& model);
// Same with the model the device's YAML chooses (KernelModelOf(d)).
SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d);

// The host's time to issue `e`: host_ops x host.op + host_modules x
// host.module (Note [Host timeline] in sim/engine/engine.h).
SimTime HostIssueTime(const TraceEvent& e, const DeviceSpec& d);

// Why `d` cannot run `e` at all ("" when it can): a collective over more
// than one device with no link (links.nvlink and links.pcie 0 or absent),
// a host copy with no PCIe link. The engine refuses such an event by name
// rather than time it (a CHECK in the collective model aborted; issue 27).
std::string UnrunnableReason(const TraceEvent& e, const DeviceSpec& d);

// What `e`'s duration on `d` is made of (its FLOPs, bytes, group, the
// device's rates and the keys that set them), for the engine's error when
// the duration is out of range (Note [Checked time], sim/base/units.h).
std::string DescribeDuration(const TraceEvent& e, const DeviceSpec& d);

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_TIMING_H_
