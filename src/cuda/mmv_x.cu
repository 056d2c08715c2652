/*
 * mmv_x.cu - the decode matrix-vector kernel (mmv.cuh) instantiated for IQ4_XS
 * and the ternary types (TQ1_0, TQ2_0). One file per type family so the
 * kernels compile in parallel.
 */
#include "mmv.cuh"

OB_MMV_INSTANTIATE(OB_TYPE_IQ4_XS)
OB_MMV_INSTANTIATE(OB_TYPE_TQ1_0)
OB_MMV_INSTANTIATE(OB_TYPE_TQ2_0)
