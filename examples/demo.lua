#!/usr/bin/env lua5.4
--- demo.lua: show every RDMA device, its ports and their GIDs.
--   tools/rxe-vm lua5.4 examples/demo.lua   (what `make demo` runs)
local ibv = require "ibverbs"

local devices = assert(ibv.devices())
if #devices == 0 then
  io.stderr:write("no RDMA devices\n")
  os.exit(1)
end
for _, d in ipairs(devices) do
  local ctx = assert(ibv.open(d.name))
  local attr = ctx:query_device()
  print(string.format("%s: node GUID %s, %s transport, %d port(s), max_qp %d",
    d.name, d.guid, d.transport, attr.phys_port_cnt, attr.max_qp))
  for port = 1, attr.phys_port_cnt do
    local p = assert(ctx:query_port(port))
    print(string.format("  port %d: %s, active MTU %d, link layer %s", port, p.state, p.active_mtu, p.link_layer))
    for _, g in ipairs(ctx:query_gid_table()) do
      if g.port_num == port then
        print(string.format("    GID[%d] %s (%s)", g.gid_index, g.gid, g.gid_type))
      end
    end
  end
  ctx:close()
end
