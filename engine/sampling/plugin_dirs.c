/* The plugin search list: --plugin-dir flags, $SPECDEC_PLUGIN_PATH, then
 * the "plugins" folder beside the binary. */
#include "engine/sampling/plugin_dirs.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sampling/host_text.h"
#include "engine/sampling/sampler_host.h"

void sd_plugin_dirs_free(char **dirs, int n) {
    if (!dirs)
        return;
    for (int i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
}

int sd_dirs_add(char ***dirs, int *n, int *cap, const char *dir, size_t len) {
    for (int i = 0; i < *n; i++)
        if (strlen((*dirs)[i]) == len && !memcmp((*dirs)[i], dir, len))
            return 0;
    if (sd_host_grow((void **)dirs, cap, *n + 1, sizeof **dirs))
        return -1;
    char *c = malloc(len + 1);
    if (!c)
        return -1;
    memcpy(c, dir, len);
    c[len] = '\0';
    (*dirs)[(*n)++] = c;
    return 0;
}

int sd_plugin_dirs(const char *const *flag_dirs, int n_flag, char ***dirs, int *n_dirs,
                   sd_err *e) {
    char **list = NULL;
    int n = 0, cap = 0;
    *dirs = NULL;
    *n_dirs = 0;
    for (int i = 0; i < n_flag; i++)
        if (flag_dirs[i][0] && sd_dirs_add(&list, &n, &cap, flag_dirs[i], strlen(flag_dirs[i])))
            goto oom;
    const char *env = getenv(SD_PLUGIN_PATH_ENV);
    while (env && *env) {
        const char *colon = strchr(env, ':');
        size_t len = colon ? (size_t)(colon - env) : strlen(env);
        if (len && sd_dirs_add(&list, &n, &cap, env, len))
            goto oom;
        env = colon ? colon + 1 : NULL;
    }
    /* The binary's own directory: /proc/self/exe names the executable even
     * when it was started through a relative path or a link. */
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            slash[1] = '\0';
            char *p = sd_join_path(exe, "plugins");
            if (!p || sd_dirs_add(&list, &n, &cap, p, strlen(p))) {
                free(p);
                goto oom;
            }
            free(p);
        }
    }
    *dirs = list;
    *n_dirs = n;
    return 0;
oom:
    sd_plugin_dirs_free(list, n);
    return sd_fail(e, "out of memory building the plugin search path");
}
