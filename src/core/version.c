/*
 * version.c - the version string; the commit is stamped in by CMake.
 */
#include "onebit.h"
#include "ob_gitstamp.h" /* OB_GIT_COMMIT, OB_BUILD_NUMBER (tools/gitstamp.cmake) */


#define OB_STR2(x) #x
#define OB_STR(x) OB_STR2(x)

const char *ob_version_string(void) {
    return OB_STR(OB_VERSION_MAJOR) "." OB_STR(OB_VERSION_MINOR) "." OB_STR(OB_VERSION_PATCH)
        " (commit " OB_GIT_COMMIT ")";
}
