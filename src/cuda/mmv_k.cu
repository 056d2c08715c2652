/*
 * mmv_k.cu - the decode matrix-vector kernel (mmv.cuh) instantiated for the
 * K-quants (Q2_K .. Q6_K). One file per type family so the kernels compile in
 * parallel.
 */
#include "mmv.cuh"

OB_MMV_INSTANTIATE(OB_TYPE_Q2_K)
OB_MMV_INSTANTIATE(OB_TYPE_Q3_K)
OB_MMV_INSTANTIATE(OB_TYPE_Q4_K)
OB_MMV_INSTANTIATE(OB_TYPE_Q5_K)
OB_MMV_INSTANTIATE(OB_TYPE_Q6_K)
