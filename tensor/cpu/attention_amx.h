// AMX tiles for the bf16 flash attention forward (attention_flash.cpp): the two products of
// a (query tile, key tile) pair, scores = q k^T and o += p v, on AMX's bf16 tile unit, with
// the operands read as bf16 where the f32 path widens them (Note [AMX attention tiles] in
// attention_amx.cpp). Used where the level in force is `amx` and the head dim a multiple
// of 32; every call on a thread lies between amx_tiles_begin() and amx_tiles_end() there.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace fitgrad::cpu {

// Whether the AMX tiles run for head dim d: the level in force is `amx`, the operating
// system granted this process AMX's tile data (asked once), and d % 32 == 0.
bool amx_attention_usable(int64_t d);

// Loads the tile configuration on the calling thread (other AMX code, oneDNN's, may have
// changed it since), and releases the tiles afterwards.
void amx_tiles_begin();
void amx_tiles_end();

// s(nq, kTileK) = scale * q(nq, d) @ k(nk, d)^T in f32, row stride kTileK; rows past nq are
// left as they were, columns past nk are 0 (the caller masks them). q holds round_up(nq, 16)
// rows (the rows past nq of any value). kpack is (d / 2, kTileK) u32 of scratch.
void amx_scores(int64_t nq, int64_t nk, int64_t d, float scale, const BFloat16* q,
                const BFloat16* k, uint32_t* kpack, float* s);

// o(nq, d) += bf16(p(nq, nk)) @ v(nk, d), p with row stride kTileK, o with row stride d and
// round_up(nq, 16) rows (the rows past nq take junk). Scratch: vpack (kTileK / 2, d) u32 and
// pb (kTileQ, kTileK) bf16.
void amx_accumulate(int64_t nq, int64_t nk, int64_t d, const float* p, const BFloat16* v,
                    uint32_t* vpack, BFloat16* pb, float* o);

}  // namespace fitgrad::cpu
