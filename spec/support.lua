--- Shared helpers for the device specs (run inside tools/rxe-vm on rxe0).
local ibv = require "ibverbs"

local support = {}

support.DEVICE = os.getenv("IBV_SPEC_DEVICE") or "rxe0"
support.PORT = 1
support.GID_INDEX = 1 -- ::ffff:192.0.2.1 (RoCE v2) on rxe0

--- Opens the spec device; fails the spec (never skips) when it is missing.
function support.open()
  local ctx, err = ibv.open(support.DEVICE)
  assert(ctx, "the device specs need " .. support.DEVICE .. " (run them with tools/rxe-vm): " .. tostring(err))
  return ctx
end

return support
