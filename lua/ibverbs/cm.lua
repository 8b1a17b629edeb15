--- ibverbs.cm: rdma_cm for Lua.
--
--   local cm = require "ibverbs.cm"
--   local ch = assert(cm.event_channel())
--   local id = assert(ch:create_id{ps = "tcp"})      -- or cm.create_id{ps = "tcp"}: synchronous
--   assert(id:resolve_addr(nil, "192.0.2.1:7471", 2000))
--   local ev = assert(cm.expect(ch, "addr_resolved", 5))
--
-- The ids, channels and address lists are C userdata (csrc/cm/cm_*.c); this file
-- adds the rdma_verbs memory helpers and event conveniences.
local ibv = require "ibverbs"

local cm = ibv.cm


local function reg(id, access, buf, offset, length)
  local pd = id.pd
  if not pd then return nil, "the cm id has no PD yet (bind or resolve it first)", ibv.errno.EINVAL end
  return pd:reg_mr(buf, access, offset, length)
end

ibv.extend("ibverbs.cm_id", {
  --- rdma_reg_msgs: an MR for sends and receives on the id's PD.
  reg_msgs = function(id, buf, offset, length) return reg(id, {"local_write"}, buf, offset, length) end,
  --- rdma_reg_read: an MR the peer may read.
  reg_read = function(id, buf, offset, length)
    return reg(id, {"local_write", "remote_read"}, buf, offset, length)
  end,
  --- rdma_reg_write: an MR the peer may write.
  reg_write = function(id, buf, offset, length)
    return reg(id, {"local_write", "remote_write"}, buf, offset, length)
  end,
  --- rdma_dereg_mr
  dereg_mr = function(_, mr) return mr:close() end,
})

--- Waits for the next event on ch and checks its name: returns the event, or
-- nil, msg, errno (the event table as a 4th value when it was another one).
function cm.expect(ch, name, timeout)
  local ev, msg, errno = ch:get_event(timeout)
  if not ev then return nil, msg, errno end
  if ev.event ~= name then
    return nil, string.format("expected cm event %s, got %s (status %d)", name, ev.event, ev.status),
      ev.status < 0 and -ev.status or ibv.errno.EPROTO, ev
  end
  return ev
end

return cm
