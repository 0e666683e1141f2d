"""The KV engine from Python: `recbench.KVEngine` (the C type recbench._kv.KVEngine).

    kv = recbench.KVEngine(index_type="DRAM_PET_HASH", value_size=512, capacity=1_000_000)
    kv.batch_put(keys, rows)                  # keys: uint64 array/sequence, rows: n*512 bytes
    rows, found = kv.batch_get_flat(keys)     # rows: uint8 (n, 512); misses are zero rows
    kv.batch_get_flat(keys, out=emb)          # fill an existing float32 (n, 128) array in place

Index types: DRAM_PET_HASH, DRAM_EXTENDIBLE_HASH (alias DRAM), SSD_EXTENDIBLE_HASH (aliases SSD,
CCEH; needs path=, a directory whose files keep the data across close/reopen).
"""

from recbench._kv import KVEngine

INDEX_TYPES = ("DRAM_PET_HASH", "DRAM_EXTENDIBLE_HASH", "SSD_EXTENDIBLE_HASH")

__all__ = ["INDEX_TYPES", "KVEngine"]
