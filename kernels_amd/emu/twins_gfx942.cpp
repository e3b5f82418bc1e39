// The emulated twins of the kernels with gfx942's wave size, dot4 and matrix-op layout.
#define TINYLLM_EMU_TARGET 942
#define TINYLLM_EMU_NAMESPACE gfx942
#define TINYLLM_EMU_TWINS twins_gfx942
#include "kernels_amd/emu/twins.inc"
