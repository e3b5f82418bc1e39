// Linked into tinyllm_fake_gpu (the tinyllm CLI with the test-support fakes): from before main, the
// registry's "AMD" is a fake /dev/kfd whenever TINYLLM_FAKE_KFD is set.
#include "devices/amd/fake/fake_kfd.h"

namespace {
const bool installed = (amd::install_fake_kfd(), true);
}  // namespace
