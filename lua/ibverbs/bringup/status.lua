--- A rank's exit status from rank 0's verdict, which fabric_check across
-- ranks (ibverbs.bringup.check.wide) and fabric_matrix share: rank 0 sends
-- every rank {bad = the ranks whose nodes have a verdict, any = whether any
-- node has one} at the end of a run, and each rank exits by it.
--
--   local status = require "ibverbs.bringup.status"
--   return status.own(f.rank, o.exit_any, f:bcast(verdict))   -- the tool exits with it
local status = {}

--- This rank's exit status from verdict (not a table: it did not arrive, 2):
-- 0 when this rank is not in bad, 1 when it is; exit_any (--exit-any): 1 on
-- every rank when any.
function status.own(rank, exit_any, verdict)
  if type(verdict) ~= "table" then return 2 end
  if exit_any then return verdict.any and 1 or 0 end
  for _, r in ipairs(verdict.bad or {}) do
    if r == rank then return 1 end
  end
  return 0
end

return status
