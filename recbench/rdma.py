"""RDMA verbs device discovery through libibverbs.so.1 in cffi ABI mode.

`devices()` lists the verbs devices of this host with their ports (state, link layer, GIDs) and
their kind (`device_kind`: `rxe` for soft-RoCE, `siw` for soft-iWARP, otherwise the kernel driver
of the hardware, from sysfs), which the runner reports as the rows' fabric. It
needs no compiler and no build of recbench against libibverbs: the library is opened at call time,
so a host without the library or without any device gets an empty list, and `devices_status()`
says why. The runner's preflight uses it on every host; the RC transport tests use it to decide
whether to skip.

Only ABI-stable entry points are declared: ibv_get_device_list / ibv_free_device_list,
ibv_get_device_name, ibv_open_device / ibv_close_device, ibv_query_port (the exported symbol takes
the compat port attribute struct, whose leading fields are the ones declared below) and
ibv_query_gid. Ports are probed from 1 upwards until ibv_query_port fails, which avoids
declaring the large ibv_device_attr struct.
"""

import logging
import os

LIBRARY = "libibverbs.so.1"
MAX_PORTS = 16
MAX_GIDS = 256

_CDEF = """
struct ibv_device;
struct ibv_context;
struct ibv_port_attr {
    int      state;
    int      max_mtu;
    int      active_mtu;
    int      gid_tbl_len;
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint32_t bad_pkey_cntr;
    uint32_t qkey_viol_cntr;
    uint16_t pkey_tbl_len;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t  lmc;
    uint8_t  max_vl_num;
    uint8_t  sm_sl;
    uint8_t  subnet_timeout;
    uint8_t  init_type_reply;
    uint8_t  active_width;
    uint8_t  active_speed;
    uint8_t  phys_state;
    uint8_t  link_layer;
    uint8_t  flags;
    uint16_t port_cap_flags2;
    uint8_t  _reserved[64];
};
union ibv_gid { uint8_t raw[16]; };
struct ibv_device **ibv_get_device_list(int *num_devices);
void ibv_free_device_list(struct ibv_device **list);
const char *ibv_get_device_name(struct ibv_device *device);
struct ibv_context *ibv_open_device(struct ibv_device *device);
int ibv_close_device(struct ibv_context *context);
int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr);
int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid);
"""

PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
LINK_LAYERS = {0: "UNSPECIFIED", 1: "InfiniBand", 2: "Ethernet"}

log = logging.getLogger(__name__)


def _format_gid(raw):
    b = bytes(raw)
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


def _load(library):
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    return ffi, ffi.dlopen(library)


def _port_info(ffi, lib, ctx, port_num):
    attr = ffi.new("struct ibv_port_attr *")
    if lib.ibv_query_port(ctx, port_num, attr) != 0:
        return None
    gids = []
    gid = ffi.new("union ibv_gid *")
    for index in range(min(max(attr.gid_tbl_len, 0), MAX_GIDS)):
        if lib.ibv_query_gid(ctx, port_num, index, gid) != 0:
            break
        if any(gid.raw):
            gids.append({"index": index, "gid": _format_gid(gid.raw)})
    return {
        "port": port_num,
        "state": PORT_STATES.get(attr.state, str(attr.state)),
        "link_layer": LINK_LAYERS.get(attr.link_layer, str(attr.link_layer)),
        "lid": attr.lid,
        "active_mtu": 128 << attr.active_mtu if 1 <= attr.active_mtu <= 5 else None,
        "gids": gids,
    }


SYSFS_IB = "/sys/class/infiniband"


def device_kind(name, sysfs=SYSFS_IB):
    """'rxe' / 'siw' for the software devices, else the driver of the device behind it (mlx5_core,
    ...), 'unknown' when sysfs does not say. Software devices have no `device` link but a
    `parent` (the netdev they run on); siw reports node type RNIC (iWARP), rxe a CA."""
    base = os.path.join(sysfs, name)
    driver = os.path.join(base, "device", "driver")
    if os.path.exists(driver):
        return os.path.basename(os.path.realpath(driver))
    if os.path.exists(os.path.join(base, "parent")):
        try:
            with open(os.path.join(base, "node_type")) as f:
                node_type = f.read()
        except OSError:
            node_type = ""
        return "siw" if "RNIC" in node_type else "rxe"
    return "unknown"


def devices_status(library=LIBRARY):
    """Return (devices, reason). `devices` is a list of dicts {name, kind, ports: [{port, state,
    link_layer, lid, active_mtu, gids: [{index, gid}]}]}; `reason` is None when at least one device
    was found, otherwise a sentence saying why the list is empty (library missing, no device)."""
    try:
        ffi, lib = _load(library)
    except (OSError, ImportError) as exc:
        return [], f"{library} cannot be loaded: {exc}"
    num = ffi.new("int *")
    dev_list = lib.ibv_get_device_list(num)
    if dev_list == ffi.NULL:
        err = ffi.errno
        detail = os.strerror(err) if err else "no devices"
        return [], f"no RDMA verbs device: ibv_get_device_list failed ({detail})"
    found = []
    try:
        for i in range(num[0]):
            dev = dev_list[i]
            name = ffi.string(lib.ibv_get_device_name(dev)).decode()
            ctx = lib.ibv_open_device(dev)
            if ctx == ffi.NULL:
                found.append({"name": name, "kind": device_kind(name), "ports": [],
                              "error": "ibv_open_device failed: "
                              + os.strerror(ffi.errno or 0)})
                continue
            try:
                ports = []
                for port_num in range(1, MAX_PORTS + 1):
                    info = _port_info(ffi, lib, ctx, port_num)
                    if info is None:
                        break
                    ports.append(info)
                found.append({"name": name, "kind": device_kind(name), "ports": ports})
            finally:
                lib.ibv_close_device(ctx)
    finally:
        lib.ibv_free_device_list(dev_list)
    if not found:
        return [], "no RDMA verbs device (ibv_get_device_list returned 0 devices)"
    return found, None


def devices(library=LIBRARY):
    """The verbs devices of this host (see devices_status); [] when there are none."""
    return devices_status(library)[0]


def main(argv=None):
    import json

    found, reason = devices_status()
    print(json.dumps({"devices": found, "reason": reason}, indent=2))
    return 0 if found else 1


if __name__ == "__main__":
    raise SystemExit(main())
