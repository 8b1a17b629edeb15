--- Talking to Slurm: a node's state and drain reason, draining a node with a
-- reason this tool owns, resuming only the nodes it drained itself.
--
--   local slurm = require "ibverbs.fabric.slurm"
--   local node = slurm.node_name()                  -- SLURMD_NODENAME, else this host's name
--   local r = assert(slurm.drain(node, "port_state: port is down"))
--   print(r.action, r.detail)                       -- "drained", "kept" (someone else's drain), ...
--   r = assert(slurm.resume(node))                  -- "resumed", "kept", "none"
--   local st = assert(slurm.node_state(node))       -- {state = "IDLE+DRAIN", drain = true, reason =, ours =}
--   local lines, errs = slurm.settle({node3 = "link ..."}, {"node1", "node2"}) -- many nodes, one run's verdicts
--
-- Every call runs scontrol (slurm.SCONTROL: IBVL_SCONTROL from the
-- environment, else "scontrol" on PATH) from an argument vector through
-- ibv.spawn (posix_spawnp), never through a shell, and kills it after
-- slurm.TIMEOUT seconds.  Failures return nil, message naming the command,
-- its exit status and what it printed.  A drain's reason starts with slurm.PREFIX
-- ("ibverbs:"): a node drained with any other reason was drained by
-- someone else and is never resumed nor re-drained by this module.
local core = require "ibverbs.core"

local slurm = {}

slurm.PREFIX = "ibverbs:"
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

--- A reason as Slurm gets it: slurm.PREFIX, one space, the text on one line
-- (control characters become spaces, runs of blanks one), cut at slurm.REASON_MAX.
function slurm.reason(text)
  local t = tostring(text):gsub("[%c]", " "):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  local r = slurm.PREFIX .. " " .. t
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

-- One node's record of `scontrol show node`: its state table, or nil.
local function parse_record(text)
  local state = text:match("%f[%w]State=(%S+)")
  if not state then return nil end
  local reason = text:match("\n%s*Reason=([^\n]*)")
  if reason then reason = reason:gsub("%s*%[[^%]]*%]%s*$", "") end
  return { state = state, drain = state:find("DRAIN") ~= nil, reason = reason,
    ours = reason ~= nil and reason:sub(1, #slurm.PREFIX) == slurm.PREFIX }
end

--- A node's state as `scontrol show node` gives it: {state = "IDLE+DRAIN",
-- drain = bool, reason = text or nil (without Slurm's "[user@time]"), ours =
-- bool (the reason starts with slurm.PREFIX)}, or nil, message.
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

--- Drains node with slurm.reason(text) unless someone else drained it:
-- {action = "drained" (now, or again with the new reason) | "kept" (drained
-- by someone else: left alone), detail = text}, or nil, message.
function slurm.drain(node, text)
  checked_node(node, "drain")
  local st, err = slurm.node_state(node)
  if not st then return nil, err end
  if st.drain and not st.ours then
    return { action = "kept", detail = string.format("%s left alone: drained by someone else (Reason=%s)", node,
      tostring(st.reason)) }
  end
  local reason = slurm.reason(text)
  local _, uerr = slurm.scontrol({ "update", "NodeName=" .. node, "State=DRAIN", "Reason=" .. reason })
  if uerr then return nil, uerr end
  return { action = "drained", detail = string.format("%s drained: %s", node, reason) }
end

--- Resumes node when this module drained it: {action = "resumed" | "kept"
-- (drained by someone else: left alone) | "none" (not drained), detail =
-- text}, or nil, message.
function slurm.resume(node)
  checked_node(node, "resume")
  local st, err = slurm.node_state(node)
  if not st then return nil, err end
  if not st.drain then return { action = "none", detail = node .. " is not drained (" .. st.state .. ")" } end
  if not st.ours then
    return { action = "kept", detail = string.format("%s left alone: drained by someone else (Reason=%s)", node,
      tostring(st.reason)) }
  end
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
-- node is at fault, why: a short text): drain it (opts.drain) or resume it
-- when this module drained it and it passes now (opts.undrain); returns the
-- line to print ("slurm: node1 drained: ibverbs: ...", "slurm: node1
-- left alone: ..."), false when there is nothing to do or say (not asked,
-- or a passing node that is not drained), or nil, message (scontrol failed).
function slurm.act(node, bad, why, opts)
  local r, err
  if bad and opts.drain then
    r, err = slurm.drain(node, why)
  elseif not bad and opts.undrain then
    r, err = slurm.resume(node)
  else
    return false
  end
  if not r then return nil, "slurm: " .. err end
  if r.action == "none" then return false end
  return "slurm: " .. r.detail
end

--- One run's word on many nodes (fabric_matrix.lua --drain): drains every
-- node of bad (node -> why) and resumes every node of passed (a list) whose
-- reason is ours, reading every state with one `scontrol show node` and
-- resuming with one update.  A node drained for another reason is left
-- alone; a node bad names is never resumed.  Returns the lines to print
-- ("slurm: node3 drained: ibverbs: ...", "slurm: node2 left alone: ...",
-- "slurm: node1 resumed (was: ...)") and the failures ("slurm: ...").
function slurm.settle(bad, passed)
  local names = {}
  for node in pairs(bad) do names[#names + 1] = checked_node(node, "settle") end
  table.sort(names)
  local lines, errs = {}, {}
  local states, err = slurm.all_states()
  if not states then return lines, { "slurm: " .. err } end
  local function other(node, st)
    lines[#lines + 1] = string.format("slurm: %s left alone: drained by someone else (Reason=%s)", node,
      tostring(st.reason))
  end
  for _, node in ipairs(names) do
    local st = states[node]
    if not st then
      errs[#errs + 1] = "slurm: " .. node .. ": not a node of this cluster (scontrol show node does not list it)"
    elseif st.drain and not st.ours then
      other(node, st)
    else
      local reason = slurm.reason(bad[node])
      local _, uerr = slurm.scontrol({ "update", "NodeName=" .. node, "State=DRAIN", "Reason=" .. reason })
      if uerr then errs[#errs + 1] = "slurm: " .. uerr else
        lines[#lines + 1] = string.format("slurm: %s drained: %s", node, reason)
      end
    end
  end
  local resume, was = {}, {}
  for _, node in ipairs(passed) do
    local st = states[checked_node(node, "settle")]
    if st and st.drain and not bad[node] and not was[node] then
      if st.ours then resume[#resume + 1], was[node] = node, st.reason else other(node, st) end
    end
  end
  table.sort(resume)
  if #resume > 0 then
    local _, uerr = slurm.scontrol({ "update", "NodeName=" .. table.concat(resume, ","), "State=RESUME" })
    if uerr then errs[#errs + 1] = "slurm: " .. uerr else
      for _, node in ipairs(resume) do
        lines[#lines + 1] = string.format("slurm: %s resumed (was: %s)", node, was[node])
      end
    end
  end
  return lines, errs
end

return slurm
