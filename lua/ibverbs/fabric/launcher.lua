--- Where a fabric's ranks come from: the launcher's variables (IBV_FABRIC_*,
-- Open MPI, PMI, Slurm, tools/rxe-vm), Slurm's host lists and this host's
-- name.  No sockets opened, no state: every function reads its arguments
-- (getenv: a function like os.getenv) and, for the host name, the system.
-- ibverbs.fabric re-exports detect, hostlist, first_host, slurm_hosts and hostname.
local launcher = {}

--- n when v is a whole number (a string or a number), else nil.
function launcher.int(v)
  local n = tonumber(v)
  if n and n == math.floor(n) then return math.floor(n) end
  return nil
end
local int = launcher.int

-- s without the blanks around it.
local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- The items of a host list, split at the commas outside brackets and
-- trimmed ("node[1-4], node7": node[1-4] and node7), or nil, msg.
local function split_items(list)
  local items, depth, from = {}, 0, 1
  for i = 1, #list do
    local c = list:sub(i, i)
    if c == "[" then
      depth = depth + 1
      if depth > 1 then return nil, "nested '[' in the host list '" .. list .. "'" end
    elseif c == "]" then
      depth = depth - 1
      if depth < 0 then return nil, "unmatched ']' in the host list '" .. list .. "'" end
    elseif c == "," and depth == 0 then
      items[#items + 1] = trim(list:sub(from, i - 1))
      from = i + 1
    end
  end
  if depth ~= 0 then return nil, "unmatched '[' in the host list '" .. list .. "'" end
  items[#items + 1] = trim(list:sub(from))
  for _, item in ipairs(items) do
    if item:gsub("%b[]", ""):find("%s") then
      return nil, "a blank inside '" .. item .. "' in the host list '" .. list .. "'"
    end
  end
  return items
end

-- The values of a bracket's contents ("01-03,07": 01 02 03 07, a range keeping
-- the width of its low bound), or nil, msg.
local function range_values(text, list)
  local values = {}
  for part in text:gmatch("[^,]+") do
    part = trim(part)
    local a, b = part:match("^(%d+)%-(%d+)$")
    if a and tonumber(b) >= tonumber(a) then
      for v = tonumber(a), tonumber(b) do values[#values + 1] = string.format("%0" .. #a .. "d", v) end
    elseif part:match("^%d+$") then
      values[#values + 1] = part
    else
      return nil, "bad range '" .. part .. "' in the host list '" .. list .. "'"
    end
  end
  if #values == 0 then return nil, "empty range in the host list '" .. list .. "'" end
  return values
end

-- The names one item stands for ("rack[1-2]-n[01-02]": every combination, in order), or nil, msg.
local function item_names(item, list)
  local names, pos = { "" }, 1
  while pos <= #item do
    local lb = item:find("[", pos, true)
    local text = item:sub(pos, (lb or #item + 1) - 1)
    for k = 1, #names do names[k] = names[k] .. text end
    if not lb then break end
    local rb = item:find("]", lb, true)
    local values, err = range_values(item:sub(lb + 1, rb - 1), list)
    if not values then return nil, err end
    local grown = {}
    for _, n in ipairs(names) do
      for _, v in ipairs(values) do grown[#grown + 1] = n .. v end
    end
    names, pos = grown, rb + 1
  end
  return names
end

--- A Slurm host list expanded into its names, in order, as `scontrol show
-- hostnames` does: "node[01-03,07],login" -> node01 node02 node03 node07 login,
-- "rack[1-2]-n[01-02]" -> rack1-n01 rack1-n02 rack2-n01 rack2-n02 (a range keeps
-- the width of its low bound); blanks around a comma are left out
-- ("node[1-2], node7", "node[1, 3]").  nil, msg for a list that is not one.
function launcher.hostlist(list)
  if type(list) ~= "string" then
    error("bad argument #1 to 'hostlist' (string expected, got " .. type(list) .. ")", 2)
  end
  local items, err = split_items(list)
  if not items then return nil, err end
  local out = {}
  for _, item in ipairs(items) do
    local names, ierr = item_names(item, list)
    if not names then return nil, ierr end
    for _, n in ipairs(names) do
      if n ~= "" then out[#out + 1] = n end
    end
  end
  return out
end

--- The first host of a Slurm host list: "node[01-04,07],login" -> "node01" (nil for none).
function launcher.first_host(list)
  if not list or list == "" then return nil end
  local hosts = launcher.hostlist(list)
  return hosts and hosts[1]
end

-- Where Slurm put rank 0: the first node of the step (block and cyclic
-- distributions start there).  In a heterogeneous step the step's node list is
-- every component's, sorted; rank 0 is the first task of component 0, on the
-- first node of that component's list.
local function slurm_root(getenv)
  if int(getenv("SLURM_HET_SIZE")) then
    local first = getenv("SLURM_JOB_NODELIST_HET_GROUP_0") or getenv("SLURM_JOB_NODELIST_PACK_GROUP_0")
    if first then return launcher.first_host(first) end
  end
  return launcher.first_host(getenv("SLURM_STEP_NODELIST") or getenv("SLURM_JOB_NODELIST"))
end

--- Each rank's node in a Slurm step, when the variables say it: the step's node
-- list and tasks per node ("2(x3),1"), block distribution (Slurm's default, or
-- one task per node, where every distribution gives the same).  nil otherwise.
function launcher.slurm_hosts(getenv)
  getenv = getenv or os.getenv
  if int(getenv("SLURM_HET_SIZE")) then return nil end
  local nodes = launcher.hostlist(getenv("SLURM_STEP_NODELIST") or "")
  local per = getenv("SLURM_STEP_TASKS_PER_NODE")
  if not nodes or #nodes == 0 or not per then return nil end
  local counts, single = {}, true
  for item in per:gmatch("[^,]+") do
    local n, times = item:match("^(%d+)%(x(%d+)%)$")
    n, times = tonumber(n or item:match("^(%d+)$")), tonumber(times or 1)
    if not n then return nil end
    for _ = 1, times do counts[#counts + 1] = n end
    if n ~= 1 then single = false end
  end
  if #counts ~= #nodes then return nil end
  local dist = getenv("SLURM_DISTRIBUTION")
  if not single and dist and not dist:find("^block") then return nil end
  local hosts = {}
  for i, n in ipairs(counts) do
    for _ = 1, n do hosts[#hosts + 1] = nodes[i] end
  end
  return hosts
end

--- This host's name, without spawning a program (a restricted PATH, a
-- minimal node): the launcher's node name (SLURMD_NODENAME), else
-- gethostname(2) (luasocket's socket.dns.gethostname), else the kernel's
-- /proc/sys/kernel/hostname, else "?".  getenv: a function like os.getenv;
-- gethostname and hostname_file replace those sources (for the specs).
function launcher.hostname(getenv, gethostname, hostname_file)
  getenv = getenv or os.getenv
  local slurm = getenv("SLURMD_NODENAME")
  if slurm and slurm ~= "" then return slurm end
  if not gethostname then
    local ok, socket = pcall(require, "socket")
    gethostname = ok and socket.dns and socket.dns.gethostname
  end
  local name = gethostname and gethostname()
  if type(name) == "string" and name ~= "" then return name end
  local fh = io.open(hostname_file or "/proc/sys/kernel/hostname")
  name = fh and fh:read("l")
  if fh then fh:close() end
  if name and name ~= "" then return name end
  return "?"
end

--- What the launcher says: rank, size, launcher name, the rendezvous host it implies (or nil).
-- getenv: a function like os.getenv (for the specs).  mpirun's variables come
-- before Slurm's: mpirun started inside an allocation launches its daemons
-- with srun, so its processes also see that step's SLURM_PROCID and
-- SLURM_NTASKS (rank 0 of 2 on the second node of three); the same holds for
-- a PMI launcher's proxies.
function launcher.detect(getenv)
  getenv = getenv or os.getenv
  local function pair(r, s) return int(getenv(r)), int(getenv(s)) end
  local rank, size = pair("IBV_FABRIC_RANK", "IBV_FABRIC_SIZE")
  if rank and size then return rank, size, "env", nil end
  rank, size = pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
  if rank and size then
    -- all ranks on this host: rank 0 is here too
    local host = int(getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) == size and "127.0.0.1" or nil
    return rank, size, "openmpi", host
  end
  rank, size = pair("PMI_RANK", "PMI_SIZE")
  if rank and size then
    local host = int(getenv("MPI_LOCALNRANKS")) == size and "127.0.0.1" or nil
    -- srun --mpi=pmi2: the same rank and size in Slurm's variables
    if not host and int(getenv("SLURM_PROCID")) == rank and int(getenv("SLURM_NTASKS")) == size then
      host = slurm_root(getenv)
    end
    return rank, size, "pmi", host
  end
  rank, size = pair("SLURM_PROCID", "SLURM_NTASKS")
  if not size then size = int(getenv("SLURM_NPROCS")) end
  if rank and size then return rank, size, "slurm", slurm_root(getenv) end
  local node, nodes = pair("RXE_VM_NODE", "RXE_VM_NODES")
  if node and nodes then
    -- tools/rxe-vm --nodes: rank K-1 on node K, rank 0 on node 1's management address
    return node - 1, nodes, "rxe-vm", (getenv("RXE_VM_MGMT_ADDRS") or ""):match("^(%S+)")
  end
  return 0, 1, "none", nil
end

--- The run's name, alike on every rank of it and unlike any other run's:
-- IBV_FABRIC_RUN, else the PMIx namespace (the job's own name wherever PMIx
-- serves it: mpirun's ranks on its own node have no Slurm step, those its
-- daemons started have one), else Slurm's job and step ("slurm 1234.0"),
-- else "" (a run of options alone: its key tells it apart).
function launcher.run_name(getenv)
  local given = getenv("IBV_FABRIC_RUN")
  if given then return given end
  local ns = getenv("PMIX_NAMESPACE")
  if ns then return "pmix " .. ns end
  local job, step = getenv("SLURM_JOB_ID"), getenv("SLURM_STEP_ID") or getenv("SLURM_STEPID")
  if job and step then return "slurm " .. job .. "." .. step end
  return ""
end

launcher.PORT_LOW, launcher.PORT_SPAN, launcher.PORT_TRIES = 18700, 14000, 8

--- The ports rank 0 may listen on under Slurm, every rank computing the same
-- list: the step's reserved ports (SLURM_STEP_RESV_PORTS, "12000-12015" or a
-- list of such), else launcher.PORT_TRIES ports from a place the job and
-- step ids pick among launcher.PORT_SPAN ports from launcher.PORT_LOW (all
-- below the kernel's ephemeral ports); nil outside Slurm; or nil, msg.
function launcher.ports(getenv)
  local resv = getenv("SLURM_STEP_RESV_PORTS")
  if resv and resv ~= "" then
    local list = {}
    for part in resv:gmatch("[^,]+") do
      local a, b = part:match("^%s*(%d+)%-(%d+)%s*$")
      local one = part:match("^%s*(%d+)%s*$")
      a, b = tonumber(a or one), tonumber(b or one)
      if not a or not b or b < a or a < 1 or b > 65535 then
        return nil, "fabric: SLURM_STEP_RESV_PORTS is not a port range: '" .. resv .. "'"
      end
      for port = a, math.min(b, a + 63) do list[#list + 1] = port end
    end
    return list
  end
  local job, step = int(getenv("SLURM_JOB_ID")), int(getenv("SLURM_STEP_ID") or getenv("SLURM_STEPID"))
  if not job or not step then return nil end
  local span = launcher.PORT_SPAN - launcher.PORT_TRIES
  local first = launcher.PORT_LOW + (job * 7919 + (step % 65536) * 104729) % span
  local list = {}
  for i = 0, launcher.PORT_TRIES - 1 do list[#list + 1] = first + i end
  return list
end

return launcher
