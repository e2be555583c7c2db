// AVX2 dot products for the formats of ref/unpacked_quants.h that have no packed
// form (Q5_0 is packed: kernels/packed_matrix.h): Q4_1, Q5_1, IQ4_NL against Q8_0 activations; Q2_K, Q3_K, Q5_K, IQ4_XS against Q8_K. The
// 32-blocks are unpacked in registers; Q5_K has a kernel of its own; the other
// super-blocks are unpacked into a ref::Unpacked256 (quants in registers, scales as
// the reference unpacks them), once a block, whose integers then meet 1 or 4
// activation rows. Call only when
// CpuHasAvx2(); checked against the reference in unpacked_avx2_test.cc.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/ref/unpack.h"

namespace tachyon::avx2 {

using UnpackedDotFn = float (*)(const void* w, const void* x, int64_t n);
using UnpackedDot4Fn = void (*)(const void* w, const void* x, int64_t x_stride, int64_t n, float* out);

// The kernels of a type (null for the other types). The 4-row kernel's out[k] is
// bit-identical to the 1-row kernel on row k.
UnpackedDotFn FindUnpackedDot(GgmlType type);
// The super-block unpacker these kernels use (null for Q5_K), byte for byte ref::FindUnpack256's.
ref::Unpack256Fn FindUnpack256Avx2(GgmlType type);
UnpackedDot4Fn FindUnpackedDot4(GgmlType type);

}  // namespace tachyon::avx2
