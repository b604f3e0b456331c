/* The C API from C99: convcore.h (with the enums it makes from convcore/algorithms.def) compiles
 * as C, and every forward algorithm is declared. Prints one line per algorithm. */
#include <stdio.h>

#include "convcore/convcore.h"

int main(void) {
    int a;
    for (a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
        convcoreAlgorithmInfo_t info;
        if (convcoreGetAlgorithmInfo(CONVCORE_PASS_FORWARD, a, &info) != CONVCORE_STATUS_SUCCESS) {
            fprintf(stderr, "%s\n", convcoreGetLastErrorString());
            return 1;
        }
        printf("%s %g\n", info.name, info.errorBoundFloat);
    }
    return CONVCORE_FWD_ALGO_CYCLIC_MINIMAL == 10 && CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL == 7 ? 0 : 2;
}
