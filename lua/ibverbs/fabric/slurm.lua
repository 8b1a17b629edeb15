--- Talking to Slurm: a node's state and drain reason, draining a node with a
-- reason that names the tool and what it checked, resuming only the nodes
-- that tool drained, once the same check passed again.
--
--   local slurm = require "ibverbs.fabric.slurm"
--   local node = slurm.node_name()                  -- SLURMD_NODENAME, else this host's name
--   local r = assert(slurm.drain(node, "port_state: port is down", {tool = "fabric_check", ports = {"rxe0:1"}}))
--   print(r.action, r.detail)                       -- "drained", "kept" (left alone), ...
--   r = assert(slurm.resume(node, {tool = "fabric_check", checked = {"rxe0:1"}})) -- "resumed", "kept", "none"
--   local st = assert(slurm.node_state(node))       -- {state = "IDLE+DRAIN", drain =, hold =, reason =, owner =}
--   local lines, errs = slurm.settle("fabric_matrix", {node3 = {why = "link ...", ports = {"rxe0:1"}}},
--     {node1 = {"rxe0:1"}})                          -- many nodes, one run's verdicts
--
-- Every call runs scontrol (slurm.SCONTROL: IBVL_SCONTROL from the
-- environment, else "scontrol" on PATH) from an argument vector through
-- ibv.spawn (posix_spawnp), never through a shell, and kills it after
-- slurm.TIMEOUT seconds.  Failures return nil, message naming the command,
-- its exit status and what it printed.
--
-- A drain's reason is "ibverbs <tool> [<scope>]: <text>" (slurm.reason):
-- the tool that drained and what a run of it must check again (the ports,
-- " wide" when only a run across nodes found the fault).  A tool resumes a
-- node only when the reason is its own and this run checked every entry of
-- the scope again on that node, and the node passed (a wide scope: in a run
-- across nodes).  A node whose state holds it (DOWN, FAIL, MAINT, REBOOT,
-- POWER*, FUTURE, NOT_RESPONDING, ...), drained by anyone else, by the other
-- tool, by an earlier version ("ibverbs: ..."), or with a scope that cannot
-- be read, is never drained nor resumed: the line returned says so.
local core = require "ibverbs.core"

local slurm = {}

slurm.PREFIX = "ibverbs" -- a reason of this module's: "ibverbs <tool> [<scope>]: <text>"
slurm.LEGACY = "ibverbs:" -- earlier versions' reasons ("ibverbs: <text>"): never resumed, never re-drained
slurm.SCONTROL = os.getenv("IBVL_SCONTROL") or "scontrol"
slurm.TIMEOUT = 30 -- seconds an scontrol call may take before it is killed
slurm.REASON_MAX = 200 -- characters of a reason kept (Slurm shows it in sinfo -R)

--- Whether name is a single Slurm node name this module accepts ([%w._-]+,
-- not starting with "-"): true, or nil, message.
function slurm.check_node(name)
  if type(name) ~= "string" or not name:find("^[%w_.][%w_.-]*$") or #name > 255 then
    return nil, "bad Slurm node name " .. string.format("%q", tostring(name)) .. " (letters, digits, '.', '_', '-')"
  end
  return true
end

local function checked_node(name, fn)
  local ok, err = slurm.check_node(name)
  if not ok then error("bad argument #1 to '" .. fn .. "' (" .. err .. ")", 3) end
  return name
end

--- This node's Slurm name: SLURMD_NODENAME (set by slurmd for jobs and for
-- its HealthCheckProgram), else the host name up to its first dot.
function slurm.node_name(getenv)
  getenv = getenv or os.getenv
  local name = getenv("SLURMD_NODENAME")
  if name and name ~= "" then return name end
  return (require("ibverbs.fabric.launcher").hostname(getenv):match("^[^.]*"))
end

