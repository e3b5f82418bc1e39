// The emulated twins of the kernels with gfx1100's wave size, dot4 and matrix-op layout.
#define TINYLLM_EMU_TARGET 1100
#define TINYLLM_EMU_NAMESPACE gfx1100
#define TINYLLM_EMU_TWINS twins_gfx1100
#include "kernels_amd/emu/twins.inc"
