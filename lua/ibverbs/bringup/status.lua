--- A rank's exit status from rank 0's verdict, which fabric_check across
-- ranks (ibverbs.bringup.check.wide) and fabric_matrix share: rank 0 sends
-- every rank {bad = the ranks whose nodes have a verdict, any = whether any
-- node has one, fabric = the number of fabric_matrix's verdicts on the
-- fabric itself (ibverbs.bringup.matrix.localize's: they name no node)} at
-- the end of a run, and each rank exits by it.
--
--   local status = require "ibverbs.bringup.status"
--   return status.own(f.rank, o.exit_any, f:bcast(verdict))   -- the tool exits with it
local status = {}

status.FABRIC = 3 -- rank 0's status when the fabric's verdicts are all there is (its own node has none)

--- This rank's exit status from verdict (not a table: it did not arrive, 2):
-- 0 when this rank is not in bad, 1 when it is; exit_any (--exit-any): 1 on
-- every rank when any.  Rank 0 exits status.FABRIC (3) where it would exit
-- 0 and the fabric has verdicts: the run found faults no node pays for.
function status.own(rank, exit_any, verdict)
  if type(verdict) ~= "table" then return 2 end
  local own = 0
  if exit_any then own = verdict.any and 1 or 0 else
    for _, r in ipairs(verdict.bad or {}) do
      if r == rank then own = 1 end
    end
  end
  if own == 0 and rank == 0 and (verdict.fabric or 0) > 0 then return status.FABRIC end
  return own
end

return status