--- A reason as Slurm gets it: "ibverbs <tool> [<scope>]: <text>", on one line
-- (control characters become spaces, runs of blanks one), cut at
-- slurm.REASON_MAX.  scope = {ports = {"rxe0:1", ...}, wide = bool}: what a
-- run must check again before the drain may be undone (slurm.scope_text);
-- it comes first, so that a cut never reaches it: a scope too long to leave
-- 20 characters of text is written "[*]", which no run can match.
function slurm.reason(tool, scope, text)
  local t = tostring(text):gsub("[%c]", " "):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  local head = string.format("%s %s [%s]: ", slurm.PREFIX, tool, slurm.scope_text(scope))
  if #head > slurm.REASON_MAX - 20 then head = string.format("%s %s [*]: ", slurm.PREFIX, tool) end
  local r = head .. t
  if #r > slurm.REASON_MAX then r = r:sub(1, slurm.REASON_MAX - 3) .. "..." end
  return r
end

--- Runs scontrol with the arguments given (a list of strings): its output
-- (stdout, then stderr), or nil, message naming the command.
function slurm.scontrol(args)
  local argv = { slurm.SCONTROL }
  for i, a in ipairs(args) do argv[i + 1] = tostring(a) end
  local cmd = table.concat(argv, " ")
  local r, err = core.spawn(argv, { timeout = slurm.TIMEOUT })
  if not r then return nil, cmd .. ": " .. err end
  if r.timed_out then return nil, string.format("%s: no answer within %g s", cmd, slurm.TIMEOUT) end
  local text = r.stdout .. r.stderr
  if r.status ~= 0 then
    local how = r.status and ("exit " .. r.status) or ("signal " .. tostring(r.signal))
    return nil, string.format("%s: %s: %s", cmd, how, (text:gsub("%s+$", "")))
  end
  return text
end

-- ------------------------------------------------------------------ scopes

-- A scope entry: a port ("mlx5_1:1") or a whole device ("mlx5_0", which a run
-- covers when it checked any port of it).
local function entry_ok(e)
  return type(e) == "string" and (e:find("^[%w_.][%w_.-]*$") or e:find("^[%w_.][%w_.-]*:%d+$")) ~= nil
end

