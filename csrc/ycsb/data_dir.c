/*
 * data_dir.c — the data location of a file-backed binding: a required path property, created
 * (with its parents) if missing and checked writable up front, so a bad path fails at open with
 * a message naming the property, its value and where it came from, instead of deep in an engine.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_dir.h"

static int mkdirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc && errno != EEXIST) return -1;
    }
    if (mkdir(path, 0755) && errno != EEXIST) return -1;
    return 0;
}

int rs_ycsb_data_path(const rs_ycsb_props *props, const char *key, int is_file, const char **out,
                      rs_error *err) {
    const char *path = rs_ycsb_props_get(props, key, NULL);
    if (!path || !*path)
        return rs_error_set(err, RS_EINVAL,
                            "property %s is not set: give the engine's data %s "
                            "with -p %s=PATH",
                            key, is_file ? "file" : "directory", key);
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return rs_error_set(err, RS_EINVAL, "property %s: path too long", key);
    if (is_file) { /* the directory that will hold the file */
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
    }
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return rs_error_set(err, RS_EIO,
                            "property %s=%s (from %s): %s exists and is not a directory", key, path,
                            rs_ycsb_props_source(props, key), dir);
    if (mkdirs(dir) != 0 || access(dir, W_OK | X_OK) != 0)
        return rs_error_errno(err, RS_EIO, errno,
                              "property %s=%s (from %s): cannot create or write %s", key, path,
                              rs_ycsb_props_source(props, key), dir);
    *out = path;
    return RS_OK;
}
