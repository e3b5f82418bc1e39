// The emulated twins of the kernels with gfx90a's wave size, dot4 and matrix-op layout.
#define TINYLLM_EMU_TARGET 9010
#define TINYLLM_EMU_NAMESPACE gfx90a
#define TINYLLM_EMU_TWINS twins_gfx90a
#include "kernels_amd/emu/twins.inc"
