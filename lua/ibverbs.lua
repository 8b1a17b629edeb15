--- lua-ibverbs: RDMA verbs for Lua.
--
--   local ibv = require "ibverbs"
--   local ctx <close> = assert(ibv.open("rxe0"))
--
-- The C module ibverbs.core does the work; this file adds what reads better
-- in Lua.  Each ibverbs/*.lua extension module receives the module table.
local core = require "ibverbs.core"

local ibv = core

--- Extends the methods of a userdata type ("ibverbs.qp") with a table of functions.
function ibv.extend(typename, funcs)
  local methods = core.methods(typename)
  for k, f in pairs(funcs) do methods[k] = f end
end

return ibv
