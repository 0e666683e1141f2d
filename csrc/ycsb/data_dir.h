/*
 * data_dir.h — (internal to csrc/ycsb) the required, writable data path of a file-backed binding.
 */
#ifndef RS_YCSB_DATA_DIR_H
#define RS_YCSB_DATA_DIR_H

#include "recstore/ycsb.h"

/* Read path property `key` (required), create the directory (is_file: its parent directory) with
 * parents, and check it is writable. RS_EINVAL if unset, RS_EIO naming key/value/source. */
int rs_ycsb_data_path(const rs_ycsb_props *props, const char *key, int is_file, const char **out,
                      rs_error *err);

#endif
