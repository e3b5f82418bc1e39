// The NULL device's factory (devices/null/null_device.cpp).
#pragma once

#include "devices/device.h"

#include <memory>

namespace devices::null {
std::unique_ptr<Device> make_device();
}
