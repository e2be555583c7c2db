// The constants of the vector exp and tanh that ops_avx2.cc, attention_avx2.cc and
// ops_avx512.cc compute lane by lane in the same order (so each ISA's results are
// the others', bit for bit). Plain constants: nothing here is compiled code that
// files built for different ISAs could share (see dot_avx2.cc).
#pragma once

namespace tachyon::x86 {

// e^x = 2^k e^r, k = round(x log2 e), r = x - k ln2 with ln2 split in two for
// precision, e^r by its Taylor polynomial of degree 6 (relative error below 3e-7
// for |r| <= ln2 / 2), by Horner's rule from the highest coefficient.
inline constexpr float kLog2E = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693359375f;
inline constexpr float kLn2Low = -2.12194440e-4f;
inline constexpr float kExpTaylor[] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};

// tanh(a) for a < 0.55: a + a^3 p(a^2), p's Taylor coefficients from the x^17
// term's down to -1/3, by Horner's rule.
inline constexpr float kTanhTaylor[] = {6404582.0f / 10854718875.0f, -929569.0f / 638512875.0f, 21844.0f / 6081075.0f,
                                        -1382.0f / 155925.0f,         62.0f / 2835.0f,          -17.0f / 315.0f,
                                        2.0f / 15.0f,                 -1.0f / 3.0f};

}  // namespace tachyon::x86
