--- `rdma_cm` (librdmacm): `require "ibverbs.cm"`.  Addresses are strings "ip:port" ("[::1]:7471" for IPv6).
--
--     local cm = require "ibverbs.cm"
--     local ch = assert(cm.event_channel())
--     local id = assert(ch:create_id{ps = "tcp"})
--     assert(id:resolve_addr(nil, "192.0.2.1:7471", 2000))
--     assert(cm.expect(ch, "addr_resolved", 5))
--
-- @module ibverbs.cm

local cm = {}

--- Creates an event channel (`rdma_create_event_channel`).
-- @treturn ibverbs.cm_channel
-- @return[2] nil, message, errno
-- @errno ENODEV no RDMA device; ENOMEM
function cm.event_channel() end

--- Creates a synchronous id (`rdma_create_id` without a channel: each call waits for its event).
-- @tparam[opt] table attr `ps` ("tcp" (RC, default), "udp" (UD), "ib", "ipoib")
-- @treturn ibverbs.cm_id
-- @return[2] nil, message, errno
-- @errno ENODEV, ENOMEM
function cm.create_id(attr) end

--- Resolves addresses (`rdma_getaddrinfo`).
-- @tparam[opt] string node host or address
-- @tparam[opt] string service port
-- @tparam[opt] table hints `flags` ({"passive", "numerichost", "noroute", ...}), `family`, `qp_type`, `port_space`,
-- `src_addr`, `dst_addr`
-- @treturn ibverbs.cm_addrinfo
-- @return[2] nil, message, errno
-- @errno what `rdma_getaddrinfo` returns (ENODEV, EADDRNOTAVAIL, ...)
function cm.getaddrinfo(node, service, hints) end

--- Creates an id with its QP from an address (`rdma_create_ep`), as `rdma_server`/`rdma_client` do.
-- @tparam ibverbs.cm_addrinfo ai
-- @tparam[opt] table attr `pd`, `qp_init_attr` (as `pd:create_qp`; without it no QP is made)
-- @treturn ibverbs.cm_id (synchronous; `id.qp`, `id.send_cq`, `id.recv_cq`)
-- @return[2] nil, message, errno
-- @errno EADDRNOTAVAIL, ENODEV, ENOMEM
function cm.create_ep(ai, attr) end

--- Waits for the next event on a channel and checks its name.
-- @tparam ibverbs.cm_channel ch
-- @tparam string name `"addr_resolved"`, `"route_resolved"`, `"connect_request"`, "established", ...
-- @tparam[opt] number timeout seconds
-- @treturn table the event (see `cm_channel:get_event`)
-- @return[2] nil, message, errno, event (another event came: errno is -status, or EPROTO)
-- @errno ETIMEDOUT; EPROTO or the event's -status when another event came
function cm.expect(ch, name, timeout) end

--- librdmacm's device contexts (`rdma_get_devices`), borrowed: closing one destroys nothing.
-- Each holds librdmacm's reference to its device until it is collected (then `rdma_free_devices`).
-- @treturn {ibverbs.context,...}
-- @return[2] nil, message, errno
-- @errno ENODEV no RDMA device
function cm.get_devices() end

--- librdmacm's name of an event type (`rdma_event_str`).
-- @tparam string|integer event a name as events give it ("established") or the C value
-- @treturn string "RDMA_CM_EVENT_ESTABLISHED"; "UNKNOWN EVENT" for other values
function cm.event_str(event) end

return cm
