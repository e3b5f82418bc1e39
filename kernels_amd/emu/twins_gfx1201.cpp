// The emulated twins of the kernels with gfx1201's wave size, dot4 and matrix-op layout.
#define TINYLLM_EMU_TARGET 1201
#define TINYLLM_EMU_NAMESPACE gfx1201
#define TINYLLM_EMU_TWINS twins_gfx1201
#include "kernels_amd/emu/twins.inc"
