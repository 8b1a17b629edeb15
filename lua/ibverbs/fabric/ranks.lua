--- Who is in a fabric group's run, and how a rank is named: the ranks out of
-- the run (tolerant groups bury a rank that leaves or misses a limit; rank 0
-- tells the others in its replies), a rank's name with its host, and the
-- group's broken state.  Functions of the group object (self), which the
-- object, the hub's collect and the relay tree share.
local ranks = {}

--- "rank 2 (node3)" when the host is known, else "rank 2".
function ranks.name(self, rank)
  local host = self.hosts and self.hosts[rank + 1]
  if not host and self.launcher == "rxe-vm" then host = "node" .. (rank + 1) end
  return host and string.format("rank %d (%s)", rank, host) or ("rank " .. rank)
end

--- "rank 1, rank 2 and rank 4 (node5)".
function ranks.names(self, list)
  local t = {}
  for i, r in ipairs(list) do t[i] = ranks.name(self, r) end
  if #t == 1 then return t[1] end
  return table.concat(t, ", ", 1, #t - 1) .. " and " .. t[#t]
end

--- The group is broken from now on (the first message stays): nil, that message.
function ranks.broken(self, msg)
  self.err = self.err or msg
  return nil, self.err
end

local function note(self, r, why)
  self.dead[r] = why
  self.dead_list[#self.dead_list + 1] = { r, why }
end

--- Tolerant groups only: rank r is out of the run from now on (why: text);
-- its connection, if this rank holds one, is dropped.
function ranks.bury(self, r, why)
  if self.dead[r] then return end
  note(self, r, why)
  local c = self.peers[r]
  if c then self.hub:drop(c); self.peers[r] = nil end
end

--- The ranks rank 0 says are out ({rank, why} pairs), taken in; what is
-- not such a pair (a frame that lies) is left out.
function ranks.learn_dead(self, list)
  if type(list) ~= "table" then return end
  for _, d in ipairs(list) do
    local r = type(d) == "table" and tonumber(d[1])
    r = r and r == math.floor(r) and r
    if r and r >= 0 and r < self.size and not self.dead[r] then note(self, r, tostring(d[2])) end
  end
end

--- What a reply says of the ranks out: the list, or nothing when there are none.
function ranks.dead_said(self) return #self.dead_list > 0 and self.dead_list or nil end

-- ---------------------------------------------------------------- the relay tree's groups
-- Rank 0 is group 0 alone: it relays no group.  The other ranks form groups
-- of k in rank order, group g (1 and up) ranks (g - 1) k + 1 to g k, the
-- first of them its relay.

--- The group of rank r (groups of k).
function ranks.group_of(k, r)
  if r == 0 then return 0 end
  return math.floor((r - 1) / k) + 1
end

--- The relay of group g (1 and up).
function ranks.relay_of(k, g) return (g - 1) * k + 1 end

--- How many groups size ranks make, group 0 included.
function ranks.ngroups(k, size) return 1 + math.ceil((size - 1) / k) end

--- The last rank of group g (g >= 1) among size ranks.
function ranks.last_of(k, g, size) return math.min(g * k, size - 1) end

return ranks
