// C-callable entry point of the host C model (loaded with ctypes by state_observer.accel); not part of
// the HLS project.  It calls the HLS top function unchanged, compiled for one GJ_PRECISION per library.
#include "gauss_jordan.h"

extern "C" int gj_call(void *A, void *b, int *piv, int n, int mode)
{
    return gauss_jordan(static_cast<gj_t *>(A), static_cast<gj_t *>(b), piv, n, mode);
}
