/*
 * tasks.c — how a phase's work is cut into tasks (plan.h).
 *
 * A phase is a set of independent tasks: the tiles of a GEMM's result
 * (projection, ΔE) or the blocks of query rows of the heads (attend), run
 * by batch.c as one run of the caller's runner, or in turn on the calling
 * thread when there is no runner (or one task). The cut depends on the
 * shape alone, so every runner makes the very same sgemm calls on the very
 * same data, and the results are bit for bit equal whatever the threads.
 * A task writes only its own part, so tasks need no lock; a failing task
 * stores its code in its call's one atomic int (the first stored wins) and
 * the call's tasks after it skip their work.
 */
#include "attention/plan.h"

/*
 * Column tiles depend on the columns alone: a result of at least
 * 2·ATTN_TILE_MIN columns is cut into ATTN_TILES_FEW of equal width when
 * that makes them at most ATTN_TILE_FEW_WIDE columns, else into as many of
 * at most ATTN_TILE_WIDE columns as it takes (multiples of the kernels'
 * width, 16, or of the quantum); a narrower one is one column tile. Each
 * sgemm packs its rows of E (or Z) once per tile, so 128-wide tiles
 * re-packed them 18 times for GPT-2's QKV at n = 128, and its 12 ΔE tiles
 * were 64 wide; 4 tiles cost 2 – 4 % more than 2 on one thread, and 2 are
 * what two workers share (bench/README.md, (a)). That the columns never depend
 * on the rows is what lets a batch stack many calls' rows in one product
 * and still give each row the very sgemm columns its own call gives it
 * (batch.c).
 *
 * Rows: a result of at most ATTN_TILE rows (padded to ATTN_ROWS_QUANTUM)
 * is one full-height row of tiles; a taller one is cut into ATTN_TILE_ROWS
 * rows, halved (down to ATTN_TILE_ROWS_MIN) until there are ATTN_TILES_MIN tiles, enough to keep
 * two to four threads busy to the end. Every row tile is a multiple of ATTN_ROWS_QUANTUM rows when
 * the result's rows are (plan.h).
 */
#ifndef ATTN_TILE
#define ATTN_TILE 256
#endif
#ifndef ATTN_TILE_MIN
#define ATTN_TILE_MIN 64
#endif
#ifndef ATTN_TILE_ROWS /* 20 · ATTN_ROWS_QUANTUM; halved, 120 and 60 */
#define ATTN_TILE_ROWS 240
#endif
#ifndef ATTN_TILE_ROWS_MIN
#define ATTN_TILE_ROWS_MIN 60
#endif
/* ATTN_TILE rows padded to ATTN_ROWS_QUANTUM: 256 tokens are one row of tiles */
#define ATTN_TILE_TALL ((ATTN_TILE + ATTN_ROWS_QUANTUM - 1) / ATTN_ROWS_QUANTUM * ATTN_ROWS_QUANTUM)
#ifndef ATTN_TILES_MIN /* 10: GPT-2's 2 column tiles × 5 rows of 240 at n = 1024 */
#define ATTN_TILES_MIN 10
#endif
#ifndef ATTN_TILES_FEW
#define ATTN_TILES_FEW 2
#endif
#ifndef ATTN_TILE_FEW_WIDE
#define ATTN_TILE_FEW_WIDE 2048
#endif
#ifndef ATTN_TILE_WIDE
#define ATTN_TILE_WIDE 1024
#endif

attn_tiling attn_tiling_make(size_t rows, size_t cols) {
    return attn_tiling_aligned(rows, cols, 1);
}

attn_tiling attn_tiling_aligned(size_t rows, size_t cols, size_t quantum) {
    const size_t unit = quantum > 1 ? quantum : 16;
    if (!rows || !cols) return (attn_tiling){rows, cols, 1, 1, 0, 0}; /* no tiles */
    attn_tiling g = {rows, cols, rows <= ATTN_TILE_TALL ? rows : ATTN_TILE_ROWS, cols, 0, 0};
    if (cols >= 2 * ATTN_TILE_MIN) {
        size_t few = cols <= ATTN_TILES_FEW * ATTN_TILE_FEW_WIDE
                         ? ATTN_TILES_FEW
                         : attn_div_up(cols, ATTN_TILE_WIDE);
        g.cb = attn_min(cols, attn_div_up(attn_div_up(cols, few), unit) * unit);
    }
    g.nc = attn_div_up(cols, g.cb);
    for (;;) {
        g.nr = attn_div_up(rows, g.rb);
        if (rows <= ATTN_TILE_TALL || g.nr * g.nc >= ATTN_TILES_MIN ||
            g.rb / 2 < ATTN_TILE_ROWS_MIN)
            break;
        g.rb /= 2;
    }
    return g;
}

void attn_call_fail(attn_call *c, int rc) {
    int none = 0;
    atomic_compare_exchange_strong(&c->rc, &none, rc);
}
