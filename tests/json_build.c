/* json_build.c — see json_build.h. */
#include "tests/json_build.h"

double tj_val(size_t i) {
    return (double)((int)((i * 37 + 11) % 17) - 8) / 8.0;
}

json_t *tj_matrix(size_t rows, size_t cols, size_t seed) {
    json_t *m = json_array();
    for (size_t r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (size_t c = 0; c < cols; c++)
            json_array_append_new(row, json_real(tj_val(seed + r * cols + c)));
        json_array_append_new(m, row);
    }
    return m;
}

json_t *tj_vector(size_t n, size_t seed) {
    json_t *v = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(v, json_real(tj_val(seed + i)));
    return v;
}
