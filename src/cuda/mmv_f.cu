/*
 * mmv_f.cu - the decode matrix-vector kernel (mmv.cuh) instantiated for float
 * weights (F32, F16, BF16). One file per type family so the kernels compile in
 * parallel.
 */
#include "mmv.cuh"

OB_MMV_INSTANTIATE(OB_TYPE_F32)
OB_MMV_INSTANTIATE(OB_TYPE_F16)
OB_MMV_INSTANTIATE(OB_TYPE_BF16)
