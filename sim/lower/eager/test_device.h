// Test helper for the eager device-memory tests: a shipped device by name.
#ifndef GPUSIM_SIM_LOWER_EAGER_TEST_DEVICE_H_
#define GPUSIM_SIM_LOWER_EAGER_TEST_DEVICE_H_

#include <string>

#include <gtest/gtest.h>

#include "sim/config/loader.h"

namespace gpusim {

// configs/devices/NAME.yaml; a test failure when it does not load.
inline DeviceSpec Device(const std::string& name) {
  absl::StatusOr<DeviceSpec> d = LoadDeviceSpec(name, "");
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : DeviceSpec{};
}

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_EAGER_TEST_DEVICE_H_
