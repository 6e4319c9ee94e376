/*
 * tasks.c — how a phase's work is cut into tasks and run (plan.h).
 *
 * A phase is a set of independent tasks: the tiles of a GEMM's result
 * (projection, ΔE) or the blocks of query rows of the heads (attend).
 * attn_run hands them to the caller's runner as one run, or runs them in
 * turn on the calling thread when there is no runner (or one task). The
 * cut depends on the shape alone, so every runner makes the very same sgemm
 * calls on the very same data, and the results are bit for bit equal
 * whatever the threads. A task writes only its own part, so tasks need no
 * lock; a failing task stores its code in the call's one atomic int (the
 * first stored wins) and the tasks after it skip their work. The runner's
 * stop is asked once per phase, before it, on the calling thread.
 */
#include "attention/plan.h"

/*
 * Tiles start at ATTN_TILE × ATTN_TILE and are halved (columns first, down
 * to ATTN_TILE_MIN) until there are ATTN_TILES_MIN of them, enough to keep
 * two to four threads busy to the end; tiny results stay one tile.
 *
 * A result of at most ATTN_TILE rows (a projection or ΔE of a few hundred
 * tokens) is cut instead into full-height tiles, ATTN_TILES_FEW of equal
 * width or as many of at most ATTN_TILE_WIDE columns as it takes (unless
 * the cut above gives fewer): each sgemm packs its rows of E (or Z) once
 * per tile, so 128-wide tiles re-packed them 18 times for GPT-2's QKV at
 * n = 128, and its 12 ΔE tiles were 64 wide (bench/README.md, (a)).
 */
#ifndef ATTN_TILE
#define ATTN_TILE 256
#endif
#ifndef ATTN_TILE_MIN
#define ATTN_TILE_MIN 64
#endif
#ifndef ATTN_TILES_MIN
#define ATTN_TILES_MIN 12
#endif
#ifndef ATTN_TILES_FEW
#define ATTN_TILES_FEW 4
#endif
#ifndef ATTN_TILE_WIDE
#define ATTN_TILE_WIDE 1024
#endif

attn_tiling attn_tiling_make(size_t rows, size_t cols) {
    return attn_tiling_aligned(rows, cols, 1);
}

attn_tiling attn_tiling_aligned(size_t rows, size_t cols, size_t quantum) {
    /* Halved column tiles stay multiples of the kernels' widths (16), or
     * of the quantum. */
    const size_t unit = quantum > 1 ? quantum : 16;
    attn_tiling g = {rows, cols, attn_min(rows, ATTN_TILE), attn_min(cols, ATTN_TILE), 0, 0};
    if (quantum > 1) g.cb = attn_min(cols, attn_div_up(g.cb, quantum) * quantum);
    for (;;) {
        g.nr = attn_div_up(rows, g.rb), g.nc = attn_div_up(cols, g.cb);
        if (g.nr * g.nc >= ATTN_TILES_MIN) break;
        size_t half = attn_div_up(g.cb / 2, unit) * unit;
        if (g.cb >= 2 * ATTN_TILE_MIN && g.cb >= g.rb && half < g.cb)
            g.cb = half;
        else if (g.rb >= 2 * ATTN_TILE_MIN)
            g.rb /= 2;
        else
            break;
    }
    if (rows > ATTN_TILE) return g;
    size_t few = attn_div_up(cols, ATTN_TILE_WIDE);
    if (few < ATTN_TILES_FEW) few = ATTN_TILES_FEW;
    if (few >= g.nr * g.nc) return g;
    g.rb = rows;
    g.cb = attn_min(cols, attn_div_up(attn_div_up(cols, few), unit) * unit);
    g.nr = 1, g.nc = attn_div_up(cols, g.cb);
    return g;
}

int attn_run(attn_call *c, attn_task_fn task, size_t count) {
    const attn_runner *runner = c->runner;
    if (runner && runner->stop && runner->stop(runner->ctx)) attn_call_fail(c, ATTN_FAIL_STOPPED);
    if (atomic_load(&c->rc)) return atomic_load(&c->rc);
    if (runner && count > 1)
        runner->run(runner->ctx, task, c, count);
    else
        for (size_t t = 0; t < count && !atomic_load(&c->rc); t++)
            task(c, t, c->ws);
    return atomic_load(&c->rc);
}

void attn_call_fail(attn_call *c, int rc) {
    int none = 0;
    atomic_compare_exchange_strong(&c->rc, &none, rc);
}