--- The scope's text in a reason: its entries, sorted, comma-separated, then
-- " wide" when only a multi-rank run found the fault ("rxe0:1,rxe1:1 wide").
-- Entries that are not a device or device:port are left out.
function slurm.scope_text(scope)
  local seen, list = {}, {}
  for _, e in ipairs(scope and scope.ports or {}) do
    if type(e) == "string" and entry_ok(e) and not seen[e] then seen[e] = true; list[#list + 1] = e end
  end
  table.sort(list)
  return table.concat(list, ",") .. ((scope and scope.wide) and " wide" or "")
end

-- A scope's text read back ("rxe0:1,mlx5_0", " wide" after it or not), or nil.
local function parse_scope(s)
  local list, flag = s:match("^([^ ]*)(.*)$")
  if flag ~= "" and flag ~= " wide" then return nil end
  local scope = { ports = {}, wide = flag == " wide" }
  if list ~= "" then
    for e in (list .. ","):gmatch("([^,]*),") do
      if not entry_ok(e) then return nil end
      scope.ports[#scope.ports + 1] = e
    end
  end
  return scope
end

--- Who drained with reason, read back: nil (not a reason of this module's),
-- {legacy = true} (an earlier version's "ibverbs: ...", with neither tool nor
-- scope), or {tool = name, scope = {ports =, wide =} or nil (not readable:
-- cut, or from a later version), text = the rest}.
function slurm.parse_reason(reason)
  if type(reason) ~= "string" then return nil end
  if reason:sub(1, #slurm.LEGACY) == slurm.LEGACY then return { legacy = true } end
  local tool, rest = reason:match("^" .. slurm.PREFIX .. " ([%w_]+) (.*)$")
  if not tool then return nil end
  local s, text = rest:match("^%[([^%]]*)%]: ?(.*)$")
  return { tool = tool, scope = s and parse_scope(s), text = text }
end

-- Whether the run (checked: its list of dev:port) covers scope: every entry
-- checked (a device: any port of it), nothing missing; returns the entries missing.
local function missing(scope, checked)
  local have, devs, out = {}, {}, {}
  for _, c in ipairs(checked) do have[c] = true; devs[c:match("^(.*):%d+$") or c] = true end
  for _, e in ipairs(scope.ports) do
    if not (have[e] or (not e:find(":") and devs[e])) then out[#out + 1] = e end
  end
  return out
end

-- ------------------------------------------------------------------ node states

-- The words of a State= (split at "+", each with its one-character suffix
-- taken off) that leave a node free for this module: anything else (DOWN,
-- FAIL, FAILING, MAINT, REBOOT_*, POWER*, FUTURE, NOT_RESPONDING, UNKNOWN,
-- a word this module does not know) or a suffix other than "-" (planned)
-- holds the node: it is never drained nor resumed.  22.05 writes
-- "IDLE+DRAIN", "DOWN+DRAIN+NOT_RESPONDING", "MIXED+MAINTENANCE+RESERVED";
-- older releases "DOWN*", "IDLE*+DRAIN", "MAINT", "DRAINED", "IDLE~".
local FREE = { IDLE = true, ALLOCATED = true, ALLOC = true, MIXED = true, MIX = true, COMPLETING = true,
  COMP = true, RESERVED = true, RESV = true, CLOUD = true, PLANNED = true, PERFCTRS = true, NPC = true,
  DYNAMIC_NORM = true }
local DRAIN = { DRAIN = true, DRAINING = true, DRAINED = true, DRNG = true }

local function read_state(state)
  local drain, hold = false, false
  for w in state:gmatch("[^+]+") do
    local word, suffix = w:match("^([%u_]*)(.-)$")
    if DRAIN[word] then drain = true elseif not FREE[word] then hold = true end
    if suffix ~= "" and suffix ~= "-" then hold = true end
  end
  return drain, hold
end

-- One node's record of `scontrol show node`: its state table, or nil.
local function parse_record(text)
  local state = text:match("%f[%w]State=(%S+)")
  if not state then return nil end
  local reason = text:match("\n%s*Reason=([^\n]*)")
  if reason then reason = reason:gsub("%s*%[[^%[%]]*%]%s*$", "") end -- Slurm's " [user@time]"
  local drain, hold = read_state(state)
  return { state = state, drain = drain, hold = hold, reason = reason, owner = slurm.parse_reason(reason) }
end

--- Whether a node's state (node_state's) says it runs work: ALLOCATED, MIXED
-- or COMPLETING (a health check there sees the job's traffic on its ports).
function slurm.busy(st)
  for w in tostring(st.state):gmatch("[^+]+") do
    local word = w:match("^([%u_]*)")
    if word == "ALLOCATED" or word == "ALLOC" or word == "MIXED" or word == "MIX" or word == "COMPLETING"
      or word == "COMP" then return true end
  end
  return false
end

--- A node's state as `scontrol show node` gives it: {state = "IDLE+DRAIN",
-- drain = bool, hold = bool (DOWN, FAIL, MAINT, ...: never touched), reason
-- = text or nil (without Slurm's "[user@time]"), owner = slurm.parse_reason's},
-- or nil, message.
function slurm.node_state(node)
  checked_node(node, "node_state")
  local text, err = slurm.scontrol({ "show", "node", node })
  if not text then return nil, err end
  local st = parse_record(text)
  if not st then return nil, "scontrol show node " .. node .. ": no State= in " .. string.format("%q", text) end
  return st
end

--- Every node's state from one `scontrol show node`: name -> state table (as
-- node_state's), or nil, message.
function slurm.all_states()
  local text, err = slurm.scontrol({ "show", "node" })
  if not text then return nil, err end
  local states = {}
  for record in (text .. "\n\n"):gmatch("(NodeName=.-)\n%s*\n") do
    local name, st = record:match("^NodeName=(%S+)"), parse_record("\n" .. record)
    if name and st then states[name] = st end
  end
  return states
end

-- ------------------------------------------------------------------ what a tool may do

local function was(st) return st.reason and (" (Reason=" .. st.reason .. ")") or "" end

-- Why tool may not touch node (state st) at all, or nil: a state that holds
-- it, or a drain that is not tool's own, or whose scope cannot be read.
local function not_ours(node, st, tool)
  if st.hold then return string.format("%s left alone: %s%s", node, st.state, was(st)) end
  if not st.drain then return nil end
  local o = st.owner
  if not o then return string.format("%s left alone: drained by someone else%s", node, was(st)) end
  if o.legacy then
    return string.format("%s left alone: drained by an earlier version of lua-ibverbs ('%s', no tool, no scope): "
      .. "resume it by hand%s", node, slurm.LEGACY, was(st))
  end
  if o.tool ~= tool then
    return string.format("%s left alone: drained by %s, which alone resumes it%s", node, o.tool, was(st))
  end
  if not o.scope then
    return string.format("%s left alone: its drain's scope cannot be read: resume it by hand%s", node, was(st))
  end
end

-- The reason tool drains node with (scope: {ports =, wide =}; merged with the
-- scope of its own drain already there, whose checks are still owed), or
-- nil, the line that says why node is left alone.
local function drain_reason(node, st, tool, scope, text)
  local no = not_ours(node, st, tool)
  if no then return nil, no end
  local ports, wide = {}, scope.wide
  for _, e in ipairs(scope.ports or {}) do ports[#ports + 1] = e end
  if st.drain then
    for _, e in ipairs(st.owner.scope.ports) do ports[#ports + 1] = e end
    wide = wide or st.owner.scope.wide
  end
  return slurm.reason(tool, { ports = ports, wide = wide }, text)
end

-- Whether tool may resume node now (run: {checked = list of dev:port this
-- run checked on node, all passed; multi_rank = bool}): true, or false (not
-- drained), or nil, the line that says why it stays as it is.
local function may_resume(node, st, tool, run)
  local no = not_ours(node, st, tool)
  if no then return nil, no end
  if not st.drain then return false end
  local scope = st.owner.scope
  local left = missing(scope, run.checked or {})
  if #left > 0 then
    return nil, string.format("%s stays drained: this run did not check %s%s", node, table.concat(left, ","), was(st))
  end
  if #(run.checked or {}) == 0 then
    return nil, string.format("%s stays drained: this run checked no port%s", node, was(st))
  end
  if scope.wide and not run.multi_rank then
    return nil, string.format("%s stays drained: found by a run across nodes, which alone resumes it%s", node,
      was(st))
  end
  return true
end

local function checked_tool(tool, fn)
  if type(tool) ~= "string" or not tool:find("^[%w_]+$") then
    error("bad tool name to '" .. fn .. "' (" .. tostring(tool) .. ")", 3)
  end
  return tool
end

--- Drains node for tool (scope: {tool = "fabric_check", ports = {"rxe0:1"},
-- wide = bool}) with slurm.reason(tool, scope, text), unless node is held
-- (DOWN, FAIL, MAINT, ...) or drained by anyone but tool: {action =
-- "drained" (now, or again: the scope of tool's earlier drain kept in the new
-- one) | "kept" (left alone), detail = text}, or nil, message.
function slurm.drain(node, text, scope)
  checked_node(node, "drain")
  local tool = checked_tool(scope and scope.tool, "drain")
  local st, err = slurm.node_state(node)
  if not st then return nil, err end
  local reason, why = drain_reason(node, st, tool, scope, text)
  if not reason then return { action = "kept", detail = why } end
  local _, uerr = slurm.scontrol({ "update", "NodeName=" .. node, "State=DRAIN", "Reason=" .. reason })
  if uerr then return nil, uerr end
  return { action = "drained", detail = string.format("%s drained: %s", node, reason) }
end

--- Resumes node when run's tool drained it and run checked again every port
-- of the drain's scope (run: {tool =, checked = {"rxe0:1", ...}, multi_rank =
-- bool: a wide scope needs one}): {action = "resumed" | "kept" (left alone,
-- or still owed a check: detail says which) | "none" (not drained), detail =
-- text}, or nil, message.
function slurm.resume(node, run)
  checked_node(node, "resume")
  local tool = checked_tool(run and run.tool, "resume")
  local st, err = slurm.node_state(node)
  if not st then return nil, err end
  local ok, why = may_resume(node, st, tool, run)
  if ok == false then return { action = "none", detail = node .. " is not drained (" .. st.state .. ")" } end
  if not ok then return { action = "kept", detail = why } end
  local _, uerr = slurm.scontrol({ "update", "NodeName=" .. node, "State=RESUME" })
  if uerr then -- resumed meanwhile (by a health check that ran alongside this one): nothing left to do
    local again = slurm.node_state(node)
    if again and not again.drain then return { action = "none", detail = node .. " is not drained (" .. again.state
      .. ")" } end
    return nil, uerr
  end
  return { action = "resumed", detail = string.format("%s resumed (was: %s)", node, st.reason) }
end

--- What a checker does with its verdict on its own node (bad: whether the
-- node is at fault, why: a short text; opts: drain, undrain (what it was
-- asked to do), tool, ports (what this run checked on the node: its scope),
-- wide (the fault was found only across nodes), multi_rank (this run ran
-- across nodes)): drain it or resume it; returns the line to print ("slurm:
-- node1 drained: ibverbs fabric_check [rxe0:1]: ...", "slurm: node1 left
-- alone: ..."), false when there is nothing to do or say (not asked, or a
-- passing node that is not drained), or nil, message (scontrol failed).
function slurm.act(node, bad, why, opts)
  local r, err
  if bad and opts.drain then
    r, err = slurm.drain(node, why, { tool = opts.tool, ports = opts.ports, wide = opts.wide })
  elseif not bad and opts.undrain then
    r, err = slurm.resume(node, { tool = opts.tool, checked = opts.ports, multi_rank = opts.multi_rank })
  else
    return false
  end
  if not r then return nil, "slurm: " .. err end
  if r.action == "none" then return false end
  return "slurm: " .. r.detail
end

--- One run's word on many nodes (fabric_matrix.lua --drain), a run across
-- nodes of tool: drains every node of bad (node -> {why = text, ports =
-- its scope}) and resumes every node of passed (node -> the ports it
-- checked, all passed) that tool drained for a scope it checked again,
-- reading every state with one `scontrol show node` and resuming with one
-- update.  A held node, or one drained by anyone else, is left alone; a node
-- bad names is never resumed.  Returns the lines to print ("slurm: node3
-- drained: ibverbs fabric_matrix [rxe0:1]: ...", "slurm: node2 left alone:
-- ...", "slurm: node4 stays drained: ...", "slurm: node1 resumed (was:
-- ...)") and the failures ("slurm: ...").
function slurm.settle(tool, bad, passed)
  checked_tool(tool, "settle")
  local names, pnames = {}, {}
  for node in pairs(bad) do names[#names + 1] = checked_node(node, "settle") end
  for node in pairs(passed) do pnames[#pnames + 1] = checked_node(node, "settle") end
  table.sort(names)
  table.sort(pnames)
  local lines, errs = {}, {}
  local states, err = slurm.all_states()
  if not states then return lines, { "slurm: " .. err } end
  for _, node in ipairs(names) do
    local st = states[node]
    local reason, why
    if st then reason, why = drain_reason(node, st, tool, { ports = bad[node].ports }, bad[node].why) end
    if not st then
      errs[#errs + 1] = "slurm: " .. node .. ": not a node of this cluster (scontrol show node does not list it)"
    elseif not reason then
      lines[#lines + 1] = "slurm: " .. why
    else
      local _, uerr = slurm.scontrol({ "update", "NodeName=" .. node, "State=DRAIN", "Reason=" .. reason })
      if uerr then errs[#errs + 1] = "slurm: " .. uerr else
        lines[#lines + 1] = string.format("slurm: %s drained: %s", node, reason)
      end
    end
  end
  local resume = {}
  for _, node in ipairs(pnames) do
    local st = states[node]
    if st and not bad[node] then
      local ok, why = may_resume(node, st, tool, { checked = passed[node], multi_rank = true })
      if ok then resume[#resume + 1] = node elseif why then lines[#lines + 1] = "slurm: " .. why end
    end
  end
  if #resume > 0 then
    local _, uerr = slurm.scontrol({ "update", "NodeName=" .. table.concat(resume, ","), "State=RESUME" })
    if uerr then errs[#errs + 1] = "slurm: " .. uerr else
      for _, node in ipairs(resume) do
        lines[#lines + 1] = string.format("slurm: %s resumed (was: %s)", node, states[node].reason)
      end
    end
  end
  return lines, errs
end

return slurm
