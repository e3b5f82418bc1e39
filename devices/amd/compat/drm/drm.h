// Debian's <linux/kfd_ioctl.h> includes <drm/drm.h>, which libdrm-dev installs as <libdrm/drm.h>.
#include <libdrm/drm.h>
