/*
 * mmv_q.cu - the decode matrix-vector kernel (mmv.cuh) instantiated for the
 * 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, IQ4_NL). One
 * file per type family so the kernels compile in parallel.
 */
#include "mmv.cuh"

OB_MMV_INSTANTIATE(OB_TYPE_Q4_0)
OB_MMV_INSTANTIATE(OB_TYPE_Q4_1)
OB_MMV_INSTANTIATE(OB_TYPE_Q5_0)
OB_MMV_INSTANTIATE(OB_TYPE_Q5_1)
OB_MMV_INSTANTIATE(OB_TYPE_Q8_0)
OB_MMV_INSTANTIATE(OB_TYPE_MXFP4)
OB_MMV_INSTANTIATE(OB_TYPE_IQ4_NL)
