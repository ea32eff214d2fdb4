/* SPDX-License-Identifier: MIT */
/*
 * version.c - the library's version at run time, from the macros of the
 * bonsai.h it was built with (the Makefile reads the same macros).
 */
#include "bonsai.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *bonsai_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = BONSAI_VERSION_MAJOR;
    if (minor)
        *minor = BONSAI_VERSION_MINOR;
    if (patch)
        *patch = BONSAI_VERSION_PATCH;
    return STR(BONSAI_VERSION_MAJOR) "." STR(BONSAI_VERSION_MINOR) "." STR(
        BONSAI_VERSION_PATCH);
}
